package pipeline

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/client"
	"drover/internal/e2e/e2ekit"
	"drover/internal/gitcmd"
	"drover/internal/ids"
	"drover/internal/job"
	"drover/internal/localrepo"
	"drover/internal/testkit"
)

// reviewLoop is the example pipeline, relative to the module root and to
// the repository it runs on.
const reviewLoop = "examples/pipelines/review-loop.yaml"

// pipelineCheckout is a repository holding the review loop's example (the
// file and both scripts, as the module has them), pushed to h as project
// "loop"; it returns the checkout and the pushed commit.
func pipelineCheckout(t *testing.T, h *testkit.Hub) (dir, base string) {
	t.Helper()
	dir = filepath.Join(t.TempDir(), "loop")
	e2ekit.Git(t, t.TempDir(), "init", "--quiet", dir)
	for _, name := range []string{reviewLoop, "examples/pipelines/builder.sh", "examples/pipelines/adversary.sh"} {
		b, err := os.ReadFile(filepath.Join("..", "..", "..", name))
		if err != nil {
			t.Fatal(err)
		}
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, b, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e2ekit.Git(t, dir, "add", "-A")
	e2ekit.Git(t, dir, "commit", "--quiet", "-m", "the review loop")
	base = e2ekit.Git(t, dir, "rev-parse", "HEAD")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	co, err := localrepo.Open(ctx, gitcmd.Git{}, dir, "")
	if err != nil {
		t.Fatal(err)
	}
	// As drover run --repo pushes a source: to an upload ref of the project.
	if err := co.Push(ctx, h.Client().GitURL("loop"), h.Admin, base, gitcmd.UploadRefPrefix+ids.New("up")); err != nil {
		t.Fatal(err)
	}
	return dir, base
}

// startReviewLoop starts the example pipeline on the repository at base.
func startReviewLoop(t *testing.T, c *client.Client, dir, base, goal string) apitypes.PipelineView {
	t.Helper()
	src, err := os.ReadFile(filepath.Join(dir, reviewLoop))
	if err != nil {
		t.Fatal(err)
	}
	return startPipeline(t, c, apitypes.PipelineRunRequest{File: reviewLoop, Source: string(src), Project: "loop", Base: base,
		Params: map[string]string{"goal": goal}})
}

// startPipeline starts a pipeline, which must be new.
func startPipeline(t *testing.T, c *client.Client, req apitypes.PipelineRunRequest) apitypes.PipelineView {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, started, err := c.RunPipeline(ctx, req)
	if err != nil || !started {
		t.Fatalf("run pipeline %s: started %v, %v", req.File, started, err)
	}
	return v
}

// waitPipeline polls a pipeline until cond holds.
func waitPipeline(t *testing.T, c *client.Client, id string, d time.Duration, cond func(apitypes.PipelineView) bool) apitypes.PipelineView {
	t.Helper()
	deadline := time.Now().Add(d)
	var last apitypes.PipelineView
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		v, err := c.Pipeline(ctx, id)
		cancel()
		if err == nil {
			last = v
			if cond(v) {
				return v
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("pipeline %s: condition not met within %s (err %v); last:\n%s\nevents:\n%s", id, d, err, pipelineJSON(last), pipelineLog(t, c, id))
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// pipelineJSON shows a pipeline in a failure message.
func pipelineJSON(v apitypes.PipelineView) string {
	b, _ := json.MarshalIndent(v, "", "  ")
	return string(b)
}

// pipelineLog is a pipeline's events, one a line.
func pipelineLog(t *testing.T, c *client.Client, id string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := c.PipelineEvents(ctx, id, 0)
	if err != nil {
		return err.Error()
	}
	var b strings.Builder
	for _, e := range l.Events {
		b.WriteString(e.Kind + " " + e.Step + ": " + e.Message + "\n")
	}
	return b.String()
}

// stepOf is step id of v.
func stepOf(t *testing.T, v apitypes.PipelineView, id string) apitypes.PipelineStepView {
	t.Helper()
	for _, s := range v.Steps {
		if s.ID == id {
			return s
		}
	}
	t.Fatalf("pipeline %s has no step %s:\n%s", v.ID, id, pipelineJSON(v))
	return apitypes.PipelineStepView{}
}

// allJobs is every job on the hub, by id.
func allJobs(t *testing.T, c *client.Client) map[string]apitypes.JobView {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := c.Jobs(ctx, client.JobFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]apitypes.JobView{}
	for _, j := range l.Jobs {
		out[j.ID] = j
	}
	return out
}

// verdictOf reads a run's verdict.
func verdictOf(t *testing.T, r apitypes.PipelineRunView) bool {
	t.Helper()
	var v struct {
		Approved *bool `json:"approved"`
	}
	if err := json.Unmarshal([]byte(r.Summary), &v); err != nil || v.Approved == nil {
		t.Fatalf("run %s delivered %q, not a verdict", r.Key, r.Summary)
	}
	return *v.Approved
}

// checkReviewLoopDone checks a finished run of the example: the review
// rejected round 1 and approved round 2, fix ran twice, the result holds
// the goal and the builder's answer to the review, and with no forge
// mapped nothing was published.
func checkReviewLoopDone(t *testing.T, h *testkit.Hub, dir string, v apitypes.PipelineView, goal string) {
	t.Helper()
	if v.State != "done" || v.Result == "" {
		t.Fatalf("pipeline ended %s (%s):\n%s", v.State, v.Reason, pipelineJSON(v))
	}
	review := stepOf(t, v, "review")
	if review.State != "done" || review.Rounds != 2 || len(review.Runs) != 2 || verdictOf(t, review.Runs[0]) || !verdictOf(t, review.Runs[1]) {
		t.Fatalf("review step: %+v", review)
	}
	if fix := stepOf(t, v, "fix"); len(fix.Runs) != 2 || fix.Runs[0].Round != 1 || fix.Runs[1].Round != 2 {
		t.Fatalf("fix step: %+v", fix)
	}
	pub := stepOf(t, v, "publish")
	if pub.State != "skipped" || !strings.Contains(pub.Reason, "nothing published") || pub.Publication == nil || pub.Publication.Commit != v.Result {
		t.Fatalf("publish step: %+v (publication %+v)", pub, pub.Publication)
	}
	merge := stepOf(t, v, "merge")
	if merge.Commit != v.Result || len(merge.Runs) != 1 || merge.Runs[0].Job == "" {
		t.Fatalf("merge step: %+v; result %s", merge, v.Result)
	}
	built := e2ekit.Fetched(t, h, dir, merge.Runs[0].Job, "built.txt")["built.txt"]
	lines := strings.Split(built, "\n")
	if len(lines) != 3 || lines[0] != goal || lines[1] != goal || !strings.HasPrefix(lines[2], "reviewed: answered ") ||
		!strings.Contains(lines[2], "does not say the work was reviewed") {
		t.Fatalf("built.txt of the result:\n%s", built)
	}
}

// The example review loop runs whole as ordinary sandboxed jobs: the
// adversary rejects, the builder answers the verdict it finds as context,
// the adversary approves, the work merges, and with no forge nothing is
// published. Run again, every step replays at no cost and no job runs.
func TestPipelineReviewLoopRunsEndToEnd(t *testing.T) {
	t.Parallel()
	h := testkit.StartHub(t, bin)
	h.StartRunner(t, "r1")
	c := h.Client()
	dir, base := pipelineCheckout(t, h)
	const goal = "a greeting for the end-to-end test"

	first := startReviewLoop(t, c, dir, base, goal)
	v := waitPipeline(t, c, first.ID, 5*time.Minute, e2ekit.Stopped)
	checkReviewLoopDone(t, h, dir, v, goal)

	before := allJobs(t, c)
	again := startReviewLoop(t, c, dir, base, goal)
	if again.ID == first.ID {
		t.Fatalf("the second run is the first pipeline %s", first.ID)
	}
	w := waitPipeline(t, c, again.ID, 2*time.Minute, e2ekit.Stopped)
	if w.State != "done" || w.Result != v.Result {
		t.Fatalf("second run ended %s (%s), result %s, want done at %s:\n%s", w.State, w.Reason, w.Result, v.Result, pipelineJSON(w))
	}
	for _, s := range w.Steps {
		if s.Kind != "exec" && s.Kind != "agent" {
			continue
		}
		for _, r := range s.Runs {
			if !r.Replayed || r.CostUSD != 0 {
				t.Errorf("second run's %s was not replayed: %+v", r.Key, r)
			}
		}
	}
	// The merge replays too, and the publication goes through the job
	// recorded for the same commit before: no job is new.
	for id, j := range allJobs(t, c) {
		if _, ok := before[id]; !ok {
			t.Errorf("the replayed pipeline made job %s (%s %v, %d attempts)", id, j.Agent, j.Args, len(j.Attempts))
		}
	}
}

// runningJob finds a run of v whose job runs now.
func runningJob(v apitypes.PipelineView) (apitypes.PipelineRunView, bool) {
	for _, s := range v.Steps {
		for _, r := range s.Runs {
			if r.Job != "" && r.JobState == "running" {
				return r, true
			}
		}
	}
	return apitypes.PipelineRunView{}, false
}

// The hub is SIGKILLed while the pipeline's first step's job waits in
// the queue; started again, it carries the pipeline on to done, and no
// step's job was submitted or run twice. (The job waits for a runner that
// comes only after the restart: a runner fetching a job's source from the
// hub when it dies fails that job, workspace_error, which is the runner's
// matter and not the pipeline's.)
func TestPipelineSurvivesHubKill(t *testing.T) {
	t.Parallel()
	h := testkit.StartHub(t, bin)
	c := h.Client()
	dir, base := pipelineCheckout(t, h)
	const goal = "work that outlives its hub"
	p := startReviewLoop(t, c, dir, base, goal)
	mid := waitPipeline(t, c, p.ID, 2*time.Minute, func(v apitypes.PipelineView) bool {
		s := stepOf(t, v, "build")
		return len(s.Runs) == 1 && s.Runs[0].Job != "" || e2ekit.Stopped(v)
	})
	if e2ekit.Stopped(mid) {
		t.Fatalf("the pipeline stopped before its first job:\n%s", pipelineJSON(mid))
	}
	first := stepOf(t, mid, "build").Runs[0].Job
	h.Kill()
	h.Restart()
	r := h.StartRunner(t, "r1")
	v := waitPipeline(t, c, p.ID, 5*time.Minute, e2ekit.Stopped)
	checkReviewLoopDone(t, h, dir, v, goal)

	// Each run has a job of its own that ran once; a publication goes
	// through a job that already exists; the hub holds no job but these.
	ran := map[string]string{}
	mine := map[string]bool{}
	for _, s := range v.Steps {
		for _, rv := range s.Runs {
			if rv.Job == "" {
				t.Errorf("run %s has no job: %+v", rv.Key, rv)
				continue
			}
			mine[rv.Job] = true
			if s.Kind != "exec" {
				continue
			}
			if other, dup := ran[rv.Job]; dup {
				t.Errorf("runs %s and %s share job %s", other, rv.Key, rv.Job)
			}
			ran[rv.Job] = rv.Key
			if rv.Attempts != 1 || rv.Tries != 1 || rv.Replayed {
				t.Errorf("run %s: %d attempts, %d tries, replayed %v", rv.Key, rv.Attempts, rv.Tries, rv.Replayed)
			}
		}
	}
	if len(ran) != 5 || ran[first] != "build#1" {
		t.Errorf("exec runs' jobs %v; the job queued at the kill was %s", ran, first)
	}
	for id, j := range allJobs(t, c) {
		if !mine[id] {
			t.Errorf("job %s (%s %v) belongs to no run of the pipeline", id, j.Agent, j.Args)
		}
	}
	for job, n := range e2ekit.ClaimsOf(r) {
		if n != 1 {
			t.Errorf("job %s (%s) claimed %d times", job, ran[job], n)
		}
	}
}

// slowPipeline is one exec step that runs until cancelled.
const slowPipeline = `name: slow
steps:
  - id: slow
    kind: exec
    command: [sh, -c, "echo started; sleep 600"]
`

// Cancelling a pipeline cancels the job of the step that runs.
func TestPipelineCancelStopsTheRunningStep(t *testing.T) {
	t.Parallel()
	h := testkit.StartHub(t, bin)
	h.StartRunner(t, "r1")
	c := h.Client()
	_, base := pipelineCheckout(t, h)
	p := startPipeline(t, c, apitypes.PipelineRunRequest{File: "slow.yaml", Source: slowPipeline, Project: "loop", Base: base})
	mid := waitPipeline(t, c, p.ID, 5*time.Minute, func(v apitypes.PipelineView) bool {
		_, ok := runningJob(v)
		return ok || e2ekit.Stopped(v)
	})
	run, ok := runningJob(mid)
	if !ok {
		t.Fatalf("the step's job was never seen running:\n%s", pipelineJSON(mid))
	}
	testkit.WaitJob(t, c, run.Job, time.Minute, func(v apitypes.JobView) bool {
		return v.State.Terminal() || len(v.Attempts) == 1 && v.Attempts[0].LogSize > 0
	})
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := c.CancelPipeline(ctx, p.ID); err != nil {
		t.Fatalf("cancel pipeline: %v", err)
	}
	j := testkit.WaitJob(t, c, run.Job, time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	if j.State != job.Cancelled {
		t.Fatalf("the step's job ended %s, want cancelled", j.State)
	}
	v := waitPipeline(t, c, p.ID, time.Minute, func(v apitypes.PipelineView) bool {
		return e2ekit.Stopped(v) && stepOf(t, v, "slow").Runs[0].JobState == string(job.Cancelled)
	})
	if s := stepOf(t, v, "slow"); v.State != "cancelled" || s.State != "cancelled" {
		t.Fatalf("pipeline %s, its step %s; want both cancelled:\n%s", v.State, s.State, pipelineJSON(v))
	}
}
