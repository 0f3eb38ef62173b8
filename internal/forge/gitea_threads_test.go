package forge_test

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"drover/internal/forge"
	"drover/internal/testkit"
)

// TestGiteaThreads runs Threads and Hooks against a real Gitea: an issue and its comments,
// a pull request's reviews and its unresolved review threads, the statuses at its head, one
// comment per marker however often CommentOnce is called, an edit that keeps the marker,
// permissions of an admin, a writer, a reader and a stranger, and one hook per URL whose
// deliveries are signed with the secret last given.
func TestGiteaThreads(t *testing.T) {
	g := testkit.StartGitea(t)
	repo := forge.Repo{Owner: g.AdminUser, Name: "threads"}
	g.CreateRepo(t, repo.Owner, repo.Name)
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	writerToken := g.CreateUser(t, "writer")
	g.CreateUser(t, "reader")
	for user, perm := range map[string]string{"writer": "write", "reader": "read"} {
		g.API(t, g.AdminToken, http.MethodPut, "/repos/"+repo.String()+"/collaborators/"+user, map[string]string{"permission": perm}, nil)
	}
	c, err := forge.Open(forge.Conn{Kind: forge.KindGitea, URL: g.URL, Token: g.AdminToken}, nil)
	if err != nil {
		t.Fatal(err)
	}
	th, hooks := c.(forge.Threads), c.(forge.Hooks)

	// An issue and its conversation, oldest first.
	var issue struct {
		Number int `json:"number"`
	}
	g.API(t, writerToken, http.MethodPost, "/repos/"+repo.String()+"/issues",
		map[string]any{"title": "fix the thing", "body": "it is broken\n<!-- drover:fake -->"}, &issue)
	for i := range 3 {
		g.API(t, writerToken, http.MethodPost, fmt.Sprintf("/repos/%s/issues/%d/comments", repo, issue.Number),
			map[string]string{"body": fmt.Sprintf("comment %d", i)}, nil)
	}
	is, err := th.Issue(ctx, repo, issue.Number)
	if err != nil || is.Number != issue.Number || is.Title != "fix the thing" || is.Author != "writer" || is.State != "open" || is.IsPR ||
		!strings.HasPrefix(is.URL, g.URL+"/") {
		t.Fatalf("Issue: %+v, %v", is, err)
	}
	comments, err := th.Comments(ctx, repo, issue.Number)
	if err != nil || len(comments) != 3 {
		t.Fatalf("Comments: %+v, %v; want 3", comments, err)
	}
	for i, cm := range comments {
		if cm.Body != fmt.Sprintf("comment %d", i) || cm.Author != "writer" || cm.ID == 0 || cm.CreatedAt.IsZero() {
			t.Fatalf("comment %d: %+v", i, cm)
		}
	}

	// CommentOnce twice: one comment, the bot's; a writer's comment with the marker is not the bot's.
	g.API(t, writerToken, http.MethodPost, fmt.Sprintf("/repos/%s/issues/%d/comments", repo, issue.Number),
		map[string]string{"body": "<!-- drover:job-1 --> not the bot's"}, nil)
	first, err := th.CommentOnce(ctx, repo, issue.Number, "job-1", "queued")
	if err != nil || first.ID == 0 || first.Author != g.AdminUser || !strings.HasPrefix(first.Body, "queued") {
		t.Fatalf("CommentOnce: %+v, %v", first, err)
	}
	again, err := th.CommentOnce(ctx, repo, issue.Number, "job-1", "queued again")
	if err != nil || again.ID != first.ID {
		t.Fatalf("CommentOnce again: %+v, %v; want comment %d", again, err, first.ID)
	}
	if err := th.EditComment(ctx, repo, first.ID, "running"); err != nil {
		t.Fatal(err)
	}
	comments, err = th.Comments(ctx, repo, issue.Number)
	if err != nil || len(comments) != 5 || comments[4].ID != first.ID || !strings.HasPrefix(comments[4].Body, "running") ||
		!strings.Contains(comments[4].Body, "<!-- drover:job-1 -->") {
		t.Fatalf("Comments after CommentOnce twice and an edit: %+v, %v", comments, err)
	}
	if again, err := th.CommentOnce(ctx, repo, issue.Number, "job-1", "x"); err != nil || again.ID != first.ID {
		t.Fatalf("CommentOnce after the edit: %+v, %v; want comment %d", again, err, first.ID)
	}

	// A pull request with two reviews: a conversation resolved, one not.
	_, sha, push := cloneAndCommit(ctx, t, g, repo, "drover/job-1")
	push("drover/job-1")
	pr, err := c.CreatePR(ctx, repo, forge.NewPR{Head: "drover/job-1", Base: "main", Title: "job 1"})
	if err != nil {
		t.Fatal(err)
	}
	var rv struct {
		ID int64 `json:"id"`
	}
	g.API(t, writerToken, http.MethodPost, fmt.Sprintf("/repos/%s/pulls/%d/reviews", repo, pr.Number), map[string]any{
		"event": "REQUEST_CHANGES", "body": "two things", "commit_id": sha, "comments": []map[string]any{
			{"path": "job-1.txt", "new_position": 1, "body": "resolve me"}}}, &rv)
	g.API(t, writerToken, http.MethodPost, fmt.Sprintf("/repos/%s/pulls/%d/reviews", repo, pr.Number), map[string]any{
		"event": "COMMENT", "body": "and this", "commit_id": sha, "comments": []map[string]any{
			{"path": "README.md", "new_position": 1, "body": "still open"}}}, nil)
	var rc []struct {
		ID int64 `json:"id"`
	}
	g.API(t, g.AdminToken, http.MethodGet, fmt.Sprintf("/repos/%s/pulls/%d/reviews/%d/comments", repo, pr.Number, rv.ID), nil, &rc)
	if len(rc) != 1 {
		t.Fatalf("review comments: %+v", rc)
	}
	g.API(t, g.AdminToken, http.MethodPost, fmt.Sprintf("/repos/%s/pulls/comments/%d/resolve", repo, rc[0].ID), nil, nil)
	is, err = th.Issue(ctx, repo, pr.Number)
	if err != nil || !is.IsPR || is.HeadSHA != sha || is.HeadBranch != "drover/job-1" || is.BaseBranch != "main" || is.State != "open" {
		t.Fatalf("Issue of a pull request: %+v, %v", is, err)
	}
	reviews, err := th.Reviews(ctx, repo, pr.Number)
	if err != nil || len(reviews) != 2 || reviews[0].State != forge.ReviewChangesRequested || reviews[0].Author != "writer" ||
		reviews[0].Body != "two things" || reviews[0].CommitID != sha || reviews[1].State != forge.ReviewCommented {
		t.Fatalf("Reviews: %+v, %v", reviews, err)
	}
	threads, err := th.ReviewThreads(ctx, repo, pr.Number)
	if err != nil || len(threads) != 1 || threads[0].Path != "README.md" || threads[0].Line != 1 || threads[0].Resolved ||
		len(threads[0].Comments) != 1 || threads[0].Comments[0].Body != "still open" {
		t.Fatalf("ReviewThreads: %+v, %v; want README.md's only", threads, err)
	}

	// The statuses at the head, the latest of each context.
	for _, s := range []map[string]string{{"context": "ci/a", "state": "pending"}, {"context": "ci/a", "state": "success", "target_url": "http://127.0.0.1/ci/a"},
		{"context": "ci/b", "state": "failure"}} {
		g.API(t, g.AdminToken, http.MethodPost, "/repos/"+repo.String()+"/statuses/"+sha, s, nil)
	}
	checks, err := th.Checks(ctx, repo, sha)
	want := map[string]forge.Check{
		"ci/a": {Name: "ci/a", Status: forge.CheckCompleted, Conclusion: forge.CheckSuccess, URL: "http://127.0.0.1/ci/a"},
		"ci/b": {Name: "ci/b", Status: forge.CheckCompleted, Conclusion: forge.CheckFailure}}
	if err != nil || len(checks) != 2 || checks[0] != want[checks[0].Name] || checks[1] != want[checks[1].Name] {
		t.Fatalf("Checks: %+v, %v; want %+v", checks, err, want)
	}

	for login, want := range map[string]forge.Permission{g.AdminUser: forge.PermAdmin, "writer": forge.PermWrite,
		"reader": forge.PermRead, "nobody-here": forge.PermNone} {
		if got, err := th.Permission(ctx, repo, login); err != nil || got != want {
			t.Errorf("Permission(%s): %q, %v; want %q", login, got, err, want)
		}
	}

	// Hooks: one per URL, its deliveries signed with the secret last given.
	type delivery struct {
		body []byte
		sig  string
	}
	deliveries := make(chan delivery, 16)
	recv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, _ := io.ReadAll(r.Body)
		deliveries <- delivery{b, r.Header.Get("X-Gitea-Signature")}
	}))
	defer recv.Close()
	nh := forge.NewHook{URL: recv.URL + "/hooks/gitea", Secret: "first-secret", Events: []string{forge.HookIssues, forge.HookComments, forge.HookReviews}}
	id, err := hooks.CreateHook(ctx, repo, nh)
	if err != nil || id == 0 {
		t.Fatalf("CreateHook: %d, %v", id, err)
	}
	nh.Secret = "second-secret"
	// Gitea's edit keeps a hook's secret: the hook is replaced, under a new id.
	id, err = hooks.CreateHook(ctx, repo, nh)
	if err != nil || id == 0 {
		t.Fatalf("CreateHook again: %d, %v", id, err)
	}
	var list []struct {
		ID     int64             `json:"id"`
		Config map[string]string `json:"config"`
		Events []string          `json:"events"`
	}
	g.API(t, g.AdminToken, http.MethodGet, "/repos/"+repo.String()+"/hooks", nil, &list)
	if len(list) != 1 || list[0].ID != id || list[0].Config["content_type"] != "json" {
		t.Fatalf("hooks after CreateHook twice: %+v", list)
	}
	g.API(t, writerToken, http.MethodPost, fmt.Sprintf("/repos/%s/issues/%d/comments", repo, issue.Number), map[string]string{"body": "ping"}, nil)
	select {
	case d := <-deliveries:
		m := hmac.New(sha256.New, []byte("second-secret"))
		m.Write(d.body)
		if !hmac.Equal([]byte(hex.EncodeToString(m.Sum(nil))), []byte(d.sig)) {
			t.Fatal("a delivery not signed with the second secret")
		}
	case <-ctx.Done():
		t.Fatal("no delivery of the comment")
	}
	for range 2 {
		if err := hooks.DeleteHook(ctx, repo, id); err != nil {
			t.Fatalf("DeleteHook: %v", err)
		}
	}
	g.API(t, g.AdminToken, http.MethodGet, "/repos/"+repo.String()+"/hooks", nil, &list)
	if len(list) != 0 {
		t.Fatalf("hooks after DeleteHook: %+v", list)
	}

	// Lost replies, behind a proxy that forwards the post and drops its answer: one comment of
	// the marker, one hook of the URL.
	proxy := testkit.NewForgeProxy(t, g.URL)
	lossy, err := forge.Open(forge.Conn{Kind: forge.KindGitea, URL: proxy.URL, Token: g.AdminToken}, nil)
	if err != nil {
		t.Fatal(err)
	}
	proxy.On(http.MethodPost, fmt.Sprintf("/issues/%d/comments", issue.Number), 1, testkit.LoseReply)
	proxy.On(http.MethodPost, "/hooks", 1, testkit.LoseReply)
	lost, err := lossy.(forge.Threads).CommentOnce(ctx, repo, issue.Number, "job-2", "lost once")
	if err != nil || lost.ID == 0 || proxy.Count(http.MethodPost, fmt.Sprintf("/issues/%d/comments", issue.Number)) != 1 {
		t.Fatalf("CommentOnce after a lost reply: %+v, %v", lost, err)
	}
	hid, err := lossy.(forge.Hooks).CreateHook(ctx, repo, nh)
	if err != nil || hid == 0 || proxy.Count(http.MethodPost, "/hooks") != 1 {
		t.Fatalf("CreateHook after a lost reply: %d, %v", hid, err)
	}
	g.API(t, g.AdminToken, http.MethodGet, "/repos/"+repo.String()+"/hooks", nil, &list)
	if len(list) != 1 || list[0].ID != hid {
		t.Fatalf("hooks after a lost reply: %+v, want just %d", list, hid)
	}

	// Not found: an issue, and a missing repository's comments.
	_, err = th.Issue(ctx, repo, 9999)
	wantCode(t, err, forge.CodeNotFound)
	_, err = th.Comments(ctx, forge.Repo{Owner: g.AdminUser, Name: "nope"}, 1)
	wantCode(t, err, forge.CodeNotFound)
}
