package web

import (
	"context"
	"net/http"
	"strings"
	"testing"

	"drover/internal/apitypes"
)

// fakeGroup is the one group the fake backend knows.
var fakeGroup = apitypes.GroupView{ID: "p-g1", Project: "web", Base: strings.Repeat("a", 40), Requester: "alice", State: "done",
	Verify: "make <b>test</b>", Picked: 2, Result: strings.Repeat("b", 40), Ref: "refs/drover/groups/p-g1",
	Attempts: []apitypes.GroupAttempt{
		{Number: 1, Agent: "claude", State: "done", Verify: "failed", Files: 1, Added: 1, Job: "j-1",
			Diff: "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -0,0 +1 @@\n+<script>alert(1)</script>\n"},
		{Number: 2, Agent: "native", Account: "local", State: "done", Verify: "passed", Files: 1, Added: 1, Job: "j-2",
			Diff: "diff --git a/a.txt b/a.txt\n--- a/a.txt\n+++ b/a.txt\n@@ -0,0 +1 @@\n+<img src=x>\n"},
		{Number: 3, Agent: "codex", State: "failed", Reason: "job j-3 failed", Verify: "skipped"},
	}}

func (f *fakeBackend) Group(_ context.Context, _ User, id string) (apitypes.GroupView, error) {
	if id != fakeGroup.ID {
		return apitypes.GroupView{}, &Error{Status: http.StatusNotFound, Msg: "no attempt group " + id}
	}
	return fakeGroup, nil
}

// A group's page shows its attempts side by side, each diff escaped (an
// agent's output is never markup), the picked one marked.
func TestGroupPageRenders(t *testing.T) {
	srv := serve(t, newFake(), Config{})
	cookie := signIn(t, srv)
	code, b := get(t, srv, cookie, "/groups/p-g1")
	if code != http.StatusOK {
		t.Fatalf("GET /groups/p-g1: %d\n%s", code, b)
	}
	for _, want := range []string{`data-attempt="1"`, `data-attempt="2"`, `data-attempt="3"`, "Attempt 2 (picked)",
		"+&lt;script&gt;alert(1)&lt;/script&gt;", "+&lt;img src=x&gt;", "make &lt;b&gt;test&lt;/b&gt;", "native:local", `<dd class="verify">failed`} {
		if !strings.Contains(b, want) {
			t.Errorf("want %q in\n%s", want, b)
		}
	}
	for _, bad := range []string{"<script>alert", "<img src=x", "<b>test"} {
		if strings.Contains(b, bad) {
			t.Errorf("unescaped %q in\n%s", bad, b)
		}
	}
	if code, _ := get(t, srv, cookie, "/groups/p-nosuch"); code != http.StatusNotFound {
		t.Errorf("an unknown group: %d, want 404", code)
	}
}
