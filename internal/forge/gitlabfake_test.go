package forge_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

// fakeGitLab is a GitLab REST API v4 in memory, as much of it as forge's GitLab client calls:
// projects (forks among them), their branches (set by the test, as if pushed) and merge
// requests, answered in GitLab's JSON shapes, status codes and paging headers. A test
// breaks it on purpose through its hooks.
type fakeGitLab struct {
	t     *testing.T
	srv   *httptest.Server
	token string // the PRIVATE-TOKEN it takes

	mu       sync.Mutex
	projects map[string]*fakeGitLabProject // by path OWNER/NAME
	byID     map[int64]*fakeGitLabProject
	mrs      []*fakeGitLabMR
	nextID   int64
	calls    map[string]int // "GET list", "POST create", ...

	// beforeCreate runs (unlocked) as a create arrives: another caller's create, say.
	beforeCreate func()
	// dropCreateReply makes the next create happen and then closes the connection unanswered.
	dropCreateReply bool
	// limited, when set, answers every call 429 with these headers.
	limited http.Header

	threads fakeGitLabThreads // notes, discussions, approvals, statuses, members, hooks
}

type fakeGitLabProject struct {
	id            int64
	path          string
	defaultBranch string
	branches      map[string]string // name: head commit
	nextIID       int64
}

type fakeGitLabMR struct {
	id, iid                int64
	target, source         *fakeGitLabProject
	sourceBranch, targetBr string
	title, description     string
	state                  string // opened, closed, merged
	sha                    string
}

func startFakeGitLab(t *testing.T, token string) *fakeGitLab {
	f := &fakeGitLab{t: t, token: token, projects: map[string]*fakeGitLabProject{},
		byID: map[int64]*fakeGitLabProject{}, calls: map[string]int{}, threads: newFakeGitLabThreads()}
	f.srv = httptest.NewServer(http.HandlerFunc(f.serve))
	t.Cleanup(f.srv.Close)
	return f
}

// addProject makes project path with its default branch at commit sha.
func (f *fakeGitLab) addProject(path, defaultBranch, sha string) *fakeGitLabProject {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.nextID++
	p := &fakeGitLabProject{id: f.nextID, path: path, defaultBranch: defaultBranch,
		branches: map[string]string{defaultBranch: sha}, nextIID: 1}
	f.projects[path] = p
	f.byID[p.id] = p
	return p
}

// push sets a branch of project path to commit sha.
func (f *fakeGitLab) push(path, branch, sha string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.projects[path].branches[branch] = sha
}

// openMR opens a merge request into target from a branch of source (target itself, or a
// fork), as another user would, and answers its iid.
func (f *fakeGitLab) openMR(target, source, sourceBranch, targetBranch, sha string) int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.insert(f.projects[target], f.projects[source], sourceBranch, targetBranch, "theirs", "", sha).iid
}

func (f *fakeGitLab) insert(target, source *fakeGitLabProject, sb, tb, title, desc, sha string) *fakeGitLabMR {
	f.nextID++
	m := &fakeGitLabMR{id: f.nextID, iid: target.nextIID, target: target, source: source, sourceBranch: sb,
		targetBr: tb, title: title, description: desc, state: "opened", sha: sha}
	target.nextIID++
	f.mrs = append(f.mrs, m)
	return m
}

// setState closes or merges merge request iid of project path.
func (f *fakeGitLab) setState(path string, iid int64, state string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, m := range f.mrs {
		if m.target.path == path && m.iid == iid {
			m.state = state
		}
	}
}

// count is how many merge requests, open or not, project path has.
func (f *fakeGitLab) count(path string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, m := range f.mrs {
		if m.target.path == path {
			n++
		}
	}
	return n
}

func (f *fakeGitLab) called(what string) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.calls[what]
}

func (f *fakeGitLab) json(m *fakeGitLabMR) map[string]any {
	return map[string]any{
		"id": m.id, "iid": m.iid, "project_id": m.target.id, "title": m.title, "description": m.description,
		"state": m.state, "source_branch": m.sourceBranch, "target_branch": m.targetBr,
		"source_project_id": m.source.id, "target_project_id": m.target.id, "sha": m.sha,
		"draft":   strings.HasPrefix(strings.ToLower(m.title), "draft:"),
		"web_url": fmt.Sprintf("%s/%s/-/merge_requests/%d", f.srv.URL, m.target.path, m.iid),
	}
}

func (f *fakeGitLab) serve(w http.ResponseWriter, r *http.Request) {
	if strings.Contains(r.URL.String(), f.token) || r.Header.Get("Authorization") != "" {
		f.t.Errorf("%s %s: the token is not in the PRIVATE-TOKEN header only", r.Method, r.URL.Path)
	}
	answer := func(status int, v any) {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(status)
		json.NewEncoder(w).Encode(v)
	}
	if r.Header.Get("PRIVATE-TOKEN") != f.token {
		answer(http.StatusUnauthorized, map[string]string{"message": "401 Unauthorized"})
		return
	}
	f.mu.Lock()
	limited := f.limited
	f.mu.Unlock()
	if limited != nil {
		for k, v := range limited {
			w.Header()[k] = v
		}
		w.WriteHeader(http.StatusTooManyRequests)
		w.Write([]byte("Retry later\n"))
		return
	}
	if f.serveUsers(w, r, answer) {
		return
	}
	// /api/v4/projects/ID[/merge_requests[/IID]], ID a URL-escaped path or a number.
	parts := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/api/v4/"), "/")
	if len(parts) < 2 || parts[0] != "projects" {
		answer(http.StatusNotFound, map[string]string{"error": "404 Not Found"})
		return
	}
	id, _ := url.PathUnescape(parts[1])
	if r.Method == http.MethodPost && len(parts) == 3 && parts[2] == "merge_requests" && f.beforeCreate != nil {
		f.beforeCreate()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	p := f.projects[id]
	if n, err := strconv.ParseInt(id, 10, 64); err == nil {
		p = f.byID[n]
	}
	if p == nil {
		answer(http.StatusNotFound, map[string]string{"message": "404 Project Not Found"})
		return
	}
	switch {
	case len(parts) == 2 && r.Method == http.MethodGet:
		f.calls["GET project"]++
		answer(http.StatusOK, map[string]any{"id": p.id, "path_with_namespace": p.path,
			"default_branch": p.defaultBranch, "web_url": f.srv.URL + "/" + p.path})
	case len(parts) == 3 && parts[2] == "merge_requests" && r.Method == http.MethodGet:
		f.calls["GET list"]++
		f.list(w, r, p, answer)
	case len(parts) == 3 && parts[2] == "merge_requests" && r.Method == http.MethodPost:
		f.calls["POST create"]++
		f.create(w, r, p, answer)
	case len(parts) == 4 && parts[2] == "merge_requests" && r.Method == http.MethodGet:
		f.calls["GET mr"]++
		iid, _ := strconv.ParseInt(parts[3], 10, 64)
		for _, m := range f.mrs {
			if m.target == p && m.iid == iid {
				answer(http.StatusOK, f.json(m))
				return
			}
		}
		answer(http.StatusNotFound, map[string]string{"message": "404 Not found"})
	default:
		if !f.serveThreads(w, r, p, parts[2:], answer) {
			answer(http.StatusNotFound, map[string]string{"error": "404 Not Found"})
		}
	}
}

func (f *fakeGitLab) list(w http.ResponseWriter, r *http.Request, p *fakeGitLabProject, answer func(int, any)) {
	q := r.URL.Query()
	var all []map[string]any
	for _, m := range f.mrs {
		if m.target == p && (q.Get("state") == "" || q.Get("state") == m.state) &&
			(q.Get("source_branch") == "" || q.Get("source_branch") == m.sourceBranch) &&
			(q.Get("target_branch") == "" || q.Get("target_branch") == m.targetBr) {
			all = append(all, f.json(m))
		}
	}
	replyPage(w, q, all, answer)
}

// replyPage answers a page of all, 20 a page unless ?per_page= says, with GitLab's paging
// headers.
func replyPage(w http.ResponseWriter, q url.Values, all []map[string]any, answer func(int, any)) {
	items, page, perPage, more := fakePage(q, all, 20)
	next := ""
	if more {
		next = strconv.Itoa(page + 1)
	}
	w.Header().Set("X-Page", strconv.Itoa(page))
	w.Header().Set("X-Per-Page", strconv.Itoa(perPage))
	w.Header().Set("X-Next-Page", next)
	w.Header().Set("X-Total", strconv.Itoa(len(all)))
	if items == nil {
		items = []map[string]any{}
	}
	answer(http.StatusOK, items)
}

func (f *fakeGitLab) create(w http.ResponseWriter, r *http.Request, p *fakeGitLabProject, answer func(int, any)) {
	var in struct {
		Title        string `json:"title"`
		Description  string `json:"description"`
		SourceBranch string `json:"source_branch"`
		TargetBranch string `json:"target_branch"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		answer(http.StatusBadRequest, map[string]string{"error": "body is invalid"})
		return
	}
	switch {
	case in.Title == "" || in.SourceBranch == "" || in.TargetBranch == "":
		answer(http.StatusBadRequest, map[string]string{"error": "title, source_branch, target_branch are missing"})
		return
	case utf8.RuneCountInString(in.Title) > 255:
		answer(http.StatusBadRequest, map[string]any{"message": map[string][]string{"title": {"is too long (maximum is 255 characters)"}}})
		return
	case p.branches[in.SourceBranch] == "":
		answer(http.StatusUnprocessableEntity, map[string]any{"message": map[string][]string{"source_branch": {"does not exist"}}})
		return
	case p.branches[in.TargetBranch] == "":
		answer(http.StatusUnprocessableEntity, map[string]any{"message": map[string][]string{"target_branch": {"does not exist"}}})
		return
	}
	for _, m := range f.mrs {
		if m.target == p && m.source == p && m.state == "opened" && m.sourceBranch == in.SourceBranch && m.targetBr == in.TargetBranch {
			answer(http.StatusConflict, map[string][]string{"message": {
				fmt.Sprintf("Another open merge request already exists for this source branch: !%d", m.iid)}})
			return
		}
	}
	m := f.insert(p, p, in.SourceBranch, in.TargetBranch, in.Title, in.Description, p.branches[in.SourceBranch])
	if f.dropCreateReply {
		f.dropCreateReply = false
		hangUp(f.t, w)
		return
	}
	answer(http.StatusCreated, f.json(m))
}
