package hub

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/job"
	"drover/internal/pipeline/spec"
	"drover/internal/protocol"
	"drover/internal/store"
)

// refusingForge maps project web to a forge that refuses everything: a
// publication is recorded, and fails.
func refusingForge(t *testing.T, th *testHub) {
	t.Helper()
	forge := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { http.Error(w, "no", http.StatusForbidden) }))
	t.Cleanup(forge.Close)
	now := time.Now()
	if err := th.h.store.Write(t.Context(), func(tx store.Tx) error {
		if err := tx.PutForge(store.Forge{Name: "f", Kind: "gitea", URL: forge.URL, Secret: "s", CreatedAt: now, UpdatedAt: now}); err != nil {
			return err
		}
		return tx.SetProjectConfig("web", store.ProjectConfig{Forge: "f", ForgeRepo: "o/r"}, now)
	}); err != nil {
		t.Fatal(err)
	}
}

// judgedGroup runs a group of three attempts (playAttempts) with a judge
// to its end: the judge, offered once all of them ended, is given every
// attempt's outcome and diff, and delivers verdict(attempt number of each
// text).
func judgedGroup(t *testing.T, pick bool, verdict func(byText map[string]int) string) (*testHub, apitypes.GroupView) {
	th := startHub(t, Config{})
	srs, toks := groupRunners(th)
	dir, base := sourceRepo(t)
	th.push(dir, "web", base)
	refusingForge(t, th)
	var g apitypes.GroupView
	req := apitypes.GroupRequest{Project: "web", Base: base, Prompt: "make a.txt say hello", Attempts: 3, Agent: "claude",
		Verify: "grep -q hello a.txt", Judge: "claude", PickByJudge: pick}
	if code, e := th.call(th.admin, "POST", "/groups", req, &g); code != http.StatusCreated {
		t.Fatalf("start: %d %v", code, e)
	}
	if g.Judge == nil || g.Judge.Agent != "claude" || g.Judge.PickByJudge != pick || g.Judge.State != "pending" {
		t.Fatalf("the started group's judge: %+v", g.Judge)
	}
	content := playAttempts(t, th, srs, toks, dir, base)
	v, _ := th.group(th.admin, g.ID)
	byText := map[string]int{}
	for _, a := range v.Attempts {
		byText[strings.TrimSpace(content[a.Job])] = a.Number
	}
	// The judge: an observe-mode agent at the base, with the tools (its
	// delivery is its verdict), given every step's outcome and each
	// attempt's diff.
	o, r := nextOffer(t, srs)
	var names []string
	for _, f := range o.Spec.Context {
		names = append(names, f.Name)
	}
	slices.Sort(names)
	if o.Spec.Agent != "claude" || o.Spec.Mode != protocol.ModeObserve || !o.Spec.Tools || o.Spec.Repo.Base != base ||
		!slices.Equal(names, []string{"attempt-1.diff", "attempt-2.diff", "attempt-3.diff", spec.ReadsFile}) {
		t.Fatalf("the judge's offer %+v (context %v), want an observe-mode claude job at the base given the attempts", o.Spec, names)
	}
	wantOK(t, srs[r].request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	wantOK(t, srs[r].request(protocol.TypeDeliver, protocol.Deliver{AttemptRef: o.AttemptRef, Summary: verdict(byText)}))
	wantOK(t, srs[r].request(protocol.TypeFinish, protocol.Finish{AttemptRef: o.AttemptRef,
		Outcome: job.Outcome{State: job.AttemptCompleted, Reason: job.ReasonExited, ExitCode: exit(0)}, LogSHA256: sum(nil)}))
	waitFor(t, "the group to end", func() bool {
		v, _ = th.group(th.admin, g.ID)
		return v.State != "running"
	})
	if v.State != "done" || v.Judge == nil || v.Judge.State != "done" || v.Judge.Job != o.Job {
		t.Fatalf("group %s (%s), judge %+v: want done, judged by job %s", v.State, v.Reason, v.Judge, o.Job)
	}
	return th, v
}

// ranking is a verdict ranking texts' attempts in this order.
func ranking(byText map[string]int, texts ...string) string {
	var places []string
	for _, s := range texts {
		places = append(places, fmt.Sprintf(`{"attempt": "attempt-%d", "reason": "it says %s"}`, byText[s], s))
	}
	return `{"ranking": [` + strings.Join(places, ", ") + `]}`
}

// drover run --attempts 3 --verify --judge: the judge's valid ranking is
// shown, and nothing is picked.
func TestGroupJudgeRanksAndPicksNothing(t *testing.T) {
	t.Parallel()
	th, v := judgedGroup(t, false, func(byText map[string]int) string {
		return ranking(byText, "hello two", "hello one", "bye three")
	})
	j := v.Judge
	if j.Verdict != "valid" || len(j.Ranking) != 3 || j.Ranking[0].Reason != "it says hello two" || v.Attempts[j.Ranking[0].Attempt-1].Verify != "passed" {
		t.Fatalf("verdict %+v, want valid, hello two first", j)
	}
	if v.Picked != 0 || v.Result != "" || j.Pick != "" {
		t.Fatalf("the judge picked without being asked: %+v", v)
	}
	for _, a := range v.Attempts {
		if err := th.h.store.Read(t.Context(), func(tx store.Tx) error {
			_, err := tx.Publication(a.Job)
			return err
		}); err == nil {
			t.Errorf("attempt %d's job %s was published", a.Number, a.Job)
		}
	}
}

// --pick-by-judge: the attempt ranked first is picked and published as
// drover pick does.
func TestGroupPickByJudgePicksTheFirst(t *testing.T) {
	t.Parallel()
	th, v := judgedGroup(t, true, func(byText map[string]int) string {
		return ranking(byText, "hello two", "hello one", "bye three")
	})
	top := v.Attempts[v.Judge.Ranking[0].Attempt-1]
	if v.Picked != top.Number || v.Result != top.Commit || v.Publication == nil || v.Publication.Job != top.Job {
		t.Fatalf("picked %d at %s (publication %+v), want attempt %d at %s published", v.Picked, v.Result, v.Publication, top.Number, top.Commit)
	}
	if !strings.Contains(v.Judge.Pick, "picked") || th.gitOut("web", "rev-parse", v.Ref) != top.Commit {
		t.Fatalf("the judge's pick %q at %s", v.Judge.Pick, v.Ref)
	}
	// Settled again (a pass cut short by a crash) and restarted, the
	// group judges and picks nothing twice.
	var pv apitypes.PipelineView
	if code, e := th.call(th.admin, "GET", "/pipelines/"+v.ID, nil, &pv); code != http.StatusOK {
		t.Fatalf("pipeline: %d %v", code, e)
	}
	if err := th.h.groups.Settle(t.Context(), call.Caller{Name: "admin", Admin: true}, v.ID, pv.File); err != nil {
		t.Fatal(err)
	}
	th.reopen()
	if again, _ := th.group(th.admin, v.ID); again.Picked != v.Picked || again.Judge.Pick != v.Judge.Pick || again.Judge.Job != v.Judge.Job {
		t.Fatalf("after a restart: %+v, want %+v", again, v)
	}
	kinds := map[string]int{}
	if err := th.h.store.Read(t.Context(), func(tx store.Tx) error {
		evs, err := tx.PipelineEvents(v.ID, 0, 1000)
		for _, ev := range evs {
			kinds[ev.Kind]++
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	if kinds["picked"] != 1 || kinds["judged"] != 1 || kinds["judge_pick"] != 1 {
		t.Fatalf("events %v, want one pick, one verdict, one pick by it", kinds)
	}
	var jobs apitypes.JobList
	if code, e := th.call(th.admin, "GET", "/jobs", nil, &jobs); code != http.StatusOK || len(jobs.Jobs) != 7 {
		t.Fatalf("jobs: %d %v, %d of them, want 7 (3 attempts, 3 verifies, 1 judge)", code, e, len(jobs.Jobs))
	}
}

// A verdict that is not one (not JSON, an unknown attempt, one missing,
// one twice), or that ranks first an attempt whose verify failed, picks
// nothing, and says why.
func TestGroupPickByJudgeRefusesBadVerdicts(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, invalid, pick string
		verdict             func(byText map[string]int) string
	}{
		{"garbage", "not a JSON verdict", "verdict is invalid", func(map[string]int) string { return "attempt-2 is best, trust me" }},
		{"unknown attempt", `"attempt-4" is not an attempt`, "verdict is invalid", func(b map[string]int) string {
			return `{"ranking": [{"attempt": "attempt-4", "reason": "r"}, {"attempt": "attempt-1", "reason": "r"}, {"attempt": "attempt-2", "reason": "r"}, {"attempt": "attempt-3", "reason": "r"}]}`
		}},
		{"missing", "is not ranked", "verdict is invalid", func(b map[string]int) string { return ranking(b, "hello two", "hello one") }},
		{"twice", "ranked twice", "verdict is invalid", func(b map[string]int) string { return ranking(b, "hello two", "hello two", "hello one", "bye three") }},
		{"verify failed", "", "did not pass its verify", func(b map[string]int) string { return ranking(b, "bye three", "hello two", "hello one") }},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, v := judgedGroup(t, true, c.verdict)
			j := v.Judge
			if c.invalid != "" && (j.Verdict != "invalid" || !strings.Contains(j.Invalid, c.invalid) || len(j.Ranking) != 0) {
				t.Errorf("verdict %q (%s) ranking %v, want invalid saying %q", j.Verdict, j.Invalid, j.Ranking, c.invalid)
			}
			if v.Picked != 0 || v.Result != "" || !strings.Contains(j.Pick, "nothing picked") || !strings.Contains(j.Pick, c.pick) {
				t.Errorf("picked %d (%q), want nothing picked because %q", v.Picked, j.Pick, c.pick)
			}
		})
	}
}

// A judge without attempts to judge, or a pick by a judge there is not,
// or without a verify, starts nothing.
func TestBadJudgeRequestsStartNothing(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	dir, base := sourceRepo(t)
	th.push(dir, "web", base)
	ok := apitypes.GroupRequest{Project: "web", Base: base, Prompt: "p", Attempts: 2, Agent: "claude", Verify: "true", Judge: "claude", PickByJudge: true}
	for name, c := range map[string]struct {
		mod  func(*apitypes.GroupRequest)
		want string
	}{
		"pick without judge":  {func(r *apitypes.GroupRequest) { r.Judge = "" }, "needs a judge"},
		"pick without verify": {func(r *apitypes.GroupRequest) { r.Verify = "" }, "needs --verify"},
		"unknown judge":       {func(r *apitypes.GroupRequest) { r.Judge = "nosuch" }, `the judge: unknown agent "nosuch"`},
		"exec judges nothing": {func(r *apitypes.GroupRequest) { r.Judge = "exec" }, "takes no prompt"},
		"bad judge account":   {func(r *apitypes.GroupRequest) { r.Judge = "native:a\x1b" }, "account"},
		"judge, no attempts":  {func(r *apitypes.GroupRequest) { r.Attempts = 0 }, "at least one attempt"},
	} {
		req := ok
		c.mod(&req)
		if code, e := th.call(th.admin, "POST", "/groups", req, nil); code != http.StatusBadRequest || !strings.Contains(fmt.Sprint(e), c.want) {
			t.Errorf("%s: %d %v, want 400 saying %q", name, code, e, c.want)
		}
	}
	var l apitypes.PipelineList
	if code, e := th.call(th.admin, "GET", "/pipelines", nil, &l); code != http.StatusOK || len(l.Pipelines) != 0 {
		t.Fatalf("pipelines after refusals: %d %v %+v", code, e, l)
	}
}
