package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/rules"
)

// fakeHub answers the API calls the CLI makes, from canned state.
type fakeHub struct {
	URL string

	mu        sync.Mutex
	token     string
	who       apitypes.Whoami
	jobs      []apitypes.JobView // newest first
	logs      map[string]string  // job id → log of each of its attempts
	finish    func(apitypes.JobView) apitypes.JobView
	submits   []apitypes.SubmitRequest
	approvals []apitypes.ApproveRequest
	users     []apitypes.NewUserRequest
	questions []protocol.QuestionView
	answers   []apitypes.AnswerRequest
	actions   []string                        // "approve j-1", "restart j-1"
	events    map[string][]apitypes.EventView // job id → its history
	onLog     func(id string)                 // called as a log is served
	accts     []apitypes.AccountView          // the caller's accounts, in order
	moves     []apitypes.MoveAccountRequest

	requests      []string // "METHOD PATH" of every request that passed the token check
	userViews     []apitypes.UserView
	rotations     []string // users whose token was rotated
	runners       []apitypes.RunnerView
	shares        []string // "share gpu1 {User:bob}", as the runner share routes got them
	acctShares    []string // "share gpu1/work {User:bob}"
	projects      []apitypes.ProjectView
	members       map[string][]string // project → members; an owner is ProjectView.Owner
	memberChanges []string            // "add web bob", "remove web bob"
	hubs          []apitypes.HubView

	forges       []apitypes.ForgeView
	forgeBodies  []string                            // raw bodies of PUT /forges/{name}
	publishes    []apitypes.PublishRequest           // as POST /jobs/{id}/publish got them
	publications map[string]apitypes.PublicationView // job id → its answer to publish
	configBodies []string                            // raw bodies of PUT /projects/{name}/config
	configs      map[string]apitypes.ProjectConfig   // project → its config

	reached         int                                       // every request, the token's refusals included
	pipelines       []apitypes.PipelineView                   // newest first
	pipelineRuns    []apitypes.PipelineRunRequest             // as POST /pipelines got them
	pipelineActions []string                                  // "cancel p-1", "retry p-1 review"
	pipelineEvents  map[string][]apitypes.PipelineEventView   // pipeline id → its log
	onPipelineShow  func(v *apitypes.PipelineView, shows int) // changes a pipeline as GET /pipelines/{id} reads it
	pipelineShows   int

	evals      []apitypes.EvalView       // newest first
	evalLimits []string                  // the limit GET /evals got, each time
	evalRuns   []apitypes.EvalRunRequest // as POST /evals got them
}

func newFakeHub(t *testing.T) *fakeHub {
	t.Helper()
	h := &fakeHub{token: "drv_u_admin", who: apitypes.Whoami{Kind: "user", Name: "admin", Admin: true},
		logs: map[string]string{}, events: map[string][]apitypes.EventView{}, members: map[string][]string{},
		publications: map[string]apitypes.PublicationView{}, configs: map[string]apitypes.ProjectConfig{},
		pipelineEvents: map[string][]apitypes.PipelineEventView{}}
	mux := http.NewServeMux()
	accountList := func() apitypes.AccountList {
		for i := range h.accts {
			h.accts[i].Position = i + 1
		}
		return apitypes.AccountList{Accounts: h.accts}
	}
	mux.HandleFunc("GET /api/v1/accounts", func(w http.ResponseWriter, r *http.Request) { reply(w, 200, accountList()) })
	mux.HandleFunc("POST /api/v1/accounts/move", func(w http.ResponseWriter, r *http.Request) {
		var req apitypes.MoveAccountRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			fail(w, 400, rules.ErrBadRequest, err.Error())
			return
		}
		h.moves = append(h.moves, req)
		i := slices.IndexFunc(h.accts, func(v apitypes.AccountView) bool {
			return v.Runner == req.Runner && (v.ID == req.ID || v.Label == req.ID)
		})
		if i < 0 {
			fail(w, 404, rules.ErrNotFound, "runner "+req.Runner+" has no account "+req.ID)
			return
		}
		v := h.accts[i]
		h.accts = slices.Delete(h.accts, i, i+1)
		h.accts = slices.Insert(h.accts, min(req.Position, len(h.accts)+1)-1, v)
		reply(w, 200, accountList())
	})
	mux.HandleFunc("GET /api/v1/whoami", func(w http.ResponseWriter, r *http.Request) { reply(w, 200, h.who) })
	mux.HandleFunc("POST /api/v1/users", func(w http.ResponseWriter, r *http.Request) {
		var req apitypes.NewUserRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		h.users = append(h.users, req)
		if req.Name == "taken" {
			fail(w, 409, rules.ErrConflict, "user taken exists")
			return
		}
		reply(w, 201, apitypes.NewUserResponse{Name: req.Name, Token: "drv_u_" + req.Name})
	})
	mux.HandleFunc("POST /api/v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		var req apitypes.SubmitRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		h.submits = append(h.submits, req)
		v := apitypes.JobView{ID: "j-" + strconv.Itoa(len(h.submits)), State: job.Queued, Agent: req.Agent,
			Args: req.Args, Labels: req.Labels, Key: req.Key, Requester: h.who.Name, CreatedAt: time.Now()}
		if h.finish != nil {
			v = h.finish(v)
		}
		h.jobs = append([]apitypes.JobView{v}, h.jobs...)
		reply(w, 201, v)
	})
	mux.HandleFunc("GET /api/v1/jobs", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, apitypes.JobList{Jobs: h.jobs})
	})
	mux.HandleFunc("GET /api/v1/jobs/{id}", func(w http.ResponseWriter, r *http.Request) {
		if v, ok := h.job(r.PathValue("id")); ok {
			reply(w, 200, v)
			return
		}
		fail(w, 404, rules.ErrNotFound, "no job "+r.PathValue("id"))
	})
	mux.HandleFunc("GET /api/v1/questions", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, apitypes.QuestionList{Questions: h.questions})
	})
	mux.HandleFunc("POST /api/v1/jobs/{id}/answer", func(w http.ResponseWriter, r *http.Request) {
		var req apitypes.AnswerRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		h.answers = append(h.answers, req)
		h.jobAction(w, r.PathValue("id"), func(v *apitypes.JobView) {
			if v.Requester == h.who.Name {
				v.State = job.Queued
			}
		})
	})
	for _, action := range []string{"approve", "restart"} {
		mux.HandleFunc("POST /api/v1/jobs/{id}/"+action, func(w http.ResponseWriter, r *http.Request) {
			h.actions = append(h.actions, action+" "+r.PathValue("id"))
			h.jobAction(w, r.PathValue("id"), func(v *apitypes.JobView) { v.State = job.Queued })
		})
	}
	mux.HandleFunc("GET /api/v1/jobs/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
		out := apitypes.EventList{Events: []apitypes.EventView{}}
		for _, e := range h.events[r.PathValue("id")] {
			if e.Seq > after {
				out.Events = append(out.Events, e)
			}
		}
		reply(w, 200, out)
	})
	mux.HandleFunc("GET /api/v1/jobs/{id}/log", func(w http.ResponseWriter, r *http.Request) {
		if h.onLog != nil {
			h.onLog(r.PathValue("id"))
		}
		off, _ := strconv.Atoi(r.URL.Query().Get("offset"))
		data := h.logs[r.PathValue("id")]
		w.Header().Set(apitypes.HeaderLogAttempt, r.URL.Query().Get("attempt"))
		w.Header().Set(apitypes.HeaderLogOffset, strconv.Itoa(off))
		w.Header().Set(apitypes.HeaderLogSize, strconv.Itoa(len(data)))
		w.Header().Set(apitypes.HeaderLogComplete, "true")
		_, _ = w.Write([]byte(data[off:]))
	})
	mux.HandleFunc("POST /api/v1/jobs/{id}/cancel", func(w http.ResponseWriter, r *http.Request) {
		v, ok := h.job(r.PathValue("id"))
		switch {
		case !ok:
			fail(w, 404, rules.ErrNotFound, "no job")
		case v.State.Terminal():
			fail(w, 409, rules.ErrConflict, "the job already ended")
		default:
			v.State = job.Cancelled
			reply(w, 200, v)
		}
	})
	mux.HandleFunc("POST /api/v1/runners/approve", func(w http.ResponseWriter, r *http.Request) {
		var req apitypes.ApproveRequest
		_ = json.NewDecoder(r.Body).Decode(&req)
		h.approvals = append(h.approvals, req)
		if req.Name == "taken" && !req.Replace {
			fail(w, 409, rules.ErrConflict, `runner name "taken" is taken by your runner of that name; approving with replace revokes its token`)
			return
		}
		reply(w, 200, apitypes.ApproveResponse{RunnerView: apitypes.RunnerView{Name: req.Name, Owner: h.who.Name}, Replaced: req.Name == "taken"})
	})
	h.tenancyRoutes(mux)
	h.forgeRoutes(mux)
	h.pipelineRoutes(mux)
	h.evalRoutes(mux)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		defer h.mu.Unlock()
		h.reached++
		if r.Header.Get("Authorization") != "Bearer "+h.token {
			fail(w, 401, rules.ErrUnauthorized, "bad token")
			return
		}
		h.requests = append(h.requests, r.Method+" "+r.URL.Path)
		mux.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	h.URL = srv.URL
	return h
}

// jobAction changes a job as an action does and answers with it.
func (h *fakeHub) jobAction(w http.ResponseWriter, id string, change func(*apitypes.JobView)) {
	for i := range h.jobs {
		if h.jobs[i].ID == id {
			change(&h.jobs[i])
			reply(w, 200, h.jobs[i])
			return
		}
	}
	fail(w, 404, rules.ErrNotFound, "no job "+id)
}

func (h *fakeHub) job(id string) (apitypes.JobView, bool) {
	for _, v := range h.jobs {
		if v.ID == id {
			return v, true
		}
	}
	return apitypes.JobView{}, false
}

func reply(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func fail(w http.ResponseWriter, status int, code, msg string) {
	reply(w, status, apitypes.ErrorBody{Error: rules.Error{Code: code, Message: msg}})
}

// cliResult is what one drover invocation printed and returned.
type cliResult struct {
	stdout, stderr string
	code           int
}

// runCLI runs drover with env as its whole environment (HOME is a fresh
// temporary directory unless env sets it).
func runCLI(t *testing.T, env map[string]string, stdin string, args ...string) cliResult {
	t.Helper()
	if env == nil {
		env = map[string]string{}
	}
	if _, ok := env["HOME"]; !ok {
		env["HOME"] = t.TempDir()
	}
	var out, errb bytes.Buffer
	code := Run(context.Background(), args, Env{Stdin: strings.NewReader(stdin), Stdout: &out, Stderr: &errb,
		Getenv: func(k string) string { return env[k] }})
	return cliResult{out.String(), errb.String(), code}
}

// tenancyRoutes are the users, sharing and membership routes.
func (h *fakeHub) tenancyRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/hubs", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, apitypes.HubList{Hubs: h.hubs})
	})
	mux.HandleFunc("GET /api/v1/users", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, apitypes.UserList{Users: h.userViews})
	})
	mux.HandleFunc("DELETE /api/v1/users/{name}", func(w http.ResponseWriter, r *http.Request) {
		for i := range h.userViews {
			if u := &h.userViews[i]; u.Name == r.PathValue("name") {
				now := time.Now()
				u.RemovedAt, u.Runners = &now, 0
				reply(w, 200, *u)
				return
			}
		}
		fail(w, 404, rules.ErrNotFound, "no user "+r.PathValue("name"))
	})
	mux.HandleFunc("POST /api/v1/users/{name}/token", func(w http.ResponseWriter, r *http.Request) {
		name := r.PathValue("name")
		h.rotations = append(h.rotations, name)
		token := "drv_u_" + name + "_" + strconv.Itoa(len(h.rotations))
		if name == h.who.Name {
			h.token = token // the old one stops working at once
		}
		reply(w, 200, apitypes.NewUserResponse{Name: name, Token: token})
	})
	mux.HandleFunc("GET /api/v1/runners", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, apitypes.RunnerList{Runners: h.runners})
	})
	for _, action := range []string{"accept", "decline"} {
		mux.HandleFunc("POST /api/v1/runners/{name}/"+action, func(w http.ResponseWriter, r *http.Request) {
			var req apitypes.AnswerShareRequest
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				fail(w, 400, rules.ErrBadRequest, err.Error())
				return
			}
			h.shares = append(h.shares, action+" "+r.PathValue("name")+" "+fmt.Sprintf("%+v", req))
			i := slices.IndexFunc(h.runners, func(v apitypes.RunnerView) bool { return v.Name == r.PathValue("name") })
			if i < 0 {
				fail(w, 404, rules.ErrNotFound, "runner "+r.PathValue("name")+" is not shared with you")
				return
			}
			v := &h.runners[i]
			v.Offered = slices.DeleteFunc(v.Offered, func(s apitypes.Share) bool { return s.Project == req.Project })
			reply(w, 200, *v)
		})
	}
	for _, action := range []string{"share", "unshare"} {
		mux.HandleFunc("POST /api/v1/runners/{name}/"+action, func(w http.ResponseWriter, r *http.Request) {
			var req apitypes.ShareRequest
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				fail(w, 400, rules.ErrBadRequest, err.Error())
				return
			}
			h.shares = append(h.shares, action+" "+r.PathValue("name")+" "+fmt.Sprintf("%+v", req))
			i := slices.IndexFunc(h.runners, func(v apitypes.RunnerView) bool { return v.Name == r.PathValue("name") })
			if i < 0 {
				fail(w, 404, rules.ErrNotFound, "no runner "+r.PathValue("name"))
				return
			}
			v := &h.runners[i]
			switch {
			case req.Hub && action == "share":
				v.Access = apitypes.AccessHub
			case req.Hub:
				v.Access = apitypes.AccessPrivate
			default:
				v.SharedWith = applyShare(v.SharedWith, action, apitypes.Share{User: req.User, Project: req.Project})
			}
			reply(w, 200, *v)
		})
		mux.HandleFunc("POST /api/v1/accounts/"+action, func(w http.ResponseWriter, r *http.Request) {
			var req apitypes.AccountShareRequest
			if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
				fail(w, 400, rules.ErrBadRequest, err.Error())
				return
			}
			sh := apitypes.Share{User: req.User, Project: req.Project}
			h.acctShares = append(h.acctShares, action+" "+req.Runner+"/"+req.Account+" "+fmt.Sprintf("%+v", sh))
			i := slices.IndexFunc(h.accts, func(v apitypes.AccountView) bool {
				return v.Runner == req.Runner && (v.ID == req.Account || v.Label == req.Account)
			})
			if i < 0 {
				fail(w, 404, rules.ErrNotFound, "runner "+req.Runner+" has no account "+req.Account)
				return
			}
			h.accts[i].SharedWith = applyShare(h.accts[i].SharedWith, action, sh)
			reply(w, 200, apitypes.AccountList{Accounts: h.accts})
		})
	}
	mux.HandleFunc("GET /api/v1/projects", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, apitypes.ProjectList{Projects: h.projects})
	})
	memberList := func(w http.ResponseWriter, name string) {
		i := slices.IndexFunc(h.projects, func(p apitypes.ProjectView) bool { return p.Name == name })
		if i < 0 {
			fail(w, 404, rules.ErrNotFound, "no project "+name)
			return
		}
		reply(w, 200, apitypes.MemberList{Project: name, Owner: h.projects[i].Owner,
			Members: append([]string{h.projects[i].Owner}, h.members[name]...)})
	}
	mux.HandleFunc("GET /api/v1/projects/{name}/members", func(w http.ResponseWriter, r *http.Request) {
		memberList(w, r.PathValue("name"))
	})
	mux.HandleFunc("POST /api/v1/projects/{name}/members", func(w http.ResponseWriter, r *http.Request) {
		var req apitypes.MemberRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			fail(w, 400, rules.ErrBadRequest, err.Error())
			return
		}
		name := r.PathValue("name")
		h.memberChanges = append(h.memberChanges, "add "+name+" "+req.User)
		if !slices.Contains(h.members[name], req.User) {
			h.members[name] = append(h.members[name], req.User)
		}
		memberList(w, name)
	})
	mux.HandleFunc("DELETE /api/v1/projects/{name}/members/{user}", func(w http.ResponseWriter, r *http.Request) {
		name, user := r.PathValue("name"), r.PathValue("user")
		h.memberChanges = append(h.memberChanges, "remove "+name+" "+user)
		h.members[name] = slices.DeleteFunc(h.members[name], func(m string) bool { return m == user })
		memberList(w, name)
	})
}

// forgeRoutes are the forge connection, publish and project config routes.
func (h *fakeHub) forgeRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/forges", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, apitypes.ForgeList{Forges: h.forges})
	})
	mux.HandleFunc("PUT /api/v1/forges/{name}", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.forgeBodies = append(h.forgeBodies, string(b))
		var req apitypes.ForgeRequest
		if err := json.Unmarshal(b, &req); err != nil {
			fail(w, 400, rules.ErrBadRequest, err.Error())
			return
		}
		if r.PathValue("name") == "taken" {
			fail(w, 409, rules.ErrConflict, "forge taken is in use")
			return
		}
		v := apitypes.ForgeView{Name: r.PathValue("name"), Kind: req.Kind, URL: req.URL, AppID: req.AppID,
			CreatedBy: h.who.Name, CreatedAt: time.Now()}
		h.forges = append(h.forges, v)
		reply(w, 200, v)
	})
	mux.HandleFunc("PUT /api/v1/forges/{name}/oauth", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.forgeBodies = append(h.forgeBodies, string(b))
		var req apitypes.ForgeOAuthRequest
		if err := json.Unmarshal(b, &req); err != nil {
			fail(w, 400, rules.ErrBadRequest, err.Error())
			return
		}
		reply(w, 200, apitypes.ForgeOAuthView{Forge: r.PathValue("name"), ClientID: req.ClientID, On: !req.Off,
			Callback: "https://hub.example/auth/forge/" + r.PathValue("name") + "/callback"})
	})
	mux.HandleFunc("PUT /api/v1/oidc/{name}", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.forgeBodies = append(h.forgeBodies, string(b))
		var req apitypes.OIDCProviderRequest
		if err := json.Unmarshal(b, &req); err != nil {
			fail(w, 400, rules.ErrBadRequest, err.Error())
			return
		}
		reply(w, 200, apitypes.OIDCProviderView{Name: r.PathValue("name"), Issuer: req.Issuer, ClientID: req.ClientID,
			Callback: "https://hub.example/auth/oidc/" + r.PathValue("name") + "/callback"})
	})
	mux.HandleFunc("POST /api/v1/users/{name}/oidc-links", func(w http.ResponseWriter, r *http.Request) {
		var req apitypes.OIDCLinkRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			fail(w, 400, rules.ErrBadRequest, err.Error())
			return
		}
		reply(w, 200, apitypes.OIDCLinkView{User: r.PathValue("name"), Provider: req.Provider, Subject: req.Subject})
	})
	mux.HandleFunc("DELETE /api/v1/users/{name}/oidc-links/{provider}", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, apitypes.OIDCLinkView{User: r.PathValue("name"), Provider: r.PathValue("provider"), Subject: r.URL.Query().Get("subject")})
	})
	mux.HandleFunc("DELETE /api/v1/forges/{name}", func(w http.ResponseWriter, r *http.Request) {
		i := slices.IndexFunc(h.forges, func(v apitypes.ForgeView) bool { return v.Name == r.PathValue("name") })
		if i < 0 {
			fail(w, 404, rules.ErrNotFound, "no forge "+r.PathValue("name"))
			return
		}
		v := h.forges[i]
		h.forges = slices.Delete(h.forges, i, i+1)
		reply(w, 200, v)
	})
	mux.HandleFunc("POST /api/v1/jobs/{id}/publish", func(w http.ResponseWriter, r *http.Request) {
		var req apitypes.PublishRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			fail(w, 400, rules.ErrBadRequest, err.Error())
			return
		}
		h.publishes = append(h.publishes, req)
		v, ok := h.publications[r.PathValue("id")]
		switch {
		case !ok:
			fail(w, 404, rules.ErrNotFound, "no job "+r.PathValue("id"))
		case v.State == "pending":
			reply(w, 202, v)
		default:
			reply(w, 200, v)
		}
	})
	mux.HandleFunc("GET /api/v1/projects/{name}/config", func(w http.ResponseWriter, r *http.Request) {
		reply(w, 200, h.configs[r.PathValue("name")])
	})
	mux.HandleFunc("PUT /api/v1/projects/{name}/config", func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		h.configBodies = append(h.configBodies, string(b))
		var req apitypes.ProjectConfigRequest
		if err := json.Unmarshal(b, &req); err != nil {
			fail(w, 400, rules.ErrBadRequest, err.Error())
			return
		}
		c := h.configs[r.PathValue("name")]
		c.Project = r.PathValue("name")
		if req.Forge != nil {
			c.Forge, c.ForgeRepo = *req.Forge, *req.ForgeRepo
		}
		if req.Publish != nil {
			c.Publish = *req.Publish
		}
		if req.DirectPush != nil {
			c.DirectPush = *req.DirectPush
		}
		if req.PublishAuthor != nil {
			c.PublishAuthor = *req.PublishAuthor
		}
		if req.PublishEmail != nil {
			c.PublishEmail = *req.PublishEmail
		}
		if req.PublishSign != nil {
			c.PublishSign = *req.PublishSign
		}
		h.configs[c.Project] = c
		reply(w, 200, c)
	})
}

// applyShare adds a share to ss, or takes it out.
func applyShare(ss []apitypes.Share, action string, s apitypes.Share) []apitypes.Share {
	ss = slices.DeleteFunc(ss, func(x apitypes.Share) bool { return x == s })
	if action == "share" {
		ss = append(ss, s)
	}
	return ss
}

// requestCount is how many requests the hub answered past the token check.
func (h *fakeHub) requestCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.requests)
}

// pipelineRoutes are the pipelines routes, over h.pipelines.
func (h *fakeHub) pipelineRoutes(mux *http.ServeMux) {
	find := func(w http.ResponseWriter, id string) *apitypes.PipelineView {
		i := slices.IndexFunc(h.pipelines, func(v apitypes.PipelineView) bool { return v.ID == id })
		if i < 0 {
			fail(w, 404, rules.ErrNotFound, "no pipeline "+id)
			return nil
		}
		return &h.pipelines[i]
	}
	mux.HandleFunc("POST /api/v1/pipelines", func(w http.ResponseWriter, r *http.Request) {
		var req apitypes.PipelineRunRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			fail(w, 400, rules.ErrBadRequest, err.Error())
			return
		}
		h.pipelineRuns = append(h.pipelineRuns, req)
		if i := slices.IndexFunc(h.pipelines, func(v apitypes.PipelineView) bool { return req.Key != "" && v.ID == "p-"+req.Key }); i >= 0 {
			reply(w, 200, h.pipelines[i])
			return
		}
		id := "p-" + strconv.Itoa(len(h.pipelineRuns))
		if req.Key != "" {
			id = "p-" + req.Key
		}
		v := apitypes.PipelineView{ID: id, Name: "fake", File: req.File, Project: req.Project, Base: req.Base,
			Requester: h.who.Name, Staged: req.Staged, State: "running", Params: req.Params, CreatedAt: time.Now()}
		h.pipelines = append([]apitypes.PipelineView{v}, h.pipelines...)
		reply(w, 201, v)
	})
	mux.HandleFunc("GET /api/v1/pipelines", func(w http.ResponseWriter, r *http.Request) {
		out := h.pipelines
		if n, err := strconv.Atoi(r.URL.Query().Get("limit")); err == nil && n < len(out) {
			out = out[:n]
		}
		reply(w, 200, apitypes.PipelineList{Pipelines: out})
	})
	mux.HandleFunc("GET /api/v1/pipelines/{id}", func(w http.ResponseWriter, r *http.Request) {
		if v := find(w, r.PathValue("id")); v != nil {
			h.pipelineShows++
			if h.onPipelineShow != nil {
				h.onPipelineShow(v, h.pipelineShows)
			}
			reply(w, 200, *v)
		}
	})
	mux.HandleFunc("GET /api/v1/pipelines/{id}/events", func(w http.ResponseWriter, r *http.Request) {
		if find(w, r.PathValue("id")) == nil {
			return
		}
		after, _ := strconv.ParseInt(r.URL.Query().Get("after"), 10, 64)
		out := apitypes.PipelineEventList{Events: []apitypes.PipelineEventView{}}
		for _, e := range h.pipelineEvents[r.PathValue("id")] {
			if e.Seq > after {
				out.Events = append(out.Events, e)
			}
		}
		reply(w, 200, out)
	})
	mux.HandleFunc("POST /api/v1/pipelines/{id}/cancel", func(w http.ResponseWriter, r *http.Request) {
		h.pipelineActions = append(h.pipelineActions, "cancel "+r.PathValue("id"))
		if v := find(w, r.PathValue("id")); v != nil {
			v.State = "cancelled"
			reply(w, 200, *v)
		}
	})
	mux.HandleFunc("POST /api/v1/pipelines/{id}/retry", func(w http.ResponseWriter, r *http.Request) {
		var req apitypes.PipelineRetryRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			fail(w, 400, rules.ErrBadRequest, err.Error())
			return
		}
		h.pipelineActions = append(h.pipelineActions, "retry "+r.PathValue("id")+" "+req.Step)
		if v := find(w, r.PathValue("id")); v != nil {
			v.State = "running"
			reply(w, 200, *v)
		}
	})
}
