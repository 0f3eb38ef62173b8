package forge_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"

	"drover/internal/forge"
)

// TestGitLabThreads: an issue and its notes over pages (system notes left out), a merge
// request by its iid when no issue has it and by GitLabMergeRequest when one does, its
// approvals, its unresolved discussions, commit statuses, one note per marker despite a lost
// reply and an edit over GraphQL that keeps the marker, member permissions, one hook per URL
// despite a lost reply, a hook deleted twice, and a rate limit.
func TestGitLabThreads(t *testing.T) {
	f := startFakeGitLab(t, glToken)
	f.addProject("o/r", "main", shaMain)
	f.push("o/r", "drover/job-1", shaJob)
	c := openGitLab(t, f, glToken)
	th, hooks := c.(forge.Threads), c.(forge.Hooks)
	ctx := t.Context()

	mr := f.openMR("o/r", "o/r", "drover/job-1", "main", shaJob) // !1
	f.openMR("o/r", "o/r", "drover/job-1", "main", shaJob)       // !2, which issue #2 shadows
	f.mu.Lock()
	issue := func(iid int, title string) {
		f.threads.issues[fmt.Sprintf("o/r#%d", iid)] = map[string]any{"id": 100 + iid, "iid": iid, "title": title, "description": "broken",
			"state": "opened", "author": map[string]any{"username": "alice"}, "labels": []string{"drover:fix"},
			"web_url": fmt.Sprintf("%s/o/r/-/issues/%d", f.srv.URL, iid)}
	}
	issue(2, "issue two")
	issue(7, "fix it")
	for i := range 45 {
		f.note("o/r#7", "alice", fmt.Sprintf("comment %d", i), false)
		if i%10 == 0 {
			f.note("o/r#7", "alice", "added ~drover:fix label", true)
		}
	}
	f.note("o/r!2", "bob", "on the merge request", false)
	f.threads.users["alice"], f.threads.users["dev"], f.threads.users["guest"], f.threads.users["outsider"] = 2, 3, 4, 5
	f.threads.members[2], f.threads.members[3], f.threads.members[4] = 50, 30, 10
	f.threads.approvals["o/r!1"] = []string{"alice"}
	note := func(id int, body string, resolvable, resolved bool, path string, line int) map[string]any {
		n := map[string]any{"id": id, "body": body, "author": map[string]any{"username": "bob"}, "system": false,
			"resolvable": resolvable, "resolved": resolved, "created_at": "2026-01-01T00:00:00Z"}
		if path != "" {
			n["position"] = map[string]any{"new_path": path, "new_line": line, "position_type": "text"}
		}
		return n
	}
	var ds []map[string]any
	for i := range 25 { // two pages of discussions; every fifth resolved
		d := map[string]any{"id": fmt.Sprintf("d%d", i), "individual_note": false, "notes": []map[string]any{
			note(9000+2*i, fmt.Sprintf("thread %d", i), true, i%5 == 0, fmt.Sprintf("f%d.go", i), i+1),
			note(9001+2*i, "reply", true, i%5 == 0, "", 0)}}
		ds = append(ds, d)
	}
	ds = append(ds, map[string]any{"id": "plain", "individual_note": true, "notes": []map[string]any{note(9999, "just a comment", false, false, "", 0)}})
	f.threads.discussions["o/r!1"] = ds
	f.threads.statuses[shaJob] = []map[string]any{{"name": "build", "status": "success", "target_url": "https://ci/1"},
		{"name": "test", "status": "running"}, {"name": "lint", "status": "failed"}, {"name": "deploy", "status": "manual"}}
	f.mu.Unlock()

	is, err := th.Issue(ctx, repoOR, 7)
	if noToken(t, err); err != nil || is.Title != "fix it" || is.State != "open" || is.Author != "alice" || is.IsPR || is.Labels[0] != "drover:fix" {
		t.Fatalf("Issue(7): %+v, %v", is, err)
	}
	is, err = th.Issue(ctx, repoOR, int(mr))
	if err != nil || !is.IsPR || is.HeadSHA != shaJob || is.HeadBranch != "drover/job-1" || is.BaseBranch != "main" || is.Number != int(mr) {
		t.Fatalf("Issue(%d), a merge request: %+v, %v", mr, is, err)
	}
	if is, err := th.Issue(ctx, repoOR, 2); err != nil || is.IsPR || is.Title != "issue two" {
		t.Fatalf("Issue(2): %+v, %v; want the issue", is, err)
	}
	if is, err := th.Issue(ctx, repoOR, forge.GitLabMergeRequest(2)); err != nil || !is.IsPR {
		t.Fatalf("Issue(GitLabMergeRequest(2)): %+v, %v; want the merge request", is, err)
	}
	comments, err := th.Comments(ctx, repoOR, 7)
	if err != nil || len(comments) != 45 || comments[0].Body != "comment 0" || comments[44].Body != "comment 44" ||
		comments[0].URL != fmt.Sprintf("%s/o/r/-/issues/7#note_%d", f.srv.URL, comments[0].ID) {
		t.Fatalf("Comments(7): %d, %v; want 45 oldest first", len(comments), err)
	}
	if comments, err := th.Comments(ctx, repoOR, forge.GitLabMergeRequest(2)); err != nil || len(comments) != 1 || comments[0].Author != "bob" {
		t.Fatalf("Comments of !2: %+v, %v", comments, err)
	}
	reviews, err := th.Reviews(ctx, repoOR, int(mr))
	if err != nil || len(reviews) != 1 || reviews[0].Author != "alice" || reviews[0].State != forge.ReviewApproved || reviews[0].SubmittedAt.IsZero() {
		t.Fatalf("Reviews: %+v, %v", reviews, err)
	}
	threads, err := th.ReviewThreads(ctx, repoOR, int(mr))
	if err != nil || len(threads) != 20 || threads[0].Path != "f1.go" || threads[0].Line != 2 || len(threads[0].Comments) != 2 ||
		threads[19].Path != "f24.go" {
		t.Fatalf("ReviewThreads: %d threads, %v; want the 20 unresolved", len(threads), err)
	}
	checks, err := th.Checks(ctx, repoOR, shaJob)
	want := []forge.Check{{Name: "build", Status: forge.CheckCompleted, Conclusion: forge.CheckSuccess, URL: "https://ci/1"},
		{Name: "test", Status: forge.CheckInProgress}, {Name: "lint", Status: forge.CheckCompleted, Conclusion: forge.CheckFailure},
		{Name: "deploy", Status: forge.CheckQueued}}
	if err != nil || fmt.Sprint(checks) != fmt.Sprint(want) {
		t.Fatalf("Checks: %+v, %v; want %+v", checks, err, want)
	}

	// A lost reply: CommentOnce finds the note it made.
	f.mu.Lock()
	f.threads.dropNotes = 1
	f.mu.Unlock()
	first, err := th.CommentOnce(ctx, repoOR, 7, "job-1", "queued")
	if err != nil || first.Author != "drover-bot" || !strings.HasSuffix(first.Body, "<!-- drover:job-1 -->") {
		t.Fatalf("CommentOnce after a lost reply: %+v, %v", first, err)
	}
	if again, err := th.CommentOnce(ctx, repoOR, 7, "job-1", "queued"); err != nil || again.ID != first.ID || f.threads.notePosts != 1 {
		t.Fatalf("CommentOnce again: %+v, %v, %d posts", again, err, f.threads.notePosts)
	}
	if err := th.EditComment(ctx, repoOR, first.ID, "running"); err != nil {
		t.Fatal(err)
	}
	if again, err := th.CommentOnce(ctx, repoOR, 7, "job-1", "x"); err != nil || again.ID != first.ID || again.Body != "running\n\n<!-- drover:job-1 -->" {
		t.Fatalf("CommentOnce after the edit: %+v, %v", again, err)
	}
	if err := th.EditComment(ctx, repoOR, 1, "x"); err == nil {
		t.Fatal("EditComment of no note: no error")
	}

	for login, want := range map[string]forge.Permission{"alice": forge.PermAdmin, "dev": forge.PermWrite, "guest": forge.PermRead,
		"outsider": forge.PermNone, "nobody": forge.PermNone} {
		if got, err := th.Permission(ctx, repoOR, login); err != nil || got != want {
			t.Errorf("Permission(%s): %q, %v; want %q", login, got, err, want)
		}
	}

	nh := forge.NewHook{URL: "https://hub.example.com/hooks/gitlab", Secret: "first", Events: []string{forge.HookIssues, forge.HookComments}}
	f.mu.Lock()
	f.threads.dropHooks = 1
	f.mu.Unlock()
	id, err := hooks.CreateHook(ctx, repoOR, nh)
	if err != nil || id == 0 {
		t.Fatalf("CreateHook after a lost reply: %d, %v", id, err)
	}
	nh.Secret, nh.Events = "second", []string{forge.HookReviews}
	if id2, err := hooks.CreateHook(ctx, repoOR, nh); err != nil || id2 != id {
		t.Fatalf("CreateHook again: %d, %v; want %d", id2, err, id)
	}
	// Read under the lock, checked after it: a test that fails holding it would hang.
	f.mu.Lock()
	hs, posts := append([]map[string]any{}, f.threads.hooks...), f.threads.hookPosts
	f.mu.Unlock()
	if len(hs) != 1 || posts != 1 {
		t.Fatalf("%d hooks after %d posts, want one of one", len(hs), posts)
	}
	h := hs[0]
	if h["token"] != "second" || h["url"] != nh.URL || h["issues_events"] != false || h["note_events"] != true ||
		h["merge_requests_events"] != true || h["push_events"] != false {
		t.Fatalf("hook: %+v", h)
	}
	for range 2 {
		if err := hooks.DeleteHook(ctx, repoOR, id); err != nil {
			t.Fatalf("DeleteHook: %v", err)
		}
	}

	f.mu.Lock()
	f.limited = http.Header{"Retry-After": {"20"}}
	f.mu.Unlock()
	_, err = th.Comments(ctx, repoOR, 7)
	if fe := glCode(t, err, forge.CodeRateLimited); fe.RetryAfter.Seconds() != 20 {
		t.Fatalf("Comments when rate limited: %v", err)
	}
}

// TestThreadNumberOnGitLab: a merge request's thread numbered by ThreadNumber takes its
// note on the merge request, though an issue has the same iid; an issue's stays the issue's,
// and other forges number both alike.
func TestThreadNumberOnGitLab(t *testing.T) {
	f := startFakeGitLab(t, glToken)
	f.addProject("o/r", "main", shaMain)
	f.push("o/r", "drover/job-1", shaJob)
	th := openGitLab(t, f, glToken).(forge.Threads)
	f.openMR("o/r", "o/r", "drover/job-1", "main", shaJob) // !1
	f.mu.Lock()
	f.threads.issues["o/r#1"] = map[string]any{"id": 101, "iid": 1, "title": "issue one", "description": "",
		"state": "opened", "author": map[string]any{"username": "alice"}, "labels": []string{},
		"web_url": f.srv.URL + "/o/r/-/issues/1"}
	f.mu.Unlock()
	for _, tc := range []struct {
		isPR   bool
		marker string
		want   string
	}{{true, "job-mr", "o/r!1"}, {false, "job-issue", "o/r#1"}} {
		if _, err := th.CommentOnce(t.Context(), repoOR, forge.ThreadNumber(forge.KindGitLab, 1, tc.isPR), tc.marker, "status"); err != nil {
			t.Fatalf("CommentOnce (pr %v): %v", tc.isPR, err)
		}
		f.mu.Lock()
		var on []string
		for _, n := range f.threads.notes {
			if strings.Contains(n.body, tc.marker) {
				on = append(on, n.thread)
			}
		}
		f.mu.Unlock()
		if len(on) != 1 || on[0] != tc.want {
			t.Fatalf("the note of %s is on %v, want %s", tc.marker, on, tc.want)
		}
	}
	for _, kind := range []string{forge.KindGitea, forge.KindGitHub} {
		if n := forge.ThreadNumber(kind, 1, true); n != 1 {
			t.Fatalf("ThreadNumber(%s, 1, PR) = %d", kind, n)
		}
	}
}
