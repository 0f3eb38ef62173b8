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
	g := fakeGroup
	f.mu.Lock()
	g.Judge = f.judge
	f.mu.Unlock()
	return g, nil
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

// A group's judge shows with its ranking, the judge's words escaped, and
// an invalid verdict says why it is not trusted.
func TestGroupPageShowsTheJudge(t *testing.T) {
	f := newFake()
	srv := serve(t, f, Config{})
	cookie := signIn(t, srv)
	judge := func(j *apitypes.GroupJudge) {
		f.mu.Lock()
		f.judge = j
		f.mu.Unlock()
	}
	judge(&apitypes.GroupJudge{Agent: "claude", State: "done", Job: "j-4", Verdict: "valid", PickByJudge: true,
		Pick:    "attempt 2, ranked first by the judge, picked as the group's result",
		Ranking: []apitypes.GroupRanked{{Attempt: 2, Reason: "passes <i>its</i> tests"}, {Attempt: 1, Reason: "r1"}, {Attempt: 3, Reason: "r3"}}})
	_, b := get(t, srv, cookie, "/groups/p-g1")
	for _, want := range []string{`id="ranking"`, `<li data-attempt="2">Attempt 2: passes &lt;i&gt;its&lt;/i&gt; tests</li>`, "ranked first by the judge", "picks the attempt it ranks first", "/jobs/j-4"} {
		if !strings.Contains(b, want) {
			t.Errorf("want %q in\n%s", want, b)
		}
	}
	if strings.Contains(b, "<i>its") {
		t.Errorf("the judge's words unescaped in\n%s", b)
	}
	judge(&apitypes.GroupJudge{Agent: "claude", State: "done", Verdict: "invalid", Invalid: `not a JSON verdict: <b>x</b>`})
	_, b = get(t, srv, cookie, "/groups/p-g1")
	if !strings.Contains(b, "invalid, not trusted: not a JSON verdict: &lt;b&gt;x&lt;/b&gt;") || strings.Contains(b, `id="ranking"`) {
		t.Errorf("an invalid verdict in\n%s", b)
	}
}
