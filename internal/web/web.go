// Package web is the hub's dashboard: server-rendered pages (html/template,
// assets embedded in the binary) for runners, jobs, a job's live log and
// timeline, pipelines and their graphs, evaluations and their numbers, the
// questions inbox and the runner-login approval, with a browser session made from a user token.
//
// The package knows nothing of the store or of the access rules: every read
// and every action goes through Backend, which the hub implements with the
// same functions (and so the same rules) as its API. A page never shows
// more than the API would show the same user.
package web

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"net/url"
	"strings"
	"time"

	"drover/internal/apitypes"
	"drover/internal/protocol"
)

// User is the signed-in user a Backend call acts for; only Backend makes
// one (from a session or a token).
type User struct {
	ID    string
	Name  string
	Admin bool
}

// Error is a refusal the user may read: an HTTP status and why.
type Error struct {
	Status int
	Msg    string
}

func (e *Error) Error() string { return e.Msg }

// JobFilter narrows the jobs page.
type JobFilter struct {
	State, Project, Requester, Agent string
}

// LogSlice is a part of an attempt's log.
type LogSlice struct {
	Data     []byte
	Attempt  int64 // 0: the job has no attempt yet
	Size     int64 // the attempt's log size now
	Complete bool  // the attempt ended and Data reaches its log's end
}

// Backend is what the pages read and do, with the API's access rules. Its
// errors are *Error for refusals (anything else is shown as internal).
type Backend interface {
	// UserOf authenticates a pasted user token (never a runner's).
	UserOf(ctx context.Context, token string) (User, error)
	// NewSession makes a browser session for u; only its hash is kept.
	NewSession(ctx context.Context, u User) (session string, expires time.Time, err error)
	// Session resolves a live, unexpired session.
	Session(ctx context.Context, session string) (User, error)
	// EndSession revokes a session (sign-out).
	EndSession(ctx context.Context, session string) error

	Runners(ctx context.Context, u User) ([]apitypes.RunnerView, error)
	Jobs(ctx context.Context, u User, state string) ([]apitypes.JobView, error)
	Job(ctx context.Context, u User, id string) (apitypes.JobView, error)
	// Events are the job's events after sequence number after (a page).
	Events(ctx context.Context, u User, id string, after int64) ([]apitypes.EventView, error)
	// Log reads attempt's log from offset (at most 1 MiB); attempt 0 is
	// the latest.
	Log(ctx context.Context, u User, id string, attempt, offset int64) (LogSlice, error)
	// Diff is the job's published change, at most max bytes of it (a nil
	// Patch: the job published none).
	Diff(ctx context.Context, u User, id string, max int) (Diff, error)
	// Changed is closed at the job's next change (log, event, state), or
	// for id "" at any job's or runner's; call release when done waiting.
	Changed(id string) (ch <-chan struct{}, release func())
	Questions(ctx context.Context, u User) ([]protocol.QuestionView, error)
	Projects(ctx context.Context, u User) ([]apitypes.ProjectView, error)
	Members(ctx context.Context, u User, project string) (apitypes.MemberList, error)
	// Pipelines are the pipelines the user may see, newest first (their
	// steps may be left out); Pipeline is one with its steps and runs, an
	// unknown one and one the user may not see alike not found. A
	// pipeline's page follows it through Changed(""): its steps are jobs.
	Pipelines(ctx context.Context, u User) ([]apitypes.PipelineView, error)
	Pipeline(ctx context.Context, u User, id string) (apitypes.PipelineView, error)
	// Group is a group of attempts side by side, with their diffs; an
	// unknown one and one the user may not see alike not found.
	Group(ctx context.Context, u User, id string) (apitypes.GroupView, error)
	// Evals are the evaluations the user may see, newest first, without
	// their items; EvalReport is one's numbers and items, an unknown one
	// and one the user may not see alike not found. An evaluation's page
	// follows it through Changed(""): its items are jobs.
	Evals(ctx context.Context, u User) ([]apitypes.EvalView, error)
	EvalReport(ctx context.Context, u User, id string) (apitypes.EvalReport, error)

	// Accounts are the user's accounts, best first, then those shared
	// with the user; MoveAccount puts one of the user's own at a position
	// of that order.
	Accounts(ctx context.Context, u User) (apitypes.AccountList, error)
	MoveAccount(ctx context.Context, u User, req apitypes.MoveAccountRequest) error

	// Access: revoking and sharing a runner or one of its accounts (its
	// owner or an admin), a project's members (its owner or an admin).
	RevokeRunner(ctx context.Context, u User, name string) error
	ShareRunner(ctx context.Context, u User, name string, req apitypes.ShareRequest, share bool) error
	ShareAccount(ctx context.Context, u User, req apitypes.AccountShareRequest, share bool) error
	ChangeMember(ctx context.Context, u User, project, user string, add bool) error

	// Job actions: "cancel", "retry", "restart", "approve" (an answer).
	Act(ctx context.Context, u User, id, action string) error
	Answer(ctx context.Context, u User, id string, req apitypes.AnswerRequest) error
	ApproveRunner(ctx context.Context, u User, req apitypes.ApproveRequest) (apitypes.ApproveResponse, error)
}

// Config configures the pages.
type Config struct {
	// PublicURL is the hub's URL, an origin form posts may come from
	// besides the one the request reached.
	PublicURL string
	Logger    *slog.Logger
	// ForgeButtons are the forges one may sign in with, for a sign-in that
	// goes on to next (nil: none).
	ForgeButtons func(ctx context.Context, next string) []ForgeButton
	// KeepAlive is the interval of the live streams' comments (15s).
	KeepAlive time.Duration
}

// Server serves the pages.
type Server struct {
	b    Backend
	cfg  Config
	log  *slog.Logger
	tmpl map[string]*template.Template
	// tails are the live logs being followed, one reader each.
	tails *tails
}

//go:embed templates/*.html
var templateFS embed.FS

//go:embed static
var staticFS embed.FS

// Cookie names: the session (HttpOnly) and nothing else.
const sessionCookie = "drover_session"

// maxForm bounds a form's body.
const maxForm = 64 << 10

// New parses the templates.
func New(b Backend, cfg Config) (*Server, error) {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.KeepAlive <= 0 {
		cfg.KeepAlive = 15 * time.Second
	}
	cfg.PublicURL = strings.TrimRight(cfg.PublicURL, "/")
	s := &Server{b: b, cfg: cfg, log: cfg.Logger, tmpl: map[string]*template.Template{}, tails: &tails{b: b, m: map[tailKey]*tail{}}}
	pages, err := fs.Glob(templateFS, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("list templates: %w", err)
	}
	for _, p := range pages {
		name := strings.TrimSuffix(strings.TrimPrefix(p, "templates/"), ".html")
		if name == "layout" {
			continue
		}
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFS, "templates/layout.html", p)
		if err != nil {
			return nil, fmt.Errorf("parse template %s: %w", name, err)
		}
		s.tmpl[name] = t
	}
	return s, nil
}

// pageRoots are the first segments of the pages Routes mounts that a
// browser may be sent back to after signing in (next).
func pageRoots() []string {
	return []string{"jobs", "pipelines", "runners", "questions", "projects", "evals"}
}

// Paths the hub mounts (each a ServeMux pattern).
func (s *Server) Routes(mux *http.ServeMux) {
	mux.HandleFunc("GET /{$}", s.page(s.home))
	mux.Handle("GET /static/", http.FileServerFS(staticFS))
	mux.HandleFunc("GET /signin", s.getSignin)
	mux.HandleFunc("POST /signin", s.postSignin)
	mux.HandleFunc("POST /signout", s.post(s.signout))
	mux.HandleFunc("GET /runners", s.page(s.runners))
	mux.HandleFunc("GET /runners/live", s.signedIn(s.liveRunners))
	mux.HandleFunc("POST /runners/{name}/revoke", s.post(s.revokeRunner))
	mux.HandleFunc("POST /runners/{name}/{change}", s.post(s.shareRunner))
	mux.HandleFunc("POST /accounts/move", s.post(s.moveAccount))
	mux.HandleFunc("POST /accounts/{change}", s.post(s.shareAccount))
	mux.HandleFunc("POST /projects/{name}/members/{change}", s.post(s.changeMember))
	mux.HandleFunc("GET /jobs", s.page(s.jobs))
	mux.HandleFunc("GET /jobs/{id}", s.page(s.job))
	mux.HandleFunc("POST /jobs/{id}/{action}", s.post(s.jobAction))
	mux.HandleFunc("GET /jobs/{id}/log", s.signedIn(s.rawLog))
	mux.HandleFunc("GET /jobs/{id}/diff", s.signedIn(s.rawDiff))
	mux.HandleFunc("GET /jobs/{id}/log/window", s.signedIn(s.logWindow))
	mux.HandleFunc("GET /jobs/{id}/log/live", s.signedIn(s.liveLog))
	mux.HandleFunc("GET /jobs/{id}/events/live", s.signedIn(s.liveEvents))
	mux.HandleFunc("GET /pipelines", s.page(s.pipelines))
	mux.HandleFunc("GET /pipelines/{id}", s.page(s.pipeline))
	mux.HandleFunc("GET /pipelines/{id}/live", s.signedIn(s.livePipeline))
	mux.HandleFunc("GET /groups/{id}", s.page(s.group))
	mux.HandleFunc("GET /evals", s.page(s.evals))
	mux.HandleFunc("GET /evals/{id}", s.page(s.eval))
	mux.HandleFunc("GET /evals/{id}/live", s.signedIn(s.liveEval))
	mux.HandleFunc("GET /questions", s.page(s.questions))
	mux.HandleFunc("GET /projects", s.page(s.projects))
	mux.HandleFunc("GET /approve", s.getApprove)
	mux.HandleFunc("POST /approve", s.postApprove)
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		s.render(w, r, http.StatusNotFound, "error", nil, errorData{Title: "Not found", Why: "There is no page at " + r.URL.Path + "."})
	})
}

// session is the signed-in user of a request and the session's CSRF token.
type session struct {
	User
	token string // the cookie's value (never rendered)
	CSRF  string
}

// csrfToken binds form posts to the session: only a page that could read
// the session's pages has it (the cookie itself is HttpOnly).
func csrfToken(sess string) string {
	m := hmac.New(sha256.New, []byte(sess))
	m.Write([]byte("drover csrf v1"))
	return hex.EncodeToString(m.Sum(nil))
}

// current reads the request's session; nil when there is none or it ended.
func (s *Server) current(r *http.Request) (*session, error) {
	c, err := r.Cookie(sessionCookie)
	if err != nil || c.Value == "" {
		return nil, nil
	}
	u, err := s.b.Session(r.Context(), c.Value)
	if err != nil {
		return nil, err
	}
	return &session{User: u, token: c.Value, CSRF: csrfToken(c.Value)}, nil
}

// signedIn runs fn for a signed-in user; others go to the sign-in page
// (streams and fragments get a 401).
func (s *Server) signedIn(fn func(w http.ResponseWriter, r *http.Request, ss *session) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		ss, err := s.current(r)
		if err != nil || ss == nil {
			why := "Sign in to see this page."
			if err != nil {
				why = "Your session ended (" + s.why(err) + "); sign in again."
			}
			if r.Method == http.MethodGet && !strings.Contains(r.URL.Path, "/log/") && !strings.HasSuffix(r.URL.Path, "/live") {
				to := "/signin?next=" + url.QueryEscape(r.URL.RequestURI())
				if err != nil {
					to += "&ended=1"
				}
				http.Redirect(w, r, to, http.StatusSeeOther)
				return
			}
			s.render(w, r, http.StatusUnauthorized, "error", nil, errorData{Title: "Not signed in", Why: why})
			return
		}
		if err := fn(w, r, ss); err != nil {
			s.fail(w, r, ss, err)
		}
	}
}

// page is a signed-in GET that renders a page.
func (s *Server) page(fn func(w http.ResponseWriter, r *http.Request, ss *session) error) http.HandlerFunc {
	return s.signedIn(fn)
}

// post is a signed-in, same-origin form post with the session's CSRF
// token; anything else is refused before fn runs.
func (s *Server) post(fn func(w http.ResponseWriter, r *http.Request, ss *session) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.readForm(w, r) {
			return
		}
		ss, err := s.current(r)
		if err != nil || ss == nil {
			why := "you are not signed in"
			if err != nil {
				why = "your session ended (" + s.why(err) + ")"
			}
			s.refuse(w, r, http.StatusUnauthorized, "Refused: "+why+"; sign in and try again. Nothing was changed.")
			return
		}
		if !ss.validCSRF(r.PostForm.Get("csrf")) {
			s.refuse(w, r, http.StatusForbidden, "Refused: the form's CSRF token is missing or stale (from another session); reload the page and try again. Nothing was changed.")
			return
		}
		if err := fn(w, r, ss); err != nil {
			s.fail(w, r, ss, err)
		}
	}
}

// readForm reads a same-origin form post's body, or refuses the post.
func (s *Server) readForm(w http.ResponseWriter, r *http.Request) bool {
	if why := s.CrossOrigin(r); why != "" {
		s.refuse(w, r, http.StatusForbidden, "Refused: "+why+".")
		return false
	}
	r.Body = http.MaxBytesReader(w, r.Body, maxForm)
	if err := r.ParseForm(); err != nil {
		s.refuse(w, r, http.StatusBadRequest, "The form could not be read.")
		return false
	}
	return true
}

// validCSRF: is v the session's CSRF token?
func (ss *session) validCSRF(v string) bool { return hmac.Equal([]byte(v), []byte(ss.CSRF)) }

// refuse renders a refusal page without acting.
func (s *Server) refuse(w http.ResponseWriter, r *http.Request, status int, why string) {
	s.log.Info("web request refused", "method", r.Method, "path", r.URL.Path, "why", why)
	s.render(w, r, status, "error", nil, errorData{Title: "Refused", Why: why})
}

// why is an error as a user may read it.
func (s *Server) why(err error) string {
	var we *Error
	if errors.As(err, &we) {
		return we.Msg
	}
	s.log.Error("web page", "err", err)
	return "internal error (see the hub's log)"
}

// status is an error's HTTP status.
func status(err error) int {
	var we *Error
	if errors.As(err, &we) {
		return we.Status
	}
	return http.StatusInternalServerError
}

func (s *Server) fail(w http.ResponseWriter, r *http.Request, ss *session, err error) {
	if r.Context().Err() != nil {
		return
	}
	s.render(w, r, status(err), "error", ss, errorData{Title: http.StatusText(status(err)), Why: s.why(err)})
}

type errorData struct{ Title, Why string }

// headers keep pages to themselves: only their own scripts, styles and
// streams, no framing, not cached. Referrer-Policy is same-origin, not
// no-referrer: with no-referrer browsers send "Origin: null" on a form's
// POST, which the origin check has to refuse.
func headers(w http.ResponseWriter, contentType string) {
	hd := w.Header()
	hd.Set("Content-Type", contentType)
	hd.Set("Content-Security-Policy", "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'")
	hd.Set("X-Frame-Options", "DENY")
	hd.Set("Referrer-Policy", "same-origin")
	hd.Set("Cache-Control", "no-store")
	hd.Set("X-Content-Type-Options", "nosniff")
}

// view is what the layout gets: the page's data and the session.
type view struct {
	Page    string
	Session *session
	Data    any
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, code int, name string, ss *session, data any) {
	t := s.tmpl[name]
	headers(w, "text/html; charset=utf-8")
	w.WriteHeader(code)
	if err := t.ExecuteTemplate(w, "layout", view{Page: name, Session: ss, Data: data}); err != nil && r.Context().Err() == nil {
		s.log.Error("render page", "page", name, "err", err)
	}
}

// CrossOrigin says why a POST did not come from the hub's own pages, or
// "". Browsers send Origin with every form POST; a request without one is
// not the page's. The hub is whatever the request reached (through a
// proxy's X-Forwarded-* headers, which a cross-site form cannot set) or
// PublicURL.
func (s *Server) CrossOrigin(r *http.Request) string {
	o := r.Header.Get("Origin")
	if o == "" || o == "null" {
		return "the request carries no origin; use the hub's own page"
	}
	if sf := r.Header.Get("Sec-Fetch-Site"); sf != "" && sf != "same-origin" {
		return "the request came from another site (" + sf + ")"
	}
	got := origin(o)
	for _, want := range []string{BaseURL(r), s.cfg.PublicURL} {
		if want != "" && got != "" && origin(want) == got {
			return ""
		}
	}
	return "the request came from " + o + ", not from this hub"
}

// BaseURL is the scheme and host a request reached, through a proxy's
// X-Forwarded-Proto and X-Forwarded-Host.
func BaseURL(r *http.Request) string {
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	if p := r.Header.Get("X-Forwarded-Proto"); p == "http" || p == "https" {
		scheme = p
	}
	host := r.Host
	if fh, _, _ := strings.Cut(r.Header.Get("X-Forwarded-Host"), ","); strings.TrimSpace(fh) != "" {
		host = strings.TrimSpace(fh)
	}
	return scheme + "://" + host
}

// origin is a URL's scheme://host[:port], lower-cased, without its default
// port; "" if it has none.
func origin(s string) string {
	u, err := url.Parse(s)
	if err != nil || u.Host == "" {
		return ""
	}
	scheme, host, port := strings.ToLower(u.Scheme), strings.ToLower(u.Hostname()), u.Port()
	if (scheme == "http" && port == "80") || (scheme == "https" && port == "443") {
		port = ""
	}
	if strings.Contains(host, ":") {
		host = "[" + host + "]"
	}
	if port != "" {
		host += ":" + port
	}
	return scheme + "://" + host
}
