package forge_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// fakeGitHubThreads is the conversation side of fakeGitHub's one repository o/r: issues,
// comments, reviews, GraphQL review threads, check runs and statuses, collaborators, hooks
// and the token's user, in GitHub's REST shapes (and GraphQL's for review threads, which
// it pages two threads and two comments at a time, fewer than asked, as a server may).
type fakeGitHubThreads struct {
	login    string // the token's user
	issues   map[int]*fakeGitHubIssue
	comments []*fakeGitHubComment
	reviews  map[int][]map[string]any // pull number: reviews as GitHub answers them
	threads  []*fakeGitHubThread
	runs     map[string][]map[string]any // sha: check runs
	statuses map[string][]map[string]any // sha: statuses
	perms    map[string][2]string        // login: permission, role_name
	hooks    []*fakeGitHubHook
	nextID   int64
	// Faults: posts of a comment or a hook answered by a dropped connection, after they are made.
	dropComments, dropHooks int
	raceHook                bool // another makes the hook of the URL just before the next post
	posts, hookPosts        int
}

type fakeGitHubIssue struct {
	number      int
	title, body string
	user, state string
	labels      []string
	pull        bool
}

type fakeGitHubComment struct {
	id      int64
	issue   int
	user    string
	body    string
	created time.Time
}

type fakeGitHubThread struct {
	resolved bool
	path     string
	line     int
	comments []string
}

type fakeGitHubHook struct {
	id          int64
	url, ctype  string
	secret      string
	events      []string
	active      bool
	insecureSSL string
}

func (f *fakeGitHub) threadRoutes(mux *http.ServeMux) {
	f.threads = fakeGitHubThreads{login: "drover-bot", issues: map[int]*fakeGitHubIssue{}, reviews: map[int][]map[string]any{},
		runs: map[string][]map[string]any{}, statuses: map[string][]map[string]any{}, perms: map[string][2]string{}, nextID: 1000}
	mux.HandleFunc("GET /user", f.locked(func(w http.ResponseWriter, r *http.Request) {
		f.reply(w, http.StatusOK, map[string]any{"login": f.threads.login, "id": 1, "type": "User"})
	}, false))
	mux.HandleFunc("GET /app", func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if f.app(w, r) {
			f.reply(w, http.StatusOK, map[string]any{"id": f.appID, "slug": "drover-app", "name": "drover app"})
		}
	})
	mux.HandleFunc("GET /repos/{owner}/{repo}/issues/{number}", f.locked(f.getIssue, true))
	// GET issues/N/comments and issues/comments/ID: one pattern, which ServeMux tells apart only so.
	mux.HandleFunc("GET /repos/{owner}/{repo}/issues/{a}/{b}", f.locked(func(w http.ResponseWriter, r *http.Request) {
		if r.PathValue("a") == "comments" {
			r.SetPathValue("id", r.PathValue("b"))
			f.getComment(w, r)
			return
		}
		r.SetPathValue("number", r.PathValue("a"))
		f.listComments(w, r)
	}, true))
	mux.HandleFunc("POST /repos/{owner}/{repo}/issues/{number}/comments", f.locked(f.postComment, true))
	mux.HandleFunc("PATCH /repos/{owner}/{repo}/issues/comments/{id}", f.locked(f.editComment, true))
	mux.HandleFunc("GET /repos/{owner}/{repo}/pulls/{number}/reviews", f.locked(func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.PathValue("number"))
		f.replyPage(w, r, f.threads.reviews[n])
	}, true))
	mux.HandleFunc("GET /repos/{owner}/{repo}/commits/{sha}/check-runs", f.locked(func(w http.ResponseWriter, r *http.Request) {
		all := f.threads.runs[r.PathValue("sha")]
		f.reply(w, http.StatusOK, map[string]any{"total_count": len(all), "check_runs": f.page(w, r, all)})
	}, true))
	mux.HandleFunc("GET /repos/{owner}/{repo}/commits/{sha}/status", f.locked(func(w http.ResponseWriter, r *http.Request) {
		all := f.threads.statuses[r.PathValue("sha")]
		f.reply(w, http.StatusOK, map[string]any{"state": "pending", "sha": r.PathValue("sha"), "total_count": len(all), "statuses": f.page(w, r, all)})
	}, true))
	mux.HandleFunc("GET /repos/{owner}/{repo}/collaborators/{user}/permission", f.locked(func(w http.ResponseWriter, r *http.Request) {
		p, ok := f.threads.perms[r.PathValue("user")]
		if !ok {
			f.fail(w, http.StatusNotFound, "Not Found")
			return
		}
		f.reply(w, http.StatusOK, map[string]any{"permission": p[0], "role_name": p[1], "user": map[string]any{"login": r.PathValue("user")}})
	}, true))
	mux.HandleFunc("GET /repos/{owner}/{repo}/hooks", f.locked(func(w http.ResponseWriter, r *http.Request) {
		var all []map[string]any
		for _, h := range f.threads.hooks {
			all = append(all, h.json())
		}
		f.replyPage(w, r, all)
	}, true))
	mux.HandleFunc("POST /repos/{owner}/{repo}/hooks", f.locked(f.postHook, true))
	mux.HandleFunc("PATCH /repos/{owner}/{repo}/hooks/{id}", f.locked(f.editHook, true))
	mux.HandleFunc("DELETE /repos/{owner}/{repo}/hooks/{id}", f.locked(func(w http.ResponseWriter, r *http.Request) {
		id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
		for i, h := range f.threads.hooks {
			if h.id == id {
				f.threads.hooks = append(f.threads.hooks[:i], f.threads.hooks[i+1:]...)
				w.WriteHeader(http.StatusNoContent)
				return
			}
		}
		f.fail(w, http.StatusNotFound, "Not Found")
	}, true))
	// GraphQL: github.com's at /graphql, an Enterprise Server's at /api/graphql.
	mux.HandleFunc("POST /api/graphql", f.locked(f.graphQL, false))
	mux.HandleFunc("POST /graphql", f.locked(f.graphQL, false))
}

// locked serves h holding f.mu, after the credential check of a repository's route (repo) or
// of any (the token's).
func (f *fakeGitHub) locked(h http.HandlerFunc, repo bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		defer f.mu.Unlock()
		if repo && f.repo(w, r) == nil {
			return
		}
		if !repo && r.Header.Get("Authorization") != "token "+f.token && r.Header.Get("Authorization") != "Bearer "+f.token {
			f.fail(w, http.StatusUnauthorized, "Bad credentials")
			return
		}
		h(w, r)
	}
}

func (f *fakeGitHub) issueJSON(is *fakeGitHubIssue) map[string]any {
	labels := []map[string]any{}
	for _, l := range is.labels {
		labels = append(labels, map[string]any{"name": l})
	}
	m := map[string]any{"number": is.number, "title": is.title, "body": is.body, "state": is.state,
		"user": map[string]any{"login": is.user}, "labels": labels,
		"html_url": fmt.Sprintf("%s/o/r/issues/%d", f.srv.URL, is.number)}
	if is.pull {
		m["pull_request"] = map[string]any{"url": fmt.Sprintf("%s/repos/o/r/pulls/%d", f.srv.URL, is.number)}
	}
	return m
}

func (f *fakeGitHub) getIssue(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.PathValue("number"))
	if is := f.threads.issues[n]; is != nil {
		f.reply(w, http.StatusOK, f.issueJSON(is))
		return
	}
	f.fail(w, http.StatusNotFound, "Not Found")
}

func (c *fakeGitHubComment) json(f *fakeGitHub) map[string]any {
	at := c.created.UTC().Format(time.RFC3339)
	return map[string]any{"id": c.id, "body": c.body, "user": map[string]any{"login": c.user}, "created_at": at, "updated_at": at,
		"html_url": fmt.Sprintf("%s/o/r/issues/%d#issuecomment-%d", f.srv.URL, c.issue, c.id)}
}

// comment adds a comment (the caller holds f.mu).
func (f *fakeGitHub) comment(issue int, user, body string) *fakeGitHubComment {
	f.threads.nextID++
	c := &fakeGitHubComment{id: f.threads.nextID, issue: issue, user: user, body: body,
		created: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(f.threads.nextID) * time.Second)}
	f.threads.comments = append(f.threads.comments, c)
	return c
}

func (f *fakeGitHub) listComments(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.PathValue("number"))
	if f.threads.issues[n] == nil {
		f.fail(w, http.StatusNotFound, "Not Found")
		return
	}
	var all []map[string]any
	for _, c := range f.threads.comments {
		if c.issue == n {
			all = append(all, c.json(f))
		}
	}
	f.replyPage(w, r, all)
}

func (f *fakeGitHub) postComment(w http.ResponseWriter, r *http.Request) {
	n, _ := strconv.Atoi(r.PathValue("number"))
	var in struct{ Body string }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == "" {
		f.fail(w, http.StatusUnprocessableEntity, "Validation Failed")
		return
	}
	if f.threads.issues[n] == nil {
		f.fail(w, http.StatusNotFound, "Not Found")
		return
	}
	f.threads.posts++
	author := f.threads.login
	if _, minted := f.tokens[strings.TrimPrefix(r.Header.Get("Authorization"), "token ")]; minted {
		author = "drover-app[bot]" // an App's installation comments as its bot
	}
	c := f.comment(n, author, in.Body)
	if f.threads.dropComments > 0 {
		f.threads.dropComments--
		hangUp(f.t, w)
		return
	}
	f.reply(w, http.StatusCreated, c.json(f))
}

// hangUp closes the connection of w without an answer: what was asked is done, its reply
// lost. Both fake forges' faults.
func hangUp(t *testing.T, w http.ResponseWriter) {
	conn, _, err := http.NewResponseController(w).Hijack()
	if err != nil {
		t.Errorf("fake forge: hijack: %v", err)
		return
	}
	conn.Close()
}

func (f *fakeGitHub) findComment(w http.ResponseWriter, r *http.Request) *fakeGitHubComment {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	for _, c := range f.threads.comments {
		if c.id == id {
			return c
		}
	}
	f.fail(w, http.StatusNotFound, "Not Found")
	return nil
}

func (f *fakeGitHub) getComment(w http.ResponseWriter, r *http.Request) {
	if c := f.findComment(w, r); c != nil {
		f.reply(w, http.StatusOK, c.json(f))
	}
}

func (f *fakeGitHub) editComment(w http.ResponseWriter, r *http.Request) {
	c := f.findComment(w, r)
	if c == nil {
		return
	}
	var in struct{ Body string }
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == "" {
		f.fail(w, http.StatusUnprocessableEntity, "Validation Failed")
		return
	}
	c.body = in.Body
	f.reply(w, http.StatusOK, c.json(f))
}

func (h *fakeGitHubHook) json() map[string]any {
	// GitHub answers a hook's secret masked.
	return map[string]any{"id": h.id, "type": "Repository", "name": "web", "active": h.active, "events": h.events,
		"config": map[string]any{"url": h.url, "content_type": h.ctype, "insecure_ssl": h.insecureSSL, "secret": "********"}}
}

type fakeHookIn struct {
	Name   string
	Active *bool
	Events []string
	Config struct {
		URL         string `json:"url"`
		ContentType string `json:"content_type"`
		Secret      string `json:"secret"`
		InsecureSSL string `json:"insecure_ssl"`
	}
}

func (f *fakeGitHub) postHook(w http.ResponseWriter, r *http.Request) {
	var in fakeHookIn
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Config.URL == "" {
		f.fail(w, http.StatusUnprocessableEntity, "Validation Failed")
		return
	}
	f.threads.hookPosts++
	if f.threads.raceHook {
		f.threads.raceHook = false
		f.threads.nextID++
		f.threads.hooks = append(f.threads.hooks, &fakeGitHubHook{id: f.threads.nextID, url: in.Config.URL, ctype: "form",
			secret: "theirs", events: []string{"push"}, active: true})
	}
	for _, h := range f.threads.hooks {
		if h.url == in.Config.URL {
			f.fail(w, http.StatusUnprocessableEntity, "Validation Failed",
				map[string]string{"resource": "Hook", "code": "custom", "message": "Hook already exists on this repository"})
			return
		}
	}
	f.threads.nextID++
	h := &fakeGitHubHook{id: f.threads.nextID, url: in.Config.URL, ctype: in.Config.ContentType, secret: in.Config.Secret,
		events: in.Events, active: in.Active == nil || *in.Active, insecureSSL: in.Config.InsecureSSL}
	f.threads.hooks = append(f.threads.hooks, h)
	if f.threads.dropHooks > 0 {
		f.threads.dropHooks--
		hangUp(f.t, w)
		return
	}
	f.reply(w, http.StatusCreated, h.json())
}

func (f *fakeGitHub) editHook(w http.ResponseWriter, r *http.Request) {
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	var in fakeHookIn
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		f.fail(w, http.StatusUnprocessableEntity, "Validation Failed")
		return
	}
	for _, h := range f.threads.hooks {
		if h.id == id {
			h.url, h.ctype, h.secret, h.events = in.Config.URL, in.Config.ContentType, in.Config.Secret, in.Events
			f.reply(w, http.StatusOK, h.json())
			return
		}
	}
	f.fail(w, http.StatusNotFound, "Not Found")
}

// graphQL answers the two queries of review threads: a pull request's threads, and a
// thread's comments (node id "T<index>"), with cursors "<offset>".
func (f *fakeGitHub) graphQL(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Query     string
		Variables map[string]any
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		f.fail(w, http.StatusBadRequest, "Problems parsing JSON")
		return
	}
	const per = 2
	after := 0
	if a, ok := in.Variables["after"].(string); ok {
		after, _ = strconv.Atoi(a)
	}
	comments := func(t *fakeGitHubThread, from int) map[string]any {
		nodes := []map[string]any{}
		for i := from; i < len(t.comments) && i < from+per; i++ {
			nodes = append(nodes, map[string]any{"databaseId": 5000 + i, "author": map[string]any{"login": "reviewer"},
				"body": t.comments[i], "url": f.srv.URL + "/o/r/pull/1#discussion", "createdAt": "2026-01-01T00:00:00Z",
				"updatedAt": "2026-01-01T00:00:00Z"})
		}
		next := from + len(nodes)
		return map[string]any{"totalCount": len(t.comments), "nodes": nodes,
			"pageInfo": map[string]any{"hasNextPage": next < len(t.comments), "endCursor": strconv.Itoa(next)}}
	}
	switch {
	case strings.Contains(in.Query, "reviewThreads"):
		if in.Variables["owner"] != "o" || in.Variables["name"] != "r" {
			f.reply(w, http.StatusOK, map[string]any{"data": map[string]any{"repository": nil},
				"errors": []map[string]any{{"type": "NOT_FOUND", "message": "Could not resolve to a Repository"}}})
			return
		}
		nodes := []map[string]any{}
		for i := after; i < len(f.threads.threads) && i < after+per; i++ {
			t := f.threads.threads[i]
			nodes = append(nodes, map[string]any{"id": "T" + strconv.Itoa(i), "isResolved": t.resolved, "path": t.path,
				"line": t.line, "originalLine": t.line, "comments": comments(t, 0)})
		}
		next := after + len(nodes)
		f.reply(w, http.StatusOK, map[string]any{"data": map[string]any{"repository": map[string]any{"pullRequest": map[string]any{
			"reviewThreads": map[string]any{"nodes": nodes,
				"pageInfo": map[string]any{"hasNextPage": next < len(f.threads.threads), "endCursor": strconv.Itoa(next)}}}}}})
	case strings.Contains(in.Query, "node(id:"):
		id, _ := in.Variables["id"].(string)
		i, err := strconv.Atoi(strings.TrimPrefix(id, "T"))
		if err != nil || i < 0 || i >= len(f.threads.threads) {
			f.reply(w, http.StatusOK, map[string]any{"data": map[string]any{"node": nil}})
			return
		}
		f.reply(w, http.StatusOK, map[string]any{"data": map[string]any{"node": map[string]any{"comments": comments(f.threads.threads[i], after)}}})
	default:
		f.reply(w, http.StatusOK, map[string]any{"errors": []map[string]any{{"message": "unknown query"}}})
	}
}
