package web

import (
	"html/template"
	"net/http"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"
	"time"

	"drover/internal/apitypes"
	"drover/internal/job"
	"drover/internal/protocol"
)

var funcs = template.FuncMap{
	"when": func(t any) string {
		switch v := t.(type) {
		case time.Time:
			if v.IsZero() {
				return ""
			}
			return v.UTC().Format("2006-01-02 15:04:05Z")
		case *time.Time:
			if v == nil {
				return ""
			}
			return v.UTC().Format("2006-01-02 15:04:05Z")
		}
		return ""
	},
	"age":      func(t time.Time) string { return age(time.Since(t)) },
	"inc":      func(i int) int { return i + 1 },
	"maxLines": func() int { return maxLines },
	"answerOf": answerOf,
	"webURL":   webURL,
	"usd":      func(v float64) string { return "$" + strconv.FormatFloat(v, 'f', 4, 64) },
	"pct":      func(v float64) string { return strconv.FormatFloat(100*v, 'f', 1, 64) + "%" },
	"short": func(s string) string {
		if len(s) > 12 {
			return s[:12]
		}
		return s
	},
}

// webURL is s when it is an absolute http(s) URL, else "": a forge's
// answer is untrusted, and the page links to nothing else of it.
func webURL(s string) string {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return ""
	}
	return s
}

// age is a duration as a person reads it.
func age(d time.Duration) string {
	switch {
	case d < time.Minute:
		return strconv.Itoa(int(d.Seconds())) + "s"
	case d < time.Hour:
		return strconv.Itoa(int(d.Minutes())) + "m"
	case d < 48*time.Hour:
		return strconv.Itoa(int(d.Hours())) + "h"
	}
	return strconv.Itoa(int(d.Hours()/24)) + "d"
}

func (s *Server) home(w http.ResponseWriter, r *http.Request, ss *session) error {
	http.Redirect(w, r, "/jobs", http.StatusSeeOther)
	return nil
}

// next is where to go after signing in: one of the dashboard's pages
// (pageRoots), else the jobs page. A browser drops tabs and newlines from
// a Location and reads a backslash as a slash, so "/\t/evil.example" would
// leave the hub: only a clean local path of printable ASCII without spaces
// or backslashes passes, with its query.
func next(v string) string {
	const home = "/jobs"
	if strings.ContainsFunc(v, func(r rune) bool { return r <= ' ' || r >= 0x7f || r == '\\' }) ||
		!strings.HasPrefix(v, "/") || strings.HasPrefix(v, "//") {
		return home
	}
	u, err := url.Parse(v)
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || path.Clean(u.Path) != u.Path {
		return home
	}
	root, _, _ := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
	if !slices.Contains(pageRoots(), root) {
		return home
	}
	return v
}

type signinData struct {
	Next, Error string
	Forges      []ForgeButton
}

// ForgeButton is a "Sign in with NAME" on the sign-in page: URL starts
// the forge's sign-in.
type ForgeButton struct{ Name, URL string }

func (s *Server) getSignin(w http.ResponseWriter, r *http.Request) {
	ss, _ := s.current(r)
	d := signinData{Next: next(r.URL.Query().Get("next"))}
	if s.cfg.ForgeButtons != nil {
		d.Forges = s.cfg.ForgeButtons(r.Context(), d.Next)
	}
	if ss == nil && r.URL.Query().Get("ended") != "" {
		d.Error = "Your session ended (it expired, you signed out, or your token was rotated): sign in again."
	}
	s.render(w, r, http.StatusOK, "signin", ss, d)
}

// postSignin exchanges a pasted user token for a session cookie. It checks
// the origin (a cross-site sign-in would sign the browser in as someone
// else); there is no session yet to carry a CSRF token.
func (s *Server) postSignin(w http.ResponseWriter, r *http.Request) {
	if !s.readForm(w, r) {
		return
	}
	d := signinData{Next: next(r.PostForm.Get("next"))}
	u, err := s.b.UserOf(r.Context(), strings.TrimSpace(r.PostForm.Get("token")))
	if err != nil {
		d.Error = "Not signed in: " + s.why(err) + "."
		s.render(w, r, status(err), "signin", nil, d)
		return
	}
	s.SignIn(w, r, u, d.Next, false)
}

// SignIn makes a browser session for u (the one way a session is made:
// the token paste and a forge's sign-in alike) and sends the browser on to
// next. A SameSite=Strict cookie set in a navigation another site started
// (a forge's redirect back, crossSite) is not sent on that navigation's
// next redirect, so the browser goes on from a page of the hub's own.
func (s *Server) SignIn(w http.ResponseWriter, r *http.Request, u User, next string, crossSite bool) {
	sess, exp, err := s.b.NewSession(r.Context(), u)
	if err != nil {
		s.fail(w, r, nil, err)
		return
	}
	http.SetCookie(w, &http.Cookie{
		Name: sessionCookie, Value: sess, Path: "/", Expires: exp, MaxAge: int(time.Until(exp).Seconds()),
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: strings.HasPrefix(BaseURL(r), "https:"),
	})
	s.log.Info("web sign-in", "user", u.Name)
	if crossSite {
		s.render(w, r, http.StatusOK, "signedin", nil, signedInData{Name: u.Name, Next: next})
		return
	}
	http.Redirect(w, r, next, http.StatusSeeOther)
}

type signedInData struct{ Name, Next string }

// ErrorPage shows a refusal: no session, nothing else on the page.
func (s *Server) ErrorPage(w http.ResponseWriter, r *http.Request, status int, title, why string) {
	s.render(w, r, status, "error", nil, errorData{Title: title, Why: why})
}

// Next is where a sign-in may send the browser back to: next, if it is one
// of the dashboard's pages, else the jobs page.
func Next(v string) string { return next(v) }

func (s *Server) signout(w http.ResponseWriter, r *http.Request, ss *session) error {
	if err := s.b.EndSession(r.Context(), ss.token); err != nil {
		return err
	}
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: "", Path: "/", MaxAge: -1,
		HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: strings.HasPrefix(BaseURL(r), "https:")})
	http.Redirect(w, r, "/signin", http.StatusSeeOther)
	return nil
}

type runnerRow struct {
	apitypes.RunnerView
	Current []apitypes.JobView // the running jobs on it the user may see
	// The controls the page offers (the hub still decides): Manage for
	// its owner and admins, CanHub for an admin's own private runner.
	Manage, HubWide, CanHub bool
}

// runnersData is the runners page: the runners the user may use, and the
// order of the user's own accounts with its up/down controls.
type runnersData struct {
	Runners []runnerRow
	Order   []orderRow
	Manage  bool   // some runner has controls: the table has their column
	Version string // of the table as rendered: the live stream sends newer ones
}

// orderRow is one of the user's accounts in their order; Up and Down are
// the positions its buttons move it to (0: no such button).
type orderRow struct {
	apitypes.AccountView
	Up, Down int
	Moved    bool // the account the last control moved (highlighted)
}

func (s *Server) runners(w http.ResponseWriter, r *http.Request, ss *session) error {
	d, err := s.runnersData(r, ss)
	if err != nil {
		return err
	}
	if _, d.Version, err = s.fragment("runners", "runners-table", ss, d); err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, "runners", ss, d)
	return nil
}

// runnersData is what the runners page shows the user now.
func (s *Server) runnersData(r *http.Request, ss *session) (runnersData, error) {
	var d runnersData
	rs, err := s.b.Runners(r.Context(), ss.User)
	if err != nil {
		return d, err
	}
	running, err := s.b.Jobs(r.Context(), ss.User, string(job.Running))
	if err != nil {
		return d, err
	}
	accts, err := s.b.Accounts(r.Context(), ss.User)
	if err != nil {
		return d, err
	}
	d.Runners = make([]runnerRow, len(rs))
	for i, rv := range rs {
		row := &d.Runners[i]
		row.RunnerView = rv
		row.Manage = rv.Owner == ss.Name || ss.Admin
		row.HubWide = rv.Access == apitypes.AccessHub
		row.CanHub = ss.Admin && rv.Owner == ss.Name && !row.HubWide
		d.Manage = d.Manage || (row.Manage && !rv.Revoked)
		for _, j := range running {
			if j.Runner == rv.Name {
				d.Runners[i].Current = append(d.Runners[i].Current, j)
			}
		}
	}
	moved := r.URL.Query().Get("moved")
	for _, a := range accts.Accounts {
		if a.Owner == ss.User.Name {
			d.Order = append(d.Order, orderRow{AccountView: a, Moved: moved == a.Runner+"/"+a.ID})
		}
	}
	slices.SortStableFunc(d.Order, func(a, b orderRow) int { return a.Position - b.Position })
	for i := range d.Order {
		if i > 0 {
			d.Order[i].Up = d.Order[i-1].Position
		}
		if i < len(d.Order)-1 {
			d.Order[i].Down = d.Order[i+1].Position
		}
	}
	return d, nil
}

// moveAccount is an up/down control of the account order.
func (s *Server) moveAccount(w http.ResponseWriter, r *http.Request, ss *session) error {
	pos, err := strconv.Atoi(r.PostForm.Get("position"))
	if err != nil {
		return &Error{Status: http.StatusBadRequest, Msg: "the position must be a number"}
	}
	req := apitypes.MoveAccountRequest{Runner: r.PostForm.Get("runner"), ID: r.PostForm.Get("id"), Position: pos}
	if err := s.b.MoveAccount(r.Context(), ss.User, req); err != nil {
		return err
	}
	http.Redirect(w, r, "/runners?moved="+url.QueryEscape(req.Runner+"/"+req.ID)+"#account-order", http.StatusSeeOther)
	return nil
}

type jobsData struct {
	Filter JobFilter
	States []job.State
	Jobs   []apitypes.JobView
}

func (s *Server) jobs(w http.ResponseWriter, r *http.Request, ss *session) error {
	q := r.URL.Query()
	f := JobFilter{State: q.Get("state"), Project: q.Get("project"), Requester: q.Get("requester"), Agent: q.Get("agent")}
	js, err := s.b.Jobs(r.Context(), ss.User, f.State)
	if err != nil {
		return err
	}
	js = slices.DeleteFunc(js, func(v apitypes.JobView) bool {
		return (f.Project != "" && v.Project != f.Project) || (f.Requester != "" && v.Requester != f.Requester) ||
			(f.Agent != "" && v.Agent != f.Agent)
	})
	s.render(w, r, http.StatusOK, "jobs", ss, jobsData{Filter: f, States: job.States, Jobs: js})
	return nil
}

type jobData struct {
	Job       apitypes.JobView
	Events    []apitypes.EventView
	LastEvent int64
	Attempt   int64 // the attempt whose log is shown
	Log       logWindow
	Query     string // a search in the log, shown from the line of its Hit
	Hit       int64  // -1: no match
	NextFrom  int64  // where the next match is searched from
	Fetch     string // the drover fetch command
	Diff      *diffView
	Open      *protocol.QuestionView
	// Actions the page offers; the hub still decides.
	CanCancel, CanRetry, CanRestart bool
	Version                         string // of the live part as rendered (jobLive)
}

// jobLive is the part of the job page its events stream keeps current:
// the job's facts, the actions its state allows, its attempts.
func jobLive(v apitypes.JobView) jobData {
	d := jobData{Job: v}
	if v.Head != "" && v.Head != v.Base {
		d.Fetch = "drover fetch " + v.ID
	}
	// The state machine says which actions the state allows (the hub still
	// decides, with who may control the job).
	_, errRetry := job.Next(v.State, job.EvRetry)
	_, errRestart := job.Next(v.State, job.EvRestart)
	d.CanCancel = !v.State.Terminal() && !v.Cancelling
	d.CanRetry, d.CanRestart = errRetry == nil, errRestart == nil
	return d
}

func (s *Server) job(w http.ResponseWriter, r *http.Request, ss *session) error {
	id := r.PathValue("id")
	v, err := s.b.Job(r.Context(), ss.User, id)
	if err != nil {
		return err
	}
	evs, err := s.b.Events(r.Context(), ss.User, id, 0)
	if err != nil {
		return err
	}
	d := jobLive(v)
	d.Events = evs
	if len(evs) > 0 {
		d.LastEvent = evs[len(evs)-1].Seq
	}
	d.Attempt, err = strconv.ParseInt(r.URL.Query().Get("attempt"), 10, 64)
	if err != nil || d.Attempt < 0 {
		d.Attempt = 0
	}
	if d.Attempt == 0 && len(v.Attempts) > 0 {
		d.Attempt = v.Attempts[len(v.Attempts)-1].Number
	}
	if d.Query = r.URL.Query().Get("q"); d.Attempt > 0 && d.Query != "" {
		from, err := intParam(r.URL.Query().Get("from"), "from")
		if err != nil {
			return err
		}
		if d.Hit, d.NextFrom, err = s.search(r, ss, id, d.Attempt, from, d.Query); err != nil {
			return err
		}
		if d.Hit >= 0 {
			if d.Log, err = s.at(r, ss, id, d.Attempt, d.Hit); err != nil {
				return err
			}
		}
	} else if d.Attempt > 0 {
		if d.Log, err = s.tail(r, ss, id, d.Attempt); err != nil {
			return err
		}
	}
	if d.Fetch != "" {
		diff, err := s.b.Diff(r.Context(), ss.User, id, diffBytes)
		if err != nil {
			return err
		}
		if diff.Patch != nil {
			dv := renderDiff(diff.Patch, diff.Cut)
			d.Diff = &dv
		}
	}
	for i := range v.Questions {
		if q := &v.Questions[i]; q.Answer == nil || !q.Answer.Approved {
			if v.State == job.Waiting {
				d.Open = q
			}
		}
	}
	if _, d.Version, err = s.fragment("job", "job-live", ss, d); err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, "job", ss, d)
	return nil
}

func (s *Server) jobAction(w http.ResponseWriter, r *http.Request, ss *session) error {
	id, action := r.PathValue("id"), r.PathValue("action")
	var err error
	switch action {
	case "cancel", "retry", "restart", "approve":
		err = s.b.Act(r.Context(), ss.User, id, action)
	case "answer":
		req := apitypes.AnswerRequest{Text: r.PostForm.Get("text")}
		if c := r.PostForm.Get("choice"); c != "" {
			if req.Choice, err = strconv.Atoi(c); err != nil {
				return &Error{Status: http.StatusBadRequest, Msg: "the choice must be a number"}
			}
		}
		err = s.b.Answer(r.Context(), ss.User, id, req)
	default:
		return &Error{Status: http.StatusNotFound, Msg: "no such action: " + action}
	}
	if err != nil {
		return err
	}
	back := "/jobs/" + id
	if next(r.PostForm.Get("next")) == "/questions" {
		back = "/questions"
	}
	http.Redirect(w, r, back, http.StatusSeeOther)
	return nil
}

type questionsData struct {
	Questions []protocol.QuestionView
}

func (s *Server) questions(w http.ResponseWriter, r *http.Request, ss *session) error {
	qs, err := s.b.Questions(r.Context(), ss.User)
	if err != nil {
		return err
	}
	s.render(w, r, http.StatusOK, "questions", ss, questionsData{Questions: qs})
	return nil
}

// answerBox is what the "answer" template shows of a question: its answer
// form, or its pending answer with an approve button for the requester.
type answerBox struct {
	Q         protocol.QuestionView
	CSRF      string
	Requester bool // the viewer requested the job: may approve an answer
	Next      string
}

// answerOf makes the answer box of q for the signed-in user; requester is
// the job's (q's own Requester when "").
func answerOf(q protocol.QuestionView, ss *session, requester, next string) answerBox {
	if requester == "" {
		requester, next = q.Requester, "/questions"
	}
	return answerBox{Q: q, CSRF: ss.CSRF, Requester: ss.Name == requester, Next: next}
}

type projectRow struct {
	apitypes.ProjectView
	Members []string
	Manage  bool // its owner or an admin: offer the member controls
}

func (s *Server) projects(w http.ResponseWriter, r *http.Request, ss *session) error {
	ps, err := s.b.Projects(r.Context(), ss.User)
	if err != nil {
		return err
	}
	rows := make([]projectRow, len(ps))
	for i, p := range ps {
		ms, err := s.b.Members(r.Context(), ss.User, p.Name)
		if err != nil {
			return err
		}
		rows[i] = projectRow{ProjectView: p, Members: ms.Members, Manage: ss.Admin || ms.Owner == ss.Name}
	}
	s.render(w, r, http.StatusOK, "projects", ss, rows)
	return nil
}
