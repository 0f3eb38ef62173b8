package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/client"
	"drover/internal/e2e/e2ekit"
	"drover/internal/gitcmd"
	"drover/internal/localrepo"
	"drover/internal/testkit"
	"drover/internal/testkit/fakemodel"
)

// seedShort is seed-002 (examples/pipelines) cut to its loop: claude
// builds, gemini verifies in observe mode and delivers a verdict, and a
// rejection reruns the builder with the verdict as its feedback.
const seedShort = `name: seed-short
params:
  - name: feature
steps:
  - id: implement
    kind: agent
    agent: claude
    mode: fix
    prompt: "Build {{params.feature}} in greeting.txt."
  - id: verify
    kind: agent
    agent: gemini
    mode: observe
    depends_on: [implement]
    prompt: "Check greeting.txt against: {{params.feature}}. Deliver a verdict as JSON."
    loop:
      until: verdict.approved
      max_rounds: 3
      repeat: [implement]
  - id: publish
    kind: publish
    depends_on: [verify]
`

// The finding the first verdict makes, which must reach the builder's
// second round.
const greetFinding = "greeting.txt greets nobody in particular"

func verdictJSON(t *testing.T, approved bool, findings ...string) string {
	t.Helper()
	v := map[string]any{"approved": approved, "findings": []any{}}
	var fs []any
	for _, f := range findings {
		fs = append(fs, map[string]any{"text": f, "file": "greeting.txt"})
	}
	if fs != nil {
		v["findings"] = fs
	}
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// A builder (Claude Code) and an adversary (Gemini CLI), the real pinned
// CLIs on fake model servers, run a pipeline's review loop: the adversary
// rejects round 1, the builder answers its finding, the adversary approves
// round 2, and the pipeline ends done. Each model turn scripted is asked
// for exactly once: nothing runs, or pays, twice.
func TestPipelineAgentsReviewLoop(t *testing.T) {
	t.Parallel()
	claudeTurns := []fakemodel.Turn{
		// implement, round 1
		fakemodel.WriteFile("greeting.txt", "hello\n"),
		fakemodel.CallTool("mcp__drover__deliver", map[string]any{"summary": "wrote greeting.txt"}),
		fakemodel.Text("Wrote greeting.txt."),
		// implement, round 2: answers the finding (a shell command: Claude
		// Code's file tool will not overwrite a file its session has not
		// read)
		fakemodel.RunCommand("printf 'hello, world\\n' > greeting.txt"),
		fakemodel.CallTool("mcp__drover__deliver", map[string]any{"summary": "greeting.txt greets the world"}),
		fakemodel.Text("greeting.txt now greets the world."),
	}
	geminiTurns := []fakemodel.Turn{
		// verify, round 1: rejects
		fakemodel.CallTool("mcp__drover__deliver", map[string]any{"summary": verdictJSON(t, false, greetFinding)}),
		fakemodel.Text("Rejected."),
		// verify, round 2: approves
		fakemodel.CallTool("mcp__drover__deliver", map[string]any{"summary": verdictJSON(t, true)}),
		fakemodel.Text("Approved."),
	}
	a := startAgentsPipeline(t, claudeTurns, geminiTurns)
	claude, gemini, h, c, src := a.claude, a.gemini, a.h, a.c, a.src
	end := testkit.WaitPipeline(t, c, a.pipeline, 8*time.Minute, func(v apitypes.PipelineView) bool { return v.State != "running" })
	if end.State != "done" {
		t.Fatalf("pipeline %s, want done:\n%s\nclaude:\n%s\ngemini:\n%s", end.State, describePipeline(t, c, end), claude.Dump(), gemini.Dump())
	}

	steps := map[string]apitypes.PipelineStepView{}
	for _, s := range end.Steps {
		steps[s.ID] = s
	}
	if v := steps["verify"]; v.Rounds != 2 || len(v.Runs) != 2 || !strings.Contains(string(v.Verdict), `"approved":true`) {
		t.Fatalf("verify: %d rounds, %d runs, verdict %s; want 2 rounds ending approved:\n%s", v.Rounds, len(v.Runs), v.Verdict, describePipeline(t, c, end))
	}
	if v := steps["implement"]; len(v.Runs) != 2 {
		t.Fatalf("implement ran %d times, want 2:\n%s", len(v.Runs), describePipeline(t, c, end))
	}
	// Every job ran once: no retried attempt, no replay (a replay would
	// hide a job that did not run).
	for _, s := range end.Steps {
		for _, run := range s.Runs {
			if s.Kind == "agent" && (run.Attempts != 1 || run.Replayed || run.State != "done") {
				t.Errorf("step %s run %s: %d attempts, replayed %v, %s", s.ID, run.Key, run.Attempts, run.Replayed, run.State)
			}
		}
	}
	// The builder's result is what the pipeline left; the adversary, in
	// observe mode, changed nothing.
	last := steps["implement"].Runs[1]
	if last.Commit != end.Result {
		t.Fatalf("the pipeline's result %s is not the builder's last commit %s", end.Result, last.Commit)
	}
	if got := e2ekit.Fetched(t, h, src, last.Job, "greeting.txt"); got["greeting.txt"] != "hello, world" {
		t.Fatalf("the builder's last round left greeting.txt %q", got["greeting.txt"])
	}
	for _, run := range steps["verify"].Runs {
		if run.Commit != run.Input {
			t.Errorf("verify run %s left %s on input %s: an observer's changes must not be kept", run.Key, run.Commit, run.Input)
		}
	}

	// Each fake answered each of its turns exactly once: the model was
	// asked for no turn twice, so nothing was paid for twice.
	eachTurnOnce(t, map[string]*fakemodel.FakeServer{"claude": claude, "gemini": gemini},
		map[string]int{"claude": len(claudeTurns), "gemini": len(geminiTurns)})
	// The verdict reached the builder's second round, in its prompt.
	var second string
	for _, req := range claude.Requests() {
		if req.Turn == 3 {
			second = string(req.Body)
		}
	}
	if !strings.Contains(second, greetFinding) {
		t.Fatalf("the builder's second round did not see the finding:\n%.3000s", second)
	}
}

// The hub is SIGKILLed while the builder's agent waits for its model
// (its first turn answered, its second held at the fake) and started
// again; the agent goes on, and its runner reports to the new hub
// process. The pipeline ends done with each agent step's one job run in
// one attempt, and each model turn asked for once: nothing paid twice.
func TestPipelineAgentsSurviveHubKill(t *testing.T) {
	t.Parallel()
	claudeTurns := []fakemodel.Turn{
		fakemodel.WriteFile("greeting.txt", "hello, world\n"),
		fakemodel.CallTool("mcp__drover__deliver", map[string]any{"summary": "wrote greeting.txt"}),
		fakemodel.Text("Wrote greeting.txt."),
	}
	geminiTurns := []fakemodel.Turn{
		fakemodel.CallTool("mcp__drover__deliver", map[string]any{"summary": verdictJSON(t, true)}),
		fakemodel.Text("Approved."),
	}
	// Turn 1 comes once the file is written: the agent is mid-run.
	gate := fakemodel.NewGate()
	a := startAgentsPipeline(t, claudeTurns, geminiTurns, fakemodel.Hold(1, gate))
	t.Cleanup(gate.Release)
	select {
	case <-gate.Arrived():
	case <-time.After(5 * time.Minute):
		v, _ := a.c.Pipeline(context.Background(), a.pipeline)
		t.Fatalf("the builder never asked for its second turn:\n%s\nclaude:\n%s", describePipeline(t, a.c, v), a.claude.Dump())
	}
	if mid, _ := a.c.Pipeline(context.Background(), a.pipeline); stepOf(t, mid, "implement").Runs[0].JobState != "running" {
		t.Fatalf("the builder's job is not running while its agent waits:\n%s", describePipeline(t, a.c, mid))
	}
	a.h.Kill()
	a.h.Restart()
	gate.Release()

	c := a.c
	end := testkit.WaitPipeline(t, c, a.pipeline, 5*time.Minute, func(v apitypes.PipelineView) bool { return v.State != "running" })
	if end.State != "done" {
		t.Fatalf("pipeline %s, want done:\n%s\nclaude:\n%s\ngemini:\n%s", end.State, describePipeline(t, c, end), a.claude.Dump(), a.gemini.Dump())
	}
	claims := e2ekit.ClaimsOf(a.r)
	for _, s := range end.Steps {
		if s.Kind != "agent" {
			continue
		}
		if len(s.Runs) != 1 {
			t.Errorf("step %s ran %d times, want once:\n%s", s.ID, len(s.Runs), describePipeline(t, c, end))
			continue
		}
		run := s.Runs[0]
		if run.Attempts != 1 || run.Tries != 1 || run.Replayed || run.State != "done" || claims[run.Job] != 1 {
			t.Errorf("step %s run %s: %d attempts, %d tries, claimed %d times, replayed %v, %s:\n%s",
				s.ID, run.Key, run.Attempts, run.Tries, claims[run.Job], run.Replayed, run.State, describePipeline(t, c, end))
		}
	}
	if got := e2ekit.Fetched(t, a.h, a.src, stepOf(t, end, "implement").Runs[0].Job, "greeting.txt"); got["greeting.txt"] != "hello, world" {
		t.Fatalf("the builder left greeting.txt %q", got["greeting.txt"])
	}
	eachTurnOnce(t, map[string]*fakemodel.FakeServer{"claude": a.claude, "gemini": a.gemini},
		map[string]int{"claude": len(claudeTurns), "gemini": len(geminiTurns)})
}

// agentsPipeline is seedShort running on a hub whose one runner has the
// pinned Claude Code and Gemini CLI, each on a fake model server.
type agentsPipeline struct {
	h              *testkit.Hub
	c              *client.Client
	r              *testkit.Runner
	claude, gemini *fakemodel.FakeServer
	src            string // the checkout pushed as project demo
	pipeline       string
}

// startAgentsPipeline starts seedShort with claude's and gemini's
// scripts (and the options of claude's fake, after its key).
func startAgentsPipeline(t *testing.T, claudeTurns, geminiTurns []fakemodel.Turn, claudeOpts ...fakemodel.Option) agentsPipeline {
	t.Helper()
	a := agentsPipeline{
		claude: fakemodel.NewFakeAnthropic(t, claudeTurns, append([]fakemodel.Option{fakemodel.RequireKey(e2ekit.RealKey)}, claudeOpts...)...),
		gemini: fakemodel.NewFakeGemini(t, geminiTurns, fakemodel.RequireKey(e2ekit.RealKey)),
		h:      testkit.StartHub(t, bin),
	}
	a.r = e2ekit.AgentRunner(t, a.h, "r1", "claude")
	testkit.AgentCLI(t, "gemini")
	a.r.Env = append(a.r.Env, "GOOGLE_GEMINI_BASE_URL="+a.gemini.URL+"/v1beta/")
	e2ekit.AddAccount(t, a.r, "claude", "claude-main", a.claude.URL)
	e2ekit.AddAccount(t, a.r, "gemini", "gemini-main", "")
	a.r.Start()

	a.src = e2ekit.SourceCheckout(t)
	base := e2ekit.Git(t, a.src, "rev-parse", "HEAD")
	ctx := context.Background()
	if err := (localrepo.Checkout{Git: gitcmd.Git{}, Dir: a.src}).Push(ctx, a.h.URL+"/git/demo", a.h.Admin, base, gitcmd.UploadRefPrefix+"first"); err != nil {
		t.Fatal(err)
	}
	a.c = a.h.Client()
	p, started, err := a.c.RunPipeline(ctx, apitypes.PipelineRunRequest{File: "seed-short.yaml", Source: seedShort,
		Project: "demo", Base: base, Params: map[string]string{"feature": "a greeting for the world"}})
	if err != nil || !started {
		t.Fatalf("run pipeline: started %v, %v", started, err)
	}
	a.pipeline = p.ID
	return a
}

// eachTurnOnce checks that each fake played its script to the end and
// was asked for each of its turns (turns[name] of them) exactly once.
func eachTurnOnce(t *testing.T, fakes map[string]*fakemodel.FakeServer, turns map[string]int) {
	t.Helper()
	for name, f := range fakes {
		if !f.Done() {
			t.Errorf("%s: the script was not played to its end:\n%s", name, f.Dump())
		}
		seen := map[int]int{}
		for _, req := range f.Requests() {
			if req.Turn >= 0 {
				seen[req.Turn]++
			}
		}
		for i := range turns[name] {
			if seen[i] != 1 {
				t.Errorf("%s: turn %d was answered %d times, want once:\n%s", name, i, seen[i], f.Dump())
			}
		}
		if len(seen) != turns[name] {
			t.Errorf("%s: %d turns answered, %d scripted", name, len(seen), turns[name])
		}
	}
}

// describePipeline is a pipeline's steps and runs, with its events and
// its jobs' logs, for a failing test.
func describePipeline(t *testing.T, c interface {
	PipelineEvents(context.Context, string, int64) (apitypes.PipelineEventList, error)
}, v apitypes.PipelineView) string {
	var b strings.Builder
	fmt.Fprintf(&b, "pipeline %s %s: %s\n", v.ID, v.State, v.Reason)
	for _, s := range v.Steps {
		fmt.Fprintf(&b, "  step %s %s rounds=%d %s\n", s.ID, s.State, s.Rounds, s.Reason)
		for _, r := range s.Runs {
			fmt.Fprintf(&b, "    run %s %s job=%s/%s attempts=%d in=%.8s out=%.8s %q %s\n", r.Key, r.State, r.Job, r.JobState, r.Attempts, r.Input, r.Commit, r.Summary, r.Reason)
		}
	}
	if ev, err := c.PipelineEvents(context.Background(), v.ID, 0); err == nil {
		for _, e := range ev.Events {
			fmt.Fprintf(&b, "  event %d %s %s: %s\n", e.Seq, e.Kind, e.Step, e.Message)
		}
	}
	return b.String()
}
