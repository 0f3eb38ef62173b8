package forge_test

import (
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"drover/internal/forge"
)

// glToken is the fake's token: every error a GitLab test meets is checked not to hold it.
const glToken = "glpat-canary-0123456789abcdef"

const sha2 = "89abcdef0123456789abcdef0123456789abcdef"

// openGitLab is a Client of the fake, through Open as the hub makes it.
func openGitLab(t *testing.T, f *fakeGitLab, token string) forge.Client {
	t.Helper()
	c, err := forge.Open(forge.Conn{Kind: forge.KindGitLab, URL: f.srv.URL, Token: token}, f.srv.Client())
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// glCode fails unless err is a *forge.Error with code, and checks it holds no token.
func glCode(t *testing.T, err error, code string) *forge.Error {
	t.Helper()
	noToken(t, err)
	fe, ok := errors.AsType[*forge.Error](err)
	if !ok || fe.Code != code {
		t.Fatalf("error %v, want a forge.Error with code %s", err, code)
	}
	return fe
}

// noToken fails if err holds the fake's token.
func noToken(t *testing.T, err error) {
	t.Helper()
	if err != nil && (strings.Contains(err.Error(), glToken) || strings.Contains(err.Error(), "canary")) {
		t.Fatalf("error %q holds the token", err)
	}
}

// TestGitLabMergeRequests runs every Client operation against the fake: a pushed branch
// gets one merge request however often CreatePR is called, GetPR and FindPRByHeadSHA read
// it, a draft is one by its title, a branch GitLab does not see yet is not_ready, and a wrong
// token or a missing project fail with their codes.
func TestGitLabMergeRequests(t *testing.T) {
	f := startFakeGitLab(t, glToken)
	f.addProject("o/r", "main", sha1)
	repo := forge.Repo{Owner: "o", Name: "r"}
	c := openGitLab(t, f, glToken)
	ctx := t.Context()

	if b, err := c.DefaultBranch(ctx, repo); err != nil || b != "main" {
		t.Fatalf("DefaultBranch: %q, %v", b, err)
	}
	n := forge.NewPR{Head: "drover/job-1", Base: "main", Title: "job 1", Body: "job 1's result"}
	_, err := c.CreatePR(ctx, repo, n)
	glCode(t, err, forge.CodeNotReady) // not pushed yet, as GitLab may not see a push at once
	f.push("o/r", "drover/job-1", sha2)
	if _, ok, err := c.FindPR(ctx, repo, n.Head, n.Base); err != nil || ok {
		t.Fatalf("FindPR before any merge request: found %v, %v", ok, err)
	}
	pr, err := c.CreatePR(ctx, repo, n)
	noToken(t, err)
	if err != nil || pr.Number != 1 || pr.HeadSHA != sha2 || pr.HeadBranch != n.Head || pr.Base != "main" ||
		pr.State != "open" || pr.Draft || pr.URL != f.srv.URL+"/o/r/-/merge_requests/1" {
		t.Fatalf("CreatePR: %+v, %v; want open !1 of %s at %s into main", pr, err, n.Head, sha2)
	}
	again, err := c.CreatePR(ctx, repo, n)
	noToken(t, err)
	if err != nil || again != pr || f.count("o/r") != 1 || f.called("POST create") != 2 {
		t.Fatalf("CreatePR again: %+v, %v, with %d merge requests after %d creates; want !1, one, and no second create",
			again, err, f.count("o/r"), f.called("POST create"))
	}
	if got, err := c.GetPR(ctx, repo, pr.Number); err != nil || got != pr {
		t.Fatalf("GetPR: %+v, %v; want %+v", got, err, pr)
	}
	if got, ok, err := c.FindPRByHeadSHA(ctx, repo, sha2); err != nil || !ok || got != pr {
		t.Fatalf("FindPRByHeadSHA: %+v, %v, %v; want %+v", got, ok, err, pr)
	}

	// A draft of the longest title drover allows, which GitLab's 255 characters still hold.
	f.push("o/r", "drover/job-2", sha1)
	title := strings.Repeat("t", forge.MaxTitle)
	draft, err := c.CreatePR(ctx, repo, forge.NewPR{Head: "drover/job-2", Base: "main", Title: title, Draft: true})
	noToken(t, err)
	if err != nil || !draft.Draft || draft.Number != 2 {
		t.Fatalf("CreatePR of a draft: %+v, %v", draft, err)
	}

	// States.
	for state, want := range map[string]string{"merged": "merged", "closed": "closed", "locked": "open", "opened": "open"} {
		f.setState("o/r", 2, state)
		if got, err := c.GetPR(ctx, repo, 2); err != nil || got.State != want {
			t.Fatalf("GetPR of a merge request %s: %+v, %v; want %s", state, got, err, want)
		}
	}

	// Failures.
	_, err = c.GetPR(ctx, repo, 99)
	glCode(t, err, forge.CodeNotFound)
	_, _, err = c.FindPR(ctx, forge.Repo{Owner: "o", Name: "nope"}, n.Head, n.Base)
	glCode(t, err, forge.CodeNotFound)
	_, err = c.DefaultBranch(ctx, forge.Repo{Owner: "o", Name: "nope"})
	glCode(t, err, forge.CodeNotFound)
	_, err = c.CreatePR(ctx, repo, forge.NewPR{Head: "drover/job-1", Base: "nope", Title: "x"})
	glCode(t, err, forge.CodeConflict)
	bad := openGitLab(t, f, "glpat-wrong-canary")
	_, _, err = bad.FindPR(ctx, repo, n.Head, n.Base)
	glCode(t, err, forge.CodeUnauthorized)
	_, err = bad.CreatePR(ctx, repo, n)
	glCode(t, err, forge.CodeUnauthorized)
	if f.count("o/r") != 2 {
		t.Fatalf("%d merge requests, want 2", f.count("o/r"))
	}
}

// TestGitLabCreateOnce: a merge request opened between CreatePR's look and its create (GitLab
// answers 409), or made by a create whose reply was lost, is the answer, never a second one.
// TestGitLabSubgroups: a project in a subgroup is named GROUP/SUB/NAME, its API id escaped
// whole and its clone and web URLs level by level.
func TestGitLabSubgroups(t *testing.T) {
	f := startFakeGitLab(t, glToken)
	f.addProject("g/sub/r", "main", sha1)
	f.addProject("g/r", "trunk", sha1) // a namesake one level up
	repo, err := forge.ParseRepo("g/sub/r")
	if err != nil {
		t.Fatal(err)
	}
	c := openGitLab(t, f, glToken)
	ctx := t.Context()
	if b, err := c.DefaultBranch(ctx, repo); err != nil || b != "main" {
		t.Fatalf("DefaultBranch of g/sub/r: %q, %v; want main", b, err)
	}
	f.push("g/sub/r", "drover/job-1", sha2)
	n := forge.NewPR{Head: "drover/job-1", Base: "main", Title: "job 1"}
	pr, err := c.CreatePR(ctx, repo, n)
	if err != nil || pr.Number != 1 || pr.URL != f.srv.URL+"/g/sub/r/-/merge_requests/1" || f.count("g/sub/r") != 1 || f.count("g/r") != 0 {
		t.Fatalf("CreatePR in g/sub/r: %+v, %v (%d there, %d in g/r)", pr, err, f.count("g/sub/r"), f.count("g/r"))
	}
	if got, err := c.GetPR(ctx, repo, 1); err != nil || got != pr {
		t.Fatalf("GetPR: %+v, %v; want %+v", got, err, pr)
	}
	r, err := c.Remote(ctx, repo)
	if err != nil || r.URL != f.srv.URL+"/g/sub/r.git" {
		t.Fatalf("Remote: %+v, %v; want %s/g/sub/r.git", r, err, f.srv.URL)
	}
	f.mu.Lock()
	f.threads.issues["g/sub/r#3"] = map[string]any{"id": 103, "iid": 3, "title": "fix it", "description": "broken",
		"state": "opened", "author": map[string]any{"username": "alice"}, "web_url": f.srv.URL + "/g/sub/r/-/issues/3"}
	f.note("g/sub/r#3", "alice", "still broken", false)
	f.mu.Unlock()
	cs, err := c.(forge.Threads).Comments(ctx, repo, 3)
	if err != nil || len(cs) != 1 || !strings.HasPrefix(cs[0].URL, f.srv.URL+"/g/sub/r/-/issues/3#note_") {
		t.Fatalf("Comments on g/sub/r#3: %+v, %v", cs, err)
	}
}

func TestGitLabCreateOnce(t *testing.T) {
	repo := forge.Repo{Owner: "o", Name: "r"}
	n := forge.NewPR{Head: "drover/job-1", Base: "main", Title: "job 1"}
	for _, tc := range []struct {
		name    string
		break_  func(f *fakeGitLab)
		wantIID int
	}{
		{"409 race", func(f *fakeGitLab) {
			f.beforeCreate = func() { f.openMR("o/r", "o/r", n.Head, n.Base, sha2) }
		}, 1},
		{"lost reply", func(f *fakeGitLab) { f.dropCreateReply = true }, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFakeGitLab(t, glToken)
			f.addProject("o/r", "main", sha1)
			f.push("o/r", n.Head, sha2)
			tc.break_(f)
			c := openGitLab(t, f, glToken)
			pr, err := c.CreatePR(t.Context(), repo, n)
			noToken(t, err)
			if err != nil || pr.Number != tc.wantIID || f.count("o/r") != 1 || f.called("POST create") != 1 || f.called("GET list") != 2 {
				t.Fatalf("CreatePR: %+v, %v with %d merge requests after %d creates and %d looks; want !%d, one, after 1 and 2",
					pr, err, f.count("o/r"), f.called("POST create"), f.called("GET list"), tc.wantIID)
			}
			f.beforeCreate = nil
			again, err := c.CreatePR(t.Context(), repo, n)
			noToken(t, err)
			if err != nil || again != pr || f.count("o/r") != 1 {
				t.Fatalf("CreatePR again: %+v, %v with %d merge requests; want %+v, one", again, err, f.count("o/r"), pr)
			}
		})
	}
}

// TestGitLabForks: a fork's merge request of the same branch names is not the project's own,
// for FindPR and CreatePR alike.
func TestGitLabForks(t *testing.T) {
	f := startFakeGitLab(t, glToken)
	f.addProject("o/r", "main", sha1)
	f.addProject("fork/r", "main", sha1)
	f.push("fork/r", "drover/job-1", sha1)
	f.openMR("o/r", "fork/r", "drover/job-1", "main", sha1)
	repo := forge.Repo{Owner: "o", Name: "r"}
	c := openGitLab(t, f, glToken)
	if pr, ok, err := c.FindPR(t.Context(), repo, "drover/job-1", "main"); err != nil || ok {
		t.Fatalf("FindPR with only a fork's merge request: %+v, %v, %v; want none", pr, ok, err)
	}
	f.push("o/r", "drover/job-1", sha2)
	pr, err := c.CreatePR(t.Context(), repo, forge.NewPR{Head: "drover/job-1", Base: "main", Title: "job 1"})
	noToken(t, err)
	if err != nil || pr.Number != 2 || pr.HeadSHA != sha2 {
		t.Fatalf("CreatePR beside a fork's merge request: %+v, %v; want !2 at %s", pr, err, sha2)
	}
}

// TestGitLabPages: FindPRByHeadSHA pages through open merge requests, past GitLab's 100 a page.
func TestGitLabPages(t *testing.T) {
	f := startFakeGitLab(t, glToken)
	f.addProject("o/r", "main", sha1)
	for i := range 150 {
		f.openMR("o/r", "o/r", "b"+strconv.Itoa(i), "main", sha1)
	}
	want := f.openMR("o/r", "o/r", "last", "main", sha2)
	c := openGitLab(t, f, glToken)
	repo := forge.Repo{Owner: "o", Name: "r"}
	if pr, ok, err := c.FindPRByHeadSHA(t.Context(), repo, sha2); err != nil || !ok || pr.Number != int(want) {
		t.Fatalf("FindPRByHeadSHA: %+v, %v, %v; want !%d", pr, ok, err, want)
	}
	f.setState("o/r", want, "merged")
	if pr, ok, err := c.FindPRByHeadSHA(t.Context(), repo, sha2); err != nil || ok {
		t.Fatalf("FindPRByHeadSHA of a merged one: %+v, %v, %v; want none", pr, ok, err)
	}
	if got := f.called("GET list"); got != 5 {
		t.Fatalf("%d pages read, want 2, then 3 to an empty page", got)
	}
}

// TestGitLabRateLimited: a 429 is rate_limited, waiting what Retry-After says, else until
// RateLimit-Reset, at most 10 minutes.
func TestGitLabRateLimited(t *testing.T) {
	now := time.Now()
	for _, tc := range []struct {
		name     string
		header   http.Header
		min, max time.Duration
	}{
		{"Retry-After", http.Header{"Retry-After": {"30"}}, 30 * time.Second, 30 * time.Second},
		{"Retry-After first", http.Header{"Retry-After": {"30"}, "Ratelimit-Reset": {strconv.FormatInt(now.Add(time.Hour).Unix(), 10)}},
			30 * time.Second, 30 * time.Second},
		{"RateLimit-Reset", http.Header{"Ratelimit-Reset": {strconv.FormatInt(now.Add(time.Minute).Unix(), 10)}},
			time.Nanosecond, time.Minute},
		{"RateLimit-Reset an hour away", http.Header{"Ratelimit-Reset": {strconv.FormatInt(now.Add(time.Hour).Unix(), 10)}},
			10 * time.Minute, 10 * time.Minute},
		{"RateLimit-Reset past", http.Header{"Ratelimit-Reset": {strconv.FormatInt(now.Add(-time.Hour).Unix(), 10)}}, 0, 0},
		{"unreadable", http.Header{"Ratelimit-Reset": {"soon"}}, 0, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := startFakeGitLab(t, glToken)
			f.addProject("o/r", "main", sha1)
			f.limited = tc.header
			c := openGitLab(t, f, glToken)
			_, err := c.CreatePR(t.Context(), forge.Repo{Owner: "o", Name: "r"}, forge.NewPR{Head: "b", Base: "main", Title: "t"})
			fe := glCode(t, err, forge.CodeRateLimited)
			if fe.RetryAfter < tc.min || fe.RetryAfter > tc.max || fe.Status != 429 {
				t.Fatalf("CreatePR rate limited: %v, want a wait in [%s, %s]", err, tc.min, tc.max)
			}
			if f.count("o/r") != 0 {
				t.Fatalf("rate limited, yet %d merge requests", f.count("o/r"))
			}
		})
	}
}

// TestGitLabAnswers covers GitLab's answers a fake project does not give: each maps to its
// code with its message read from GitLab's shapes, the token, echoed, is in no error.
func TestGitLabAnswers(t *testing.T) {
	long := strings.Repeat(" ", 9<<20) + "{}"
	for _, tc := range []struct {
		name, path string // path: the call; "create" or "get"
		status     int
		body       string
		code       string
		msg        string // a part of Msg
	}{
		{"409 list", "create", 409, `{"message":["Another open merge request already exists for this source branch: !4"]}`,
			forge.CodeConflict, "already exists for this source branch: !4"},
		{"no source branch, by field", "create", 422, `{"message":{"source_branch":["does not exist"]}}`,
			forge.CodeNotReady, "source_branch does not exist"},
		{"no source branch, in words", "create", 400, `{"message":["Source branch \"drover/job-1\" does not exist"]}`,
			forge.CodeNotReady, "does not exist"},
		{"no target branch", "create", 422, `{"message":{"target_branch":["does not exist"]}}`,
			forge.CodeConflict, "target_branch does not exist"},
		{"no source branch on a read", "get", 400, `{"message":{"source_branch":["does not exist"]}}`,
			forge.CodeRefused, "source_branch"},
		{"scope", "get", 403, `{"error":"insufficient_scope","error_description":"needs api"}`,
			forge.CodeUnauthorized, "insufficient_scope"},
		{"token echoed", "get", 401, `{"message":"401 Unauthorized: ` + glToken + `"}`, forge.CodeUnauthorized, "[redacted]"},
		{"fields", "get", 400, `{"message":{"title":["is too long"],"description":["is bad"]}}`,
			forge.CodeRefused, "description is bad; title is too long"},
		{"gateway", "get", 502, `<html>bad gateway</html>`, forge.CodeUnavailable, "bad gateway"},
		{"HTML", "get", 200, `<html>`, forge.CodeBadReply, "not the JSON expected"},
		{"wrong JSON", "get", 200, `{"iid": "one"}`, forge.CodeBadReply, "not the JSON expected"},
		{"cut short", "get", 200, `{"iid": 1,`, forge.CodeUnavailable, "unexpected EOF"},
		{"no merge request", "get", 200, `{"iid": 0}`, forge.CodeBadReply, "without an iid"},
		{"odd state", "get", 200, `{"iid": 1, "source_branch": "a", "target_branch": "b", "state": "weird"}`,
			forge.CodeBadReply, "state weird"},
		{"too long", "get", 200, long, forge.CodeBadReply, "an answer over"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var answered atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Header.Get("PRIVATE-TOKEN") != glToken {
					t.Errorf("%s: no PRIVATE-TOKEN", r.URL.Path)
				}
				if r.Method == http.MethodGet && strings.HasSuffix(r.URL.Path, "/merge_requests") {
					w.Write([]byte(`[]`)) // CreatePR's looks
					return
				}
				answered.Add(1)
				w.WriteHeader(tc.status)
				w.Write([]byte(tc.body))
			}))
			defer srv.Close()
			c, err := forge.Open(forge.Conn{Kind: forge.KindGitLab, URL: srv.URL, Token: glToken}, srv.Client())
			if err != nil {
				t.Fatal(err)
			}
			repo := forge.Repo{Owner: "o", Name: "r"}
			if tc.path == "create" {
				_, err = c.CreatePR(t.Context(), repo, forge.NewPR{Head: "drover/job-1", Base: "main", Title: "t"})
			} else {
				_, err = c.GetPR(t.Context(), repo, 1)
			}
			fe := glCode(t, err, tc.code)
			if !strings.Contains(fe.Msg, tc.msg) || len(fe.Msg) > 200 {
				t.Fatalf("error %v, want a message of at most 200 bytes with %q", err, tc.msg)
			}
			if n := answered.Load(); n != 1 { // callers retry, the client never
				t.Fatalf("the call was sent %d times, want once", n)
			}
		})
	}
}

// TestGitLabNoAnswer: an instance that is gone is unavailable, and the cause stays reachable.
func TestGitLabNoAnswer(t *testing.T) {
	srv := httptest.NewServer(http.NotFoundHandler())
	u := srv.URL
	srv.Close()
	c, err := forge.Open(forge.Conn{Kind: forge.KindGitLab, URL: u, Token: glToken}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = c.GetPR(t.Context(), forge.Repo{Owner: "o", Name: "r"}, 1)
	if fe := glCode(t, err, forge.CodeUnavailable); fe.Status != 0 || errors.Unwrap(err) == nil {
		t.Fatalf("GetPR of a closed server: %#v, want unavailable with its cause", err)
	}
}

// TestOpenGitLab: Open checks a GitLab connection, and its Remote is the project's clone URL
// with the token as oauth2's password.
func TestOpenGitLab(t *testing.T) {
	for _, tc := range []struct{ url, token, err, remote string }{
		{"https://gitlab.com", glToken, "", "https://gitlab.com/o/r.git"},
		{"https://gitlab.com/api/v4/", glToken, "", "https://gitlab.com/o/r.git"},
		{"https://git.example/gitlab/", glToken, "", "https://git.example/gitlab/o/r.git"},
		{"http://127.0.0.1:8080", glToken, "", "http://127.0.0.1:8080/o/r.git"},
		{"http://gitlab.example", glToken, "plain http only to a loopback", ""},
		{"https://user:pw@gitlab.example", glToken, "credentials", ""},
		{"https://gitlab.example", "glpat canary", "printable ASCII", ""},
		{"https://gitlab.example", "", "token", ""},
	} {
		c, err := forge.Open(forge.Conn{Kind: forge.KindGitLab, URL: tc.url, Token: tc.token}, nil)
		noToken(t, err)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("Open(%q): %v, want an error with %q", tc.url, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("Open(%q): %v", tc.url, err)
			continue
		}
		r, err := c.Remote(t.Context(), forge.Repo{Owner: "o", Name: "r"})
		if err != nil || r.URL != tc.remote {
			t.Errorf("Remote of %q: %+v, %v; want %s", tc.url, r, err, tc.remote)
			continue
		}
		b64, ok := strings.CutPrefix(r.Header, "Basic ")
		user, _ := base64.StdEncoding.DecodeString(b64)
		if !ok || string(user) != "oauth2:"+tc.token {
			t.Errorf("Remote's header %q decodes to %q, want oauth2:TOKEN", r.Header, user)
		}
	}
}
