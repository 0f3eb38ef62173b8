package forge_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
)

// fakeGitLabThreads is the conversation side of fakeGitLab: issues, notes of issues and merge
// requests, merge request discussions and approvals, commit statuses, members, project hooks,
// the token's user and the GraphQL of a note's edit, in GitLab's shapes.
type fakeGitLabThreads struct {
	login       string           // the token's user
	users       map[string]int64 // username: id
	issues      map[string]map[string]any
	notes       []*fakeGitLabNote
	discussions map[string][]map[string]any // "PATH!IID": discussions as GitLab answers them
	approvals   map[string][]string         // "PATH!IID": usernames
	statuses    map[string][]map[string]any // sha: statuses
	members     map[int64]int               // user id: access level
	hooks       []map[string]any
	nextID      int64
	// Faults: posts of a note or a hook answered by a dropped connection, after they are made.
	dropNotes, dropHooks int
	notePosts, hookPosts int
}

type fakeGitLabNote struct {
	id      int64
	thread  string // "PATH#IID" of an issue, "PATH!IID" of a merge request
	author  string
	body    string
	system  bool
	created time.Time
}

func newFakeGitLabThreads() fakeGitLabThreads {
	return fakeGitLabThreads{login: "drover-bot", users: map[string]int64{"drover-bot": 1}, issues: map[string]map[string]any{},
		discussions: map[string][]map[string]any{}, approvals: map[string][]string{}, statuses: map[string][]map[string]any{},
		members: map[int64]int{}, nextID: 5000}
}

// note adds a note (the caller holds f.mu).
func (f *fakeGitLab) note(thread, author, body string, system bool) *fakeGitLabNote {
	f.threads.nextID++
	n := &fakeGitLabNote{id: f.threads.nextID, thread: thread, author: author, body: body, system: system,
		created: time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(f.threads.nextID) * time.Second)}
	f.threads.notes = append(f.threads.notes, n)
	return n
}

func (n *fakeGitLabNote) json() map[string]any {
	at := n.created.Format(time.RFC3339)
	return map[string]any{"id": n.id, "body": n.body, "system": n.system, "author": map[string]any{"id": 9, "username": n.author},
		"created_at": at, "updated_at": at, "resolvable": false}
}

// serveUsers answers /user, /users?username= and the GraphQL endpoint.
func (f *fakeGitLab) serveUsers(w http.ResponseWriter, r *http.Request, answer func(int, any)) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	switch p := r.URL.Path; {
	case p == "/api/v4/user" && r.Method == http.MethodGet:
		answer(http.StatusOK, map[string]any{"id": f.threads.users[f.threads.login], "username": f.threads.login})
	case p == "/api/v4/users" && r.Method == http.MethodGet:
		list := []map[string]any{}
		if id, ok := f.threads.users[r.URL.Query().Get("username")]; ok {
			list = append(list, map[string]any{"id": id, "username": r.URL.Query().Get("username")})
		}
		answer(http.StatusOK, list)
	case p == "/api/graphql" && r.Method == http.MethodPost:
		f.graphQL(r, answer)
	default:
		return false
	}
	return true
}

// graphQL answers a note's read and its update by global id.
func (f *fakeGitLab) graphQL(r *http.Request, answer func(int, any)) {
	var in struct {
		Query     string
		Variables map[string]any
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		answer(http.StatusBadRequest, map[string]any{"errors": []map[string]string{{"message": "invalid JSON"}}})
		return
	}
	gid, _ := in.Variables["id"].(string)
	id, _ := strconv.ParseInt(strings.TrimPrefix(gid, "gid://gitlab/Note/"), 10, 64)
	var note *fakeGitLabNote
	for _, n := range f.threads.notes {
		if n.id == id {
			note = n
		}
	}
	switch {
	case note == nil:
		answer(http.StatusOK, map[string]any{"data": map[string]any{"note": nil, "updateNote": nil},
			"errors": []map[string]string{{"message": "The resource that you are attempting to access does not exist or you don't have permission to perform this action"}}})
	case strings.HasPrefix(strings.TrimSpace(in.Query), "mutation") && strings.Contains(in.Query, "updateNote"):
		note.body, _ = in.Variables["body"].(string)
		answer(http.StatusOK, map[string]any{"data": map[string]any{"updateNote": map[string]any{"errors": []string{}}}})
	case strings.Contains(in.Query, "note(id:"):
		answer(http.StatusOK, map[string]any{"data": map[string]any{"note": map[string]any{"body": note.body}}})
	default:
		answer(http.StatusOK, map[string]any{"errors": []map[string]string{{"message": "unknown query"}}})
	}
}

// serveThreads answers project p's routes of the conversation (rest: the path after the
// project), holding f.mu; false for none of them.
func (f *fakeGitLab) serveThreads(w http.ResponseWriter, r *http.Request, p *fakeGitLabProject, rest []string, answer func(int, any)) bool {
	q := r.URL.Query()
	route := r.Method + " " + strings.Join(rest, "/")
	at := func(i int) string { return rest[i] }
	switch {
	case len(rest) == 2 && rest[0] == "issues" && r.Method == http.MethodGet:
		if is, ok := f.threads.issues[p.path+"#"+at(1)]; ok {
			answer(http.StatusOK, is)
		} else {
			answer(http.StatusNotFound, map[string]string{"message": "404 Issue Not Found"})
		}
	case len(rest) == 3 && (rest[0] == "issues" || rest[0] == "merge_requests") && rest[2] == "notes":
		thread := p.path + map[string]string{"issues": "#", "merge_requests": "!"}[rest[0]] + at(1)
		if !f.exists(thread) {
			answer(http.StatusNotFound, map[string]string{"message": "404 Not found"})
			return true
		}
		switch r.Method {
		case http.MethodGet:
			var all []map[string]any
			for _, n := range f.threads.notes {
				if n.thread == thread {
					all = append(all, n.json())
				}
			}
			if q.Get("sort") != "asc" { // GitLab's default: newest first
				slices.Reverse(all)
			}
			replyPage(w, q, all, answer)
		case http.MethodPost:
			var in struct{ Body string }
			if json.NewDecoder(r.Body).Decode(&in) != nil || in.Body == "" {
				answer(http.StatusBadRequest, map[string]string{"error": "body is missing"})
				return true
			}
			f.threads.notePosts++
			n := f.note(thread, f.threads.login, in.Body, false)
			if f.threads.dropNotes > 0 {
				f.threads.dropNotes--
				hangUp(f.t, w)
				return true
			}
			answer(http.StatusCreated, n.json())
		}
	case len(rest) == 3 && rest[0] == "merge_requests" && rest[2] == "approvals" && r.Method == http.MethodGet:
		var by []map[string]any
		for _, u := range f.threads.approvals[p.path+"!"+at(1)] {
			by = append(by, map[string]any{"user": map[string]any{"id": f.threads.users[u], "username": u}, "approved_at": "2026-01-03T00:00:00Z"})
		}
		answer(http.StatusOK, map[string]any{"approved": len(by) > 0, "approved_by": by})
	case len(rest) == 3 && rest[0] == "merge_requests" && rest[2] == "discussions" && r.Method == http.MethodGet:
		replyPage(w, q, f.threads.discussions[p.path+"!"+at(1)], answer)
	case len(rest) == 4 && route == "GET repository/commits/"+at(2)+"/statuses":
		replyPage(w, q, f.threads.statuses[at(2)], answer)
	case len(rest) == 3 && rest[0] == "members" && rest[1] == "all" && r.Method == http.MethodGet:
		id, _ := strconv.ParseInt(at(2), 10, 64)
		if level, ok := f.threads.members[id]; ok {
			answer(http.StatusOK, map[string]any{"id": id, "access_level": level})
		} else {
			answer(http.StatusNotFound, map[string]string{"message": "404 Not found"})
		}
	case route == "GET hooks":
		replyPage(w, q, f.threads.hooks, answer)
	case route == "POST hooks":
		var in map[string]any
		json.NewDecoder(r.Body).Decode(&in)
		f.threads.hookPosts++
		f.threads.nextID++
		in["id"] = f.threads.nextID
		f.threads.hooks = append(f.threads.hooks, in)
		if f.threads.dropHooks > 0 {
			f.threads.dropHooks--
			hangUp(f.t, w)
			return true
		}
		answer(http.StatusCreated, hookJSON(in))
	case len(rest) == 2 && rest[0] == "hooks" && (r.Method == http.MethodPut || r.Method == http.MethodDelete):
		id, _ := strconv.ParseInt(at(1), 10, 64)
		for i, h := range f.threads.hooks {
			if h["id"] != id {
				continue
			}
			if r.Method == http.MethodDelete {
				f.threads.hooks = slices.Delete(f.threads.hooks, i, i+1)
				w.WriteHeader(http.StatusNoContent)
				return true
			}
			var in map[string]any
			json.NewDecoder(r.Body).Decode(&in)
			in["id"] = id
			f.threads.hooks[i] = in
			answer(http.StatusOK, hookJSON(in))
			return true
		}
		answer(http.StatusNotFound, map[string]string{"message": "404 Not found"})
	default:
		return false
	}
	return true
}

// hookJSON is a hook as GitLab answers it: its token never, only whether it has one.
func hookJSON(in map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range in {
		if k != "token" {
			out[k] = v
		}
	}
	out["token_present"] = in["token"] != nil
	return out
}

// exists tells an issue ("PATH#IID") or a merge request ("PATH!IID") of the fake.
func (f *fakeGitLab) exists(thread string) bool {
	if _, ok := f.threads.issues[thread]; ok {
		return true
	}
	for _, m := range f.mrs {
		if fmt.Sprintf("%s!%d", m.target.path, m.iid) == thread {
			return true
		}
	}
	return false
}
