package forge_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"drover/internal/forge"
)

// TestGitHubThreads: an issue's 250 comments over three pages, oldest first; a pull request's
// submitted reviews; its unresolved review threads over GraphQL pages, a long thread's
// comments read to their end; check runs and statuses; one comment per marker despite a lost
// reply, an edit that keeps the marker; permissions, a stranger's none; one hook per URL
// despite a lost reply, its secret updated; a hook deleted twice.
func TestGitHubThreads(t *testing.T) {
	f := newFakeGitHub(t)
	c := withToken(t, f)
	f.push("o/r", "drover/job-1", shaJob)
	ctx := t.Context()
	th, hooks := c.(forge.Threads), c.(forge.Hooks)

	f.mu.Lock()
	pull := f.open(f.repos["o/r"], "drover/job-1", "main", "job 1", false)
	f.threads.issues[pull.number] = &fakeGitHubIssue{number: pull.number, title: "job 1", user: "drover-bot", state: "open", pull: true}
	f.threads.issues[7] = &fakeGitHubIssue{number: 7, title: "fix it", body: "broken\n/drover run x", user: "alice", state: "open", labels: []string{"drover:fix"}}
	for i := range 250 {
		f.comment(7, "alice", fmt.Sprintf("comment %d", i))
	}
	f.threads.reviews[pull.number] = []map[string]any{
		{"id": 1, "user": map[string]any{"login": "bob"}, "state": "CHANGES_REQUESTED", "body": "fix", "commit_id": shaJob, "submitted_at": "2026-01-01T00:00:00Z"},
		{"id": 2, "user": map[string]any{"login": "bob"}, "state": "PENDING", "body": "draft"},
		{"id": 3, "user": map[string]any{"login": "carol"}, "state": "APPROVED", "body": "", "commit_id": shaJob, "submitted_at": "2026-01-02T00:00:00Z"},
	}
	f.threads.threads = []*fakeGitHubThread{
		{resolved: true, path: "a.go", line: 1, comments: []string{"done"}},
		{path: "b.go", line: 2, comments: []string{"b1", "b2", "b3", "b4", "b5"}},
		{resolved: true, path: "c.go", line: 3, comments: []string{"done"}},
		{path: "d.go", line: 4, comments: []string{"d1"}},
		{path: "e.go", line: 5, comments: []string{"e1", "e2"}},
	}
	f.threads.runs[shaJob] = []map[string]any{
		{"id": 1, "name": "build", "status": "completed", "conclusion": "success", "html_url": "https://ci/1"},
		{"id": 2, "name": "test", "status": "in_progress", "conclusion": nil},
	}
	f.threads.statuses[shaJob] = []map[string]any{{"context": "legacy/ci", "state": "error", "target_url": "https://ci/3"}}
	f.threads.perms["alice"] = [2]string{"admin", "admin"}
	f.threads.perms["maint"] = [2]string{"write", "maintain"}
	f.threads.perms["tri"] = [2]string{"read", "triage"}
	f.mu.Unlock()

	is, err := th.Issue(ctx, repoOR, 7)
	if f.seen(err) != nil || is.Title != "fix it" || is.Author != "alice" || is.IsPR || len(is.Labels) != 1 || is.Labels[0] != "drover:fix" ||
		is.URL != f.srv.URL+"/o/r/issues/7" {
		t.Fatalf("Issue(7): %+v, %v", is, err)
	}
	is, err = th.Issue(ctx, repoOR, pull.number)
	if f.seen(err) != nil || !is.IsPR || is.HeadSHA != shaJob || is.HeadBranch != "drover/job-1" || is.BaseBranch != "main" {
		t.Fatalf("Issue of a pull request: %+v, %v", is, err)
	}
	comments, err := th.Comments(ctx, repoOR, 7)
	if f.seen(err) != nil || len(comments) != 250 {
		t.Fatalf("Comments: %d, %v; want 250", len(comments), err)
	}
	for i, cm := range comments {
		if cm.Body != fmt.Sprintf("comment %d", i) || cm.Author != "alice" {
			t.Fatalf("comment %d: %+v", i, cm)
		}
	}
	reviews, err := th.Reviews(ctx, repoOR, pull.number)
	if f.seen(err) != nil || len(reviews) != 2 || reviews[0].State != forge.ReviewChangesRequested || reviews[0].Author != "bob" ||
		reviews[0].CommitID != shaJob || reviews[1].State != forge.ReviewApproved || reviews[1].SubmittedAt.IsZero() {
		t.Fatalf("Reviews: %+v, %v", reviews, err)
	}
	threads, err := th.ReviewThreads(ctx, repoOR, pull.number)
	if f.seen(err) != nil || len(threads) != 3 || threads[0].Path != "b.go" || threads[0].Line != 2 || len(threads[0].Comments) != 5 ||
		threads[0].Comments[4].Body != "b5" || threads[1].Path != "d.go" || threads[2].Path != "e.go" || len(threads[2].Comments) != 2 {
		t.Fatalf("ReviewThreads: %+v, %v; want b.go (5 comments), d.go, e.go", threads, err)
	}
	_, err = th.ReviewThreads(ctx, forge.Repo{Owner: "o", Name: "other"}, 1)
	if code(f.seen(err)) != forge.CodeNotFound {
		t.Fatalf("ReviewThreads of another repository: %v, want not_found", err)
	}
	checks, err := th.Checks(ctx, repoOR, shaJob)
	want := []forge.Check{{Name: "build", Status: forge.CheckCompleted, Conclusion: forge.CheckSuccess, URL: "https://ci/1"},
		{Name: "test", Status: forge.CheckInProgress}, {Name: "legacy/ci", Status: forge.CheckCompleted, Conclusion: forge.CheckFailure, URL: "https://ci/3"}}
	if f.seen(err) != nil || fmt.Sprint(checks) != fmt.Sprint(want) {
		t.Fatalf("Checks: %+v, %v; want %+v", checks, err, want)
	}

	// A lost reply: CommentOnce finds the comment it made; another's comment with the marker is not the bot's.
	f.mu.Lock()
	f.comment(7, "mallory", "<!-- drover:job-1 -->")
	f.threads.dropComments = 1
	f.mu.Unlock()
	first, err := th.CommentOnce(ctx, repoOR, 7, "job-1", "queued")
	if f.seen(err) != nil || first.Author != "drover-bot" || first.Body != "queued\n\n<!-- drover:job-1 -->" {
		t.Fatalf("CommentOnce after a lost reply: %+v, %v", first, err)
	}
	again, err := th.CommentOnce(ctx, repoOR, 7, "job-1", "queued")
	if f.seen(err) != nil || again.ID != first.ID || f.threads.posts != 1 {
		t.Fatalf("CommentOnce again: %+v, %v, %d posts; want comment %d and one post", again, err, f.threads.posts, first.ID)
	}
	if err := th.EditComment(ctx, repoOR, first.ID, "running"); f.seen(err) != nil {
		t.Fatal(err)
	}
	if again, err := th.CommentOnce(ctx, repoOR, 7, "job-1", "x"); f.seen(err) != nil || again.ID != first.ID || again.Body != "running\n\n<!-- drover:job-1 -->" {
		t.Fatalf("CommentOnce after the edit: %+v, %v", again, err)
	}
	err = th.EditComment(ctx, repoOR, 999999, "x")
	if code(f.seen(err)) != forge.CodeNotFound {
		t.Fatalf("EditComment of no comment: %v", err)
	}

	for login, want := range map[string]forge.Permission{"alice": forge.PermAdmin, "maint": forge.PermWrite, "tri": forge.PermRead, "nobody": forge.PermNone} {
		if got, err := th.Permission(ctx, repoOR, login); f.seen(err) != nil || got != want {
			t.Errorf("Permission(%s): %q, %v; want %q", login, got, err, want)
		}
	}

	// Hooks: a lost reply makes no second one; a second call updates the secret.
	nh := forge.NewHook{URL: "https://hub.example.com/hooks/github", Secret: "first", Events: []string{forge.HookIssues, forge.HookComments, forge.HookReviews}}
	f.mu.Lock()
	f.threads.dropHooks = 1
	f.mu.Unlock()
	id, err := hooks.CreateHook(ctx, repoOR, nh)
	if f.seen(err) != nil || id == 0 {
		t.Fatalf("CreateHook after a lost reply: %d, %v", id, err)
	}
	nh.Secret = "second"
	if id2, err := hooks.CreateHook(ctx, repoOR, nh); f.seen(err) != nil || id2 != id {
		t.Fatalf("CreateHook again: %d, %v; want %d", id2, err, id)
	}
	// Read under the lock, checked after it: a test that fails holding it would hang the fake's cleanup.
	f.mu.Lock()
	hs, posts := append([]*fakeGitHubHook{}, f.threads.hooks...), f.threads.hookPosts
	f.mu.Unlock()
	if len(hs) != 1 || posts != 1 {
		t.Fatalf("%d hooks after %d posts, want one of one", len(hs), posts)
	}
	if h := *hs[0]; h.secret != "second" || h.ctype != "json" || h.insecureSSL != "0" || !h.active ||
		strings.Join(h.events, ",") != "issues,issue_comment,pull_request_review,pull_request_review_comment" {
		t.Fatalf("hook: %+v", h)
	}
	for range 2 {
		if err := hooks.DeleteHook(ctx, repoOR, id); f.seen(err) != nil {
			t.Fatalf("DeleteHook: %v", err)
		}
	}

	// A lost race: the hook another made since the look is given this secret and these events.
	f.mu.Lock()
	f.threads.raceHook = true
	f.mu.Unlock()
	raced, err := hooks.CreateHook(ctx, repoOR, nh)
	f.mu.Lock()
	hs = nil
	for _, h := range f.threads.hooks {
		c := *h
		hs = append(hs, &c)
	}
	f.mu.Unlock()
	if f.seen(err) != nil || len(hs) != 1 || hs[0].id != raced || hs[0].secret != "second" || hs[0].ctype != "json" {
		t.Fatalf("CreateHook after a lost race: %d, %v; hooks %+v", raced, err, hs)
	}

	// A rate limit is told as one, with its wait.
	f.mu.Lock()
	f.answer = func(w http.ResponseWriter, r *http.Request) bool {
		w.Header().Set("X-RateLimit-Remaining", "0")
		w.Header().Set("Retry-After", "30")
		f.fail(w, http.StatusForbidden, "API rate limit exceeded")
		return true
	}
	f.mu.Unlock()
	_, err = th.Comments(ctx, repoOR, 7)
	if fe, ok := err.(*forge.Error); !ok || fe.Code != forge.CodeRateLimited || fe.RetryAfter.Seconds() != 30 {
		t.Fatalf("Comments when rate limited: %v", f.seen(err))
	}
}

// TestGitHubAppCommentOnce: an App comments as its bot, SLUG[bot], and finds that comment
// again after a lost reply.
func TestGitHubAppCommentOnce(t *testing.T) {
	f := newFakeGitHub(t)
	c := withApp(t, f).(forge.Threads)
	f.mu.Lock()
	f.threads.issues[7] = &fakeGitHubIssue{number: 7, title: "fix it", user: "alice", state: "open"}
	f.comment(7, "drover-bot", "<!-- drover:job-1 --> a user's, not the App's")
	f.threads.dropComments = 1
	f.mu.Unlock()
	first, err := c.CommentOnce(t.Context(), repoOR, 7, "job-1", "queued")
	if f.seen(err) != nil || first.Author != "drover-app[bot]" {
		t.Fatalf("CommentOnce as an App after a lost reply: %+v, %v", first, err)
	}
	again, err := c.CommentOnce(t.Context(), repoOR, 7, "job-1", "queued")
	if f.seen(err) != nil || again.ID != first.ID || f.threads.posts != 1 {
		t.Fatalf("CommentOnce as an App again: %+v, %v, %d posts", again, err, f.threads.posts)
	}
}

// TestGitHubCommentsBounded: a thread longer than drover reads is an error saying so, not
// its first comments as if they were all.
func TestGitHubCommentsBounded(t *testing.T) {
	f := newFakeGitHub(t)
	c := withToken(t, f).(forge.Threads)
	f.mu.Lock()
	f.threads.issues[7] = &fakeGitHubIssue{number: 7, title: "long", user: "alice", state: "open"}
	for range 5001 {
		f.comment(7, "alice", "+1")
	}
	f.mu.Unlock()
	list, err := c.Comments(t.Context(), repoOR, 7)
	if code(f.seen(err)) != forge.CodeBadReply || !strings.Contains(err.Error(), "more than 5000") || list != nil {
		t.Fatalf("Comments of 5001: %d, %v; want a bad_reply saying more than 5000", len(list), err)
	}
}
