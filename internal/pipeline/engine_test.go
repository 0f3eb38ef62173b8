package pipeline_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/gitcmd"
	"drover/internal/hub/call"
	"drover/internal/job"
	"drover/internal/pipeline"
	"drover/internal/pipeline/spec"
	"drover/internal/store"
	"drover/internal/store/sqlite"
)

var alice = call.Caller{UserID: "u-alice", Name: "alice", Kind: store.TokenUser}

// fakeCore is the hub's core as pipelines see it: jobs that the test
// finishes by hand (complete, fail), in a real git repository.
type fakeCore struct {
	t   *testing.T
	dir string

	mu        sync.Mutex
	jobs      map[string]*apitypes.JobView
	byKey     map[string]string
	submitted []apitypes.SubmitRequest // every Submit that made a job
	published []string
	cancelled []string
	mapped    bool // the project maps to a forge
	instant   func(jobID string)
	n         int
	// doneReads counts the reads of each job after it completed.
	doneReads map[string]int
	// settled are the pipelines settled, each time; settleErr fails the
	// next settle.
	settled   []string
	settleErr error
}

func (f *fakeCore) Settle(_ context.Context, _ call.Caller, id, _ string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.settled = append(f.settled, id)
	err := f.settleErr
	f.settleErr = nil
	return err
}

func (f *fakeCore) Caller(context.Context, string) (call.Caller, error) { return alice, nil }
func (f *fakeCore) MaySee(_ context.Context, c call.Caller, _, requester string) (bool, error) {
	return c.Admin || c.UserID == requester, nil
}
func (f *fakeCore) Source(context.Context, call.Caller, string, string) (string, error) {
	return f.dir, nil
}
func (f *fakeCore) Repo(context.Context, call.Caller, string) (string, error) { return f.dir, nil }
func (f *fakeCore) Leading() bool                                             { return true }

func (f *fakeCore) Submit(_ context.Context, c call.Caller, req apitypes.SubmitRequest) (apitypes.JobView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id, ok := f.byKey[req.Key]; ok {
		return *f.jobs[id], nil
	}
	f.n++
	v := &apitypes.JobView{ID: fmt.Sprintf("j%d", f.n), State: job.Queued, Agent: req.Agent, Args: req.Args, Key: req.Key,
		Base: req.Repo.Base, Head: req.Repo.Base, Mode: req.Mode, Requester: c.Name}
	f.jobs[v.ID], f.byKey[req.Key] = v, v.ID
	f.submitted = append(f.submitted, req)
	if f.instant != nil {
		// A runner that was waiting: the job ends, and the hub says so,
		// before Submit returns.
		v.State = job.Completed
		f.instant(v.ID)
	}
	return *v, nil
}

func (f *fakeCore) Record(_ context.Context, c call.Caller, r pipeline.Recorded) (apitypes.JobView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id, ok := f.byKey[r.Key]; ok {
		return *f.jobs[id], nil
	}
	f.n++
	v := &apitypes.JobView{ID: fmt.Sprintf("j%d", f.n), State: job.Completed, Agent: r.Agent, Key: r.Key, Base: r.Base, Head: r.Head, Requester: c.Name}
	f.jobs[v.ID], f.byKey[r.Key] = v, v.ID
	return *v, nil
}

func (f *fakeCore) Job(_ context.Context, id string) (apitypes.JobView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	v, ok := f.jobs[id]
	if !ok {
		return apitypes.JobView{}, call.NotFound("no job %q", id)
	}
	if v.State == job.Completed {
		f.doneReads[id]++
	}
	return *v, nil
}

func (f *fakeCore) Cancel(_ context.Context, _ call.Caller, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v := f.jobs[id]; v != nil && !v.State.Terminal() {
		v.State = job.Cancelled
		f.cancelled = append(f.cancelled, id)
	}
	return nil
}

func (f *fakeCore) Retry(_ context.Context, _ call.Caller, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.jobs[id].State = job.Queued
	return nil
}

func (f *fakeCore) Publish(_ context.Context, _ call.Caller, id string) (apitypes.PublicationView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	// As the hub's publishing: a job that made no commit has nothing to
	// publish, mapped or not.
	if v := f.jobs[id]; v.Head == "" || v.Head == v.Base {
		return apitypes.PublicationView{}, call.Conflict("job %s made no commit: nothing to publish", id)
	}
	if !f.mapped {
		return apitypes.PublicationView{}, call.Errf(409, "not_mapped", "project app maps to no forge")
	}
	f.published = append(f.published, id)
	return apitypes.PublicationView{Job: id, State: "done", Commit: f.jobs[id].Head, Mode: "pr", Branch: "drover/" + id}, nil
}

// finish ends job id as the runner would: completed at head with summary,
// or in state.
func (f *fakeCore) finish(id string, state job.State, head, summary string) {
	f.mu.Lock()
	v := f.jobs[id]
	v.State, v.Summary = state, summary
	if head != "" {
		v.Head = head
	}
	v.Attempts = append(v.Attempts, apitypes.AttemptView{Number: int64(len(v.Attempts) + 1)})
	f.mu.Unlock()
}

// active are the jobs queued or running, by id.
func (f *fakeCore) active() []apitypes.JobView {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []apitypes.JobView
	for i := 1; i <= f.n; i++ {
		if v := f.jobs[fmt.Sprintf("j%d", i)]; v != nil && !v.State.Terminal() {
			out = append(out, *v)
		}
	}
	return out
}

func (f *fakeCore) submissions() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.submitted)
}

// rig is an engine over a fake core, a real store and a real repository.
type rig struct {
	t    *testing.T
	core *fakeCore
	st   store.Store
	e    *pipeline.Engine
	base string
	stop context.CancelFunc
	// sweep is the engine's; the engine's restart takes a new value.
	sweep time.Duration
}

func newRig(t *testing.T) *rig {
	t.Helper()
	dir := t.TempDir()
	git(t, dir, "init", "-q", "-b", "main")
	os.WriteFile(filepath.Join(dir, "README"), []byte("hello\n"), 0o600)
	git(t, dir, "add", "README")
	git(t, dir, "commit", "-q", "-m", "base")
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "hub.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Write(t.Context(), func(tx store.Tx) error {
		return tx.InsertUser(store.User{ID: alice.UserID, Name: alice.Name, CreatedAt: time.Now()})
	}); err != nil {
		t.Fatal(err)
	}
	r := &rig{t: t, st: st, base: git(t, dir, "rev-parse", "HEAD"), sweep: 20 * time.Millisecond,
		core: &fakeCore{t: t, dir: dir, jobs: map[string]*apitypes.JobView{}, byKey: map[string]string{}, doneReads: map[string]int{}}}
	r.restart()
	return r
}

// restart stops the engine and starts another over the same store, as a
// restarted hub does.
func (r *rig) restart() {
	if r.stop != nil {
		r.stop()
		r.e.Wait()
	}
	ctx, cancel := context.WithCancel(context.Background())
	r.stop = cancel
	r.e = pipeline.New(ctx, r.core, pipeline.Config{Store: r.st, Git: gitcmd.Git{}, Sweep: r.sweep})
	r.t.Cleanup(func() { cancel(); r.e.Wait() })
}

func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.com", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.com")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// commit makes a commit on parent that writes content to file.
func (r *rig) commit(parent, file, content string) string {
	dir := r.core.dir
	git(r.t, dir, "checkout", "-q", "--detach", parent)
	if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, file)), 0o700); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, file), []byte(content), 0o600); err != nil {
		r.t.Fatal(err)
	}
	git(r.t, dir, "add", file)
	git(r.t, dir, "commit", "-q", "-m", "write "+file)
	return git(r.t, dir, "rev-parse", "HEAD")
}

func (r *rig) run(src string, params map[string]string) apitypes.PipelineView {
	r.t.Helper()
	v, _, err := r.e.RunPipeline(r.t.Context(), alice, apitypes.PipelineRunRequest{File: "p.yaml", Source: src, Project: "app", Base: r.base, Params: params})
	if err != nil {
		r.t.Fatal(err)
	}
	return v
}

// waitJob waits for a queued job whose key names run key, and returns it.
func (r *rig) waitJob(pipelineID, key string) apitypes.JobView {
	r.t.Helper()
	var found apitypes.JobView
	r.waitFor("a job for "+key, func() bool {
		for _, v := range r.core.active() {
			if strings.HasPrefix(v.Key, pipeline.KeyPrefix+pipelineID+":"+key+":") {
				found = v
				return true
			}
		}
		return false
	})
	return found
}

func (r *rig) waitFor(what string, cond func() bool) {
	r.t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			r.t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (r *rig) waitState(id string, want string) apitypes.PipelineView {
	r.t.Helper()
	var v apitypes.PipelineView
	r.waitFor("pipeline "+want, func() bool {
		var err error
		v, err = r.e.ShowPipeline(r.t.Context(), alice, id)
		if err != nil {
			r.t.Fatal(err)
		}
		return v.State == want
	})
	return v
}

func (r *rig) done(v apitypes.JobView, head, summary string) {
	r.core.finish(v.ID, job.Completed, head, summary)
	r.e.JobChanged(v.ID)
}

const reviewLoop = `name: review
params:
  - name: goal
    default: greet
steps:
  - id: build
    kind: exec
    command: [sh, build.sh, "{{params.goal}}"]
  - id: fix
    kind: exec
    depends_on: [build]
    command: [sh, fix.sh]
  - id: review
    kind: exec
    depends_on: [fix]
    command: [sh, review.sh]
    loop:
      until: verdict.approved
      max_rounds: 3
      repeat: [fix]
  - id: merge
    kind: integrate
    depends_on: [review]
    steps: [build, fix]
  - id: publish
    kind: publish
    depends_on: [merge]
`

const (
	reject  = `{"approved": false, "findings": [{"text": "no tests"}]}`
	reject2 = `{"approved": false, "findings": [{"text": "no docs"}]}`
	approve = `{"approved": true, "findings": []}`
)

func TestReviewLoopConvergesThenReplays(t *testing.T) {
	r := newRig(t)
	r.core.mapped = true
	p := r.run(reviewLoop, nil)

	build := r.waitJob(p.ID, "build#1")
	if build.Base != r.base || build.Args[2] != "greet" {
		t.Fatalf("build job %+v: want base %s and the goal param", build, r.base)
	}
	c1 := r.commit(r.base, "built.txt", "greet\n")
	r.done(build, c1, "")
	fix := r.waitJob(p.ID, "fix#1")
	if fix.Base != c1 {
		t.Fatalf("fix starts at %s, want build's commit %s", fix.Base, c1)
	}
	c2 := r.commit(c1, "built.txt", "greet\nfix 1\n")
	r.done(fix, c2, "")
	rev := r.waitJob(p.ID, "review#1")
	if rev.Base != c2 {
		t.Fatalf("review starts at %s, want %s", rev.Base, c2)
	}
	r.done(rev, c2, reject)
	fix2 := r.waitJob(p.ID, "fix#2")
	if fix2.Base != c2 {
		t.Fatalf("fix round 2 starts at %s, want its own last commit %s", fix2.Base, c2)
	}
	r.core.mu.Lock()
	last := r.core.submitted[len(r.core.submitted)-1]
	r.core.mu.Unlock()
	if len(last.Context) != 1 || string(last.Context[0].Data) != reject {
		t.Fatalf("fix round 2 context %+v: want the verdict as feedback.json", last.Context)
	}
	c3 := r.commit(c2, "built.txt", "greet\nfix 2\n")
	r.done(fix2, c3, "")
	rev2 := r.waitJob(p.ID, "review#2")
	if rev2.Base != c3 {
		t.Fatalf("review round 2 starts at %s, want %s", rev2.Base, c3)
	}
	r.done(rev2, c3, approve)
	v := r.waitState(p.ID, "done")
	if v.Result != c3 {
		t.Fatalf("result %s, want %s (build and fix merge as a fast-forward)", v.Result, c3)
	}
	if n := r.core.submissions(); n != 5 {
		t.Fatalf("%d jobs submitted, want 5 (build, fix x2, review x2)", n)
	}
	if len(r.core.published) != 1 {
		t.Fatalf("published %v, want one publication", r.core.published)
	}
	var review apitypes.PipelineStepView
	for _, s := range v.Steps {
		if s.ID == "review" {
			review = s
		}
	}
	if review.Rounds != 2 || review.MaxRounds != 3 || review.State != "done" || len(review.Runs) != 2 {
		t.Fatalf("review step %+v: want 2 of 3 rounds, done", review)
	}

	// The same pipeline again: every step replays, no job runs or is made.
	r.core.mu.Lock()
	jobs := r.core.n
	r.core.mu.Unlock()
	p2 := r.run(reviewLoop, nil)
	v2 := r.waitState(p2.ID, "done")
	if n := r.core.submissions(); n != 5 {
		t.Fatalf("%d jobs submitted after the rerun, want still 5", n)
	}
	r.core.mu.Lock()
	made := r.core.n - jobs
	r.core.mu.Unlock()
	if made != 0 {
		t.Fatalf("the rerun made %d jobs (merge or result records), want none", made)
	}
	if v2.Result != c3 {
		t.Fatalf("rerun result %s, want %s", v2.Result, c3)
	}
	for _, s := range v2.Steps {
		for _, run := range s.Runs {
			if s.Kind != "publish" && !run.Replayed {
				t.Fatalf("rerun's %s was not replayed", run.Key)
			}
		}
	}

	// A changed param changes build's inputs: it and what follows run again.
	p3 := r.run(reviewLoop, map[string]string{"goal": "wave"})
	b3 := r.waitJob(p3.ID, "build#1")
	if b3.Args[2] != "wave" {
		t.Fatalf("build args %v", b3.Args)
	}
}

func TestLoopStopsForAPerson(t *testing.T) {
	for _, tc := range []struct {
		name    string
		max     int
		second  string // review's verdict in round 2
		change  bool   // fix round 2 makes a commit
		wantWhy string
	}{
		{"max rounds", 1, "", true, "not approved in 1 rounds"},
		{"repeated finding", 3, reject, true, "repeats a finding of round 1"},
		{"no change", 3, "", false, "changed nothing"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := newRig(t)
			src := strings.Replace(reviewLoop, "max_rounds: 3", fmt.Sprintf("max_rounds: %d", tc.max), 1)
			p := r.run(src, nil)
			c1 := r.commit(r.base, "a", "1")
			r.done(r.waitJob(p.ID, "build#1"), c1, "")
			r.done(r.waitJob(p.ID, "fix#1"), c1, "")
			r.done(r.waitJob(p.ID, "review#1"), c1, reject)
			if tc.max > 1 {
				head := c1
				if tc.change {
					head = r.commit(c1, "a", "2")
				}
				r.done(r.waitJob(p.ID, "fix#2"), head, "")
				if tc.change {
					r.done(r.waitJob(p.ID, "review#2"), head, tc.second)
				}
			}
			v := r.waitState(p.ID, "needs_human")
			if !strings.Contains(v.Reason, tc.wantWhy) || !strings.Contains(v.Reason, "step review") {
				t.Fatalf("reason %q, want %q", v.Reason, tc.wantWhy)
			}
			if len(r.core.published) != 0 {
				t.Fatal("a loop that stopped published")
			}
		})
	}
}

func TestLoopSilenceIsNotApproval(t *testing.T) {
	r := newRig(t)
	p := r.run(reviewLoop, nil)
	r.done(r.waitJob(p.ID, "build#1"), r.base, "")
	r.done(r.waitJob(p.ID, "fix#1"), r.base, "")
	r.done(r.waitJob(p.ID, "review#1"), r.base, "looks fine to me")
	v := r.waitState(p.ID, "failed")
	if !strings.Contains(v.Reason, "no verdict") {
		t.Fatalf("reason %q", v.Reason)
	}
}

func TestBadFilesQueueNothing(t *testing.T) {
	r := newRig(t)
	for _, tc := range []struct{ name, src, want string }{
		{"cycle", "name: c\nsteps:\n  - id: a\n    kind: exec\n    command: [x]\n    depends_on: [b]\n  - id: b\n    kind: exec\n    command: [x]\n    depends_on: [a]\n", "cycle"},
		{"no max_rounds", "name: c\nsteps:\n  - id: a\n    kind: exec\n    command: [x]\n    loop:\n      until: verdict.approved\n", "p.yaml:"},
		{"unknown variable", "name: c\nsteps:\n  - id: a\n    kind: exec\n    command: [\"{{params.nope}}\"]\n", "nope"},
		{"touches outside", "name: c\nsteps:\n  - id: a\n    kind: exec\n    command: [x]\n    for_each:\n      items: [\"..\"]\n      max_parallel: 1\n      touches: [\"{{item}}/x\"]\n", "climbs out"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, _, err := r.e.RunPipeline(t.Context(), alice, apitypes.PipelineRunRequest{File: "p.yaml", Source: tc.src, Project: "app", Base: r.base})
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("err %v, want %q", err, tc.want)
			}
		})
	}
	l, err := r.e.ListPipelines(t.Context(), alice, 0)
	if err != nil || len(l.Pipelines) != 0 || r.core.submissions() != 0 {
		t.Fatalf("after refusals: %d pipelines, %d jobs (%v)", len(l.Pipelines), r.core.submissions(), err)
	}
}

const fanOut = `name: fan
steps:
  - id: items
    kind: exec
    command: [sh, each.sh, "{{item}}"]
    for_each:
      items: [a, b, c, d, e, a/x]
      max_parallel: 3
      touches: ["src/{{item}}/**"]
  - id: merge
    kind: integrate
    depends_on: [items]
    steps: [items]
`

func TestFanOutKeepsOverlapsApartAndNamesAConflict(t *testing.T) {
	r := newRig(t)
	p := r.run(fanOut, nil)
	heads := map[string]string{}
	for finished := 0; finished < 6; {
		var act []apitypes.JobView
		r.waitFor("items running", func() bool { act = r.core.active(); return len(act) > 0 })
		if len(act) > 3 {
			t.Fatalf("%d items at once, max_parallel 3", len(act))
		}
		items := map[string]bool{}
		for _, v := range act {
			items[v.Args[2]] = true
		}
		if items["a"] && items["a/x"] {
			t.Fatal("items a and a/x, whose touches overlap, ran at once")
		}
		v := act[0]
		item := v.Args[2]
		file := "src/" + item + "/f"
		content := item
		if item == "b" || item == "d" { // a conflict planted: both write one file
			file, content = "shared.txt", item
		}
		heads[item] = r.commit(r.base, file, content)
		r.done(v, heads[item], "")
		finished++
	}
	v := r.waitState(p.ID, "needs_human")
	if !strings.Contains(v.Reason, "shared.txt") || !strings.Contains(v.Reason, "items item 3 (d)") {
		t.Fatalf("reason %q: want the item and the file named", v.Reason)
	}
}

func TestCancelStopsRunningSteps(t *testing.T) {
	r := newRig(t)
	p := r.run(fanOut, nil)
	r.waitFor("three items", func() bool { return len(r.core.active()) == 3 })
	v, err := r.e.CancelPipeline(t.Context(), alice, p.ID)
	if err != nil || v.State != "cancelled" {
		t.Fatalf("cancel: %v %+v", err, v.State)
	}
	if len(r.core.active()) != 0 || len(r.core.cancelled) != 3 {
		t.Fatalf("after cancel: %d active, cancelled %v", len(r.core.active()), r.core.cancelled)
	}
	if st := v.Steps[0]; st.State != "cancelled" {
		t.Fatalf("the fan-out step is %s after the cancel, want cancelled", st.State)
	}
	bob := call.Caller{UserID: "u-bob", Name: "bob"}
	if _, err := r.e.ShowPipeline(t.Context(), bob, p.ID); err == nil || !strings.Contains(err.Error(), "no pipeline") {
		t.Fatalf("bob sees alice's pipeline: %v", err)
	}
}

func TestUnknownWaitsForAPersonAndRestartCarriesOn(t *testing.T) {
	r := newRig(t)
	r.core.mapped = true
	p := r.run(reviewLoop, nil)
	b := r.waitJob(p.ID, "build#1")
	r.core.finish(b.ID, job.Unknown, "", "")
	r.e.JobChanged(b.ID)
	v := r.waitState(p.ID, "needs_human")
	if !strings.Contains(v.Reason, "ended unknown") {
		t.Fatalf("reason %q", v.Reason)
	}
	if n := r.core.submissions(); n != 1 {
		t.Fatalf("%d jobs: an unknown step must never be re-run by itself", n)
	}
	if _, err := r.e.RetryPipeline(t.Context(), alice, p.ID, apitypes.PipelineRetryRequest{Step: "build"}); err != nil {
		t.Fatal(err)
	}
	r.restart() // a hub that restarts carries on from the records
	c1 := r.commit(r.base, "a", "1")
	r.done(b, c1, "")
	r.done(r.waitJob(p.ID, "fix#1"), c1, "")
	r.done(r.waitJob(p.ID, "review#1"), c1, approve)
	r.waitState(p.ID, "done")
	if n := r.core.submissions(); n != 3 {
		t.Fatalf("%d jobs, want 3: a retried job is the same job", n)
	}
}

func TestStagedPublishesNothing(t *testing.T) {
	r := newRig(t)
	r.core.mapped = true
	v, _, err := r.e.RunPipeline(t.Context(), alice, apitypes.PipelineRunRequest{File: "p.yaml", Source: reviewLoop, Project: "app", Base: r.base, Staged: true})
	if err != nil {
		t.Fatal(err)
	}
	c1 := r.commit(r.base, "a", "1")
	r.done(r.waitJob(v.ID, "build#1"), c1, "")
	r.done(r.waitJob(v.ID, "fix#1"), c1, "")
	r.done(r.waitJob(v.ID, "review#1"), c1, approve)
	got := r.waitState(v.ID, "done")
	if len(r.core.published) != 0 {
		t.Fatal("a staged pipeline published")
	}
	last := got.Steps[len(got.Steps)-1]
	if last.Publication == nil || !last.Publication.Staged || last.Publication.Commit != c1 {
		t.Fatalf("publish step %+v: want what it would have published", last)
	}
}

const gated = `name: gated
steps:
  - id: build
    kind: exec
    command: [sh, build.sh]
  - id: ok
    kind: gate
    depends_on: [build]
    prompt: Publish {{steps.build.commit}}?
  - id: publish
    kind: publish
    depends_on: [ok]
`

func TestGateAsksThroughQuestions(t *testing.T) {
	for _, tc := range []struct {
		verdict, want string
	}{{approve, "done"}, {`{"approved": false, "findings": [{"text": "rejected at the gate"}]}`, "failed"}} {
		r := newRig(t)
		p := r.run(gated, nil)
		c1 := r.commit(r.base, "a", "1")
		r.done(r.waitJob(p.ID, "build#1"), c1, "")
		g := r.waitJob(p.ID, "ok#1")
		if g.Agent != "exec" || g.Mode != "observe" || len(g.Args) != 5 || g.Args[4] != "Publish "+c1+"?" {
			t.Fatalf("gate job %+v: want an observing exec job asking the question", g)
		}
		r.done(g, c1, tc.verdict)
		v := r.waitState(p.ID, tc.want)
		if tc.want == "failed" && !strings.Contains(v.Reason, "gate was not approved") {
			t.Fatalf("reason %q", v.Reason)
		}
	}
}

func TestStepPastItsMaxWallIsCancelled(t *testing.T) {
	r := newRig(t)
	p := r.run("name: slow\nsteps:\n  - id: a\n    kind: exec\n    command: [sleep, \"100\"]\n    limits:\n      max_wall: 1ms\n", nil)
	v := r.waitState(p.ID, "needs_human")
	if !strings.Contains(v.Reason, "max_wall") || len(r.core.cancelled) != 1 {
		t.Fatalf("reason %q, cancelled %v", v.Reason, r.core.cancelled)
	}
	_, _, err := r.e.RunPipeline(t.Context(), alice, apitypes.PipelineRunRequest{File: "p.yaml", Project: "app", Base: r.base,
		Source: "name: c\nsteps:\n  - id: a\n    kind: exec\n    command: [x]\n    limits:\n      max_cost: 2\n"})
	if err == nil || !strings.Contains(err.Error(), "not enforced per step") {
		t.Fatalf("a step's max_cost: %v", err)
	}
}

func TestChangedInputRerunsOnlyWhatFollows(t *testing.T) {
	r := newRig(t)
	src := "name: two\nparams:\n  - name: x\n    default: one\nsteps:\n  - id: a\n    kind: exec\n    command: [sh, a.sh]\n  - id: b\n    kind: exec\n    depends_on: [a]\n    command: [sh, b.sh, \"{{params.x}}\"]\n"
	p := r.run(src, nil)
	c1 := r.commit(r.base, "a", "1")
	r.done(r.waitJob(p.ID, "a#1"), c1, "")
	r.done(r.waitJob(p.ID, "b#1"), r.commit(c1, "b", "1"), "")
	r.waitState(p.ID, "done")

	p2 := r.run(src, map[string]string{"x": "two"})
	b2 := r.waitJob(p2.ID, "b#1")
	if b2.Base != c1 || b2.Args[2] != "two" {
		t.Fatalf("b reran at %s with %v: want a's recorded commit %s and the new param", b2.Base, b2.Args, c1)
	}
	if n := r.core.submissions(); n != 3 {
		t.Fatalf("%d jobs, want 3: a replays, only b runs again", n)
	}
	// The pass records its runs after it submitted b's job.
	r.waitFor("a's run replayed", func() bool {
		v, err := r.e.ShowPipeline(t.Context(), alice, p2.ID)
		return err == nil && len(v.Steps[0].Runs) == 1 && v.Steps[0].Runs[0].Replayed
	})
}

func TestFanOutFromAnEarlierStep(t *testing.T) {
	r := newRig(t)
	src := "name: from\nsteps:\n  - id: plan\n    kind: exec\n    command: [sh, plan.sh]\n  - id: do\n    kind: exec\n    depends_on: [plan]\n    command: [sh, do.sh, \"{{item}}\"]\n    for_each:\n      from: plan\n      max_parallel: 5\n"
	p := r.run(src, nil)
	r.done(r.waitJob(p.ID, "plan#1"), r.base, `{"items": ["x", "y"]}`)
	r.waitFor("two items", func() bool { return len(r.core.active()) == 2 })
	for _, v := range r.core.active() {
		r.done(v, r.commit(r.base, v.Args[2], v.Args[2]), "")
	}
	r.waitState(p.ID, "done")

	bad := newRig(t)
	p = bad.run(src, nil)
	bad.done(bad.waitJob(p.ID, "plan#1"), bad.base, `{"things": 1}`)
	v := bad.waitState(p.ID, "failed")
	if !strings.Contains(v.Reason, "no list of items") {
		t.Fatalf("reason %q", v.Reason)
	}
}

func TestDivergingInputsAreRefused(t *testing.T) {
	r := newRig(t)
	src := "name: div\nsteps:\n  - id: a\n    kind: exec\n    command: [x]\n  - id: b\n    kind: exec\n    command: [x]\n  - id: c\n    kind: exec\n    depends_on: [a, b]\n    command: [x]\n"
	p := r.run(src, nil)
	ja, jb := r.waitJob(p.ID, "a#1"), r.waitJob(p.ID, "b#1")
	r.done(ja, r.commit(r.base, "a", "1"), "")
	r.done(jb, r.commit(r.base, "b", "1"), "")
	v := r.waitState(p.ID, "failed")
	if !strings.Contains(v.Reason, "diverging commits") {
		t.Fatalf("reason %q", v.Reason)
	}
}

func TestRetryAfterAFailureStartsWhatTheFailureStopped(t *testing.T) {
	r := newRig(t)
	p := r.run(fanOut, nil)
	var act []apitypes.JobView
	r.waitFor("three items", func() bool { act = r.core.active(); return len(act) == 3 })
	r.core.finish(act[0].ID, job.Failed, "", "")
	r.e.JobChanged(act[0].ID)
	if v := r.waitState(p.ID, "failed"); !strings.Contains(v.Reason, "job "+act[0].ID+" failed") {
		t.Fatalf("reason %q", v.Reason)
	}
	r.waitFor("the other items stopped and recorded so", func() bool {
		v, err := r.e.ShowPipeline(t.Context(), alice, p.ID)
		if err != nil || len(r.core.active()) != 0 {
			return false
		}
		for _, run := range v.Steps[0].Runs {
			if run.State == "running" {
				return false
			}
		}
		return true
	})
	if _, err := r.e.RetryPipeline(t.Context(), alice, p.ID, apitypes.PipelineRetryRequest{Step: "items"}); err != nil {
		t.Fatal(err)
	}
	r.waitFor("the three items again", func() bool { return len(r.core.active()) == 3 })
	for i := 0; i < 6; i++ {
		var a []apitypes.JobView
		r.waitFor("an item", func() bool { a = r.core.active(); return len(a) > 0 })
		r.done(a[0], r.commit(r.base, "src/"+a[0].Args[2]+"/f", "x"), "")
	}
	r.waitState(p.ID, "done")
	if n := r.core.submissions(); n != 6 {
		t.Fatalf("%d jobs, want 6: the retried and stopped items run again as the same jobs", n)
	}
}

// A pass reads the job of no step that is done: a completed job changes no
// more, and reading every one again made each pass of a fan-out grow with
// its items (issue 27's benchmark).
func TestPassesReadNoDoneStepsJob(t *testing.T) {
	r := newRig(t)
	p := r.run(`name: chain
steps:
  - id: a
    kind: exec
    command: [sh, a.sh]
  - id: b
    kind: exec
    depends_on: [a]
    command: [sh, b.sh]
  - id: c
    kind: exec
    depends_on: [b]
    command: [sh, c.sh]
`, nil)
	for _, key := range []string{"a#1", "b#1", "c#1"} {
		r.done(r.waitJob(p.ID, key), "", "")
	}
	// Waited for in the store: the pipeline's view reads its jobs too.
	r.waitFor("pipeline done", func() bool {
		var st store.PipelineState
		err := r.st.Read(t.Context(), func(tx store.Tx) error {
			got, err := tx.Pipeline(p.ID)
			st = got.State
			return err
		})
		return err == nil && st == store.PipelineDone
	})
	r.core.mu.Lock()
	defer r.core.mu.Unlock()
	for id, n := range r.core.doneReads {
		if n > 1 {
			t.Errorf("job %s read %d times once completed, want once", id, n)
		}
	}
}

// checked is checks that make no commit after a step that made one.
const checked = `name: checked
params:
  - name: n
steps:
  - id: make
    kind: exec
    command: [sh, make.sh, "{{params.n}}"]
  - id: lint
    kind: exec
    depends_on: [make]
    command: [sh, lint.sh, "{{params.n}}"]
  - id: test
    kind: exec
    depends_on: [lint]
    command: [sh, test.sh, "{{params.n}}"]
  - id: publish
    kind: publish
    depends_on: [test]
`

// The publish step publishes through the job that made the commit, never
// through a later one that left it as it found it (which has nothing to
// publish). Many pipelines, as the runs are looked at in no set order.
func TestPublishGoesThroughTheJobThatMadeTheCommit(t *testing.T) {
	r := newRig(t)
	r.core.mapped = true
	for n := range 16 {
		p := r.run(checked, map[string]string{"n": fmt.Sprint(n)})
		mk := r.waitJob(p.ID, "make#1")
		c := r.commit(r.base, "made.txt", fmt.Sprint(n))
		r.done(mk, c, "")
		r.done(r.waitJob(p.ID, "lint#1"), "", "")
		r.done(r.waitJob(p.ID, "test#1"), "", "")
		r.waitFor("pipeline "+p.ID+" to stop", func() bool {
			v, err := r.e.ShowPipeline(t.Context(), alice, p.ID)
			return err == nil && v.State != "running"
		})
		v, err := r.e.ShowPipeline(t.Context(), alice, p.ID)
		if err != nil || v.State != "done" || v.Steps[3].Publication == nil || v.Steps[3].Publication.Job != mk.ID {
			t.Fatalf("pipeline %d: %v %s (%s), publish step %+v; want done, published through %s", n, err, v.State, v.Reason, v.Steps[3], mk.ID)
		}
	}
}

// A job that ends before the engine watches it (the hub's word of it comes
// while Submit has not returned) still moves its pipeline on at once, not
// at the next sweep.
func TestAJobThatEndsBeforeItIsWatchedIsSeen(t *testing.T) {
	r := newRig(t)
	r.sweep = time.Hour
	r.restart()
	r.core.instant = r.e.JobChanged
	p := r.run("name: chain\nsteps:\n  - id: a\n    kind: exec\n    command: [x]\n  - id: b\n    kind: exec\n    depends_on: [a]\n    command: [x]\n", nil)
	r.waitState(p.ID, "done")
}

// A pipeline replayed whole moves on by itself: its replayed runs have no
// job to wake it, and a loop's rounds replay one after another in one pass,
// not one per sweep.
func TestReplayNeedsNoSweep(t *testing.T) {
	r := newRig(t)
	r.sweep = time.Hour
	r.restart()
	r.core.mapped = true
	p := r.run(reviewLoop, nil)
	c1 := r.commit(r.base, "a", "1")
	r.done(r.waitJob(p.ID, "build#1"), c1, "")
	r.done(r.waitJob(p.ID, "fix#1"), c1, "")
	r.done(r.waitJob(p.ID, "review#1"), c1, reject)
	c2 := r.commit(c1, "a", "2")
	r.done(r.waitJob(p.ID, "fix#2"), c2, "")
	r.done(r.waitJob(p.ID, "review#2"), c2, approve)
	r.waitState(p.ID, "done")
	p2 := r.run(reviewLoop, nil)
	if v := r.waitState(p2.ID, "done"); v.Result != c2 {
		t.Fatalf("replayed result %s, want %s", v.Result, c2)
	}
}

const siblings = `name: siblings
steps:
  - id: a1
    kind: exec
    command: [sh, try.sh]
    optional: true
    fresh: true
  - id: a2
    kind: exec
    command: [sh, try.sh, again]
    optional: true
    fresh: true
  - id: v1
    kind: exec
    depends_on: [a1]
    command: [sh, verify.sh]
    optional: true
  - id: v2
    kind: exec
    depends_on: [a2]
    command: [sh, verify.sh]
    optional: true
`

// An optional step's failure (here an unknown end, which would otherwise
// wait for a person) fails no sibling: the pipeline ends done, the steps
// after it skipped; and a fresh step runs its own job every time,
// never replaying an earlier run's.
func TestOptionalFailureSkipsOnlyWhatFollowsAndFreshNeverReplays(t *testing.T) {
	r := newRig(t)
	v := r.run(siblings, nil)
	a1, a2 := r.waitJob(v.ID, "a1#1"), r.waitJob(v.ID, "a2#1")
	r.core.finish(a1.ID, job.Unknown, "", "")
	r.e.JobChanged(a1.ID)
	r.done(a2, r.commit(r.base, "a.txt", "two\n"), "")
	r.done(r.waitJob(v.ID, "v2#1"), "", "")
	got := r.waitState(v.ID, "done")
	states := map[string]string{}
	for _, s := range got.Steps {
		states[s.ID] = s.State
	}
	want := map[string]string{"a1": "unknown", "a2": "done", "v1": "skipped", "v2": "done"}
	for id, w := range want {
		if states[id] != w {
			t.Errorf("step %s is %q, want %q (all: %v)", id, states[id], w, states)
		}
	}
	if len(r.core.cancelled) != 0 {
		t.Errorf("a sibling's failure cancelled %v", r.core.cancelled)
	}
	// The same file again: the fresh steps run new jobs; v2's verify of
	// the same commit is not fresh, but a2 makes a new job, so nothing
	// replays before it ends.
	before := r.core.submissions()
	w := r.run(siblings, nil)
	r.waitJob(w.ID, "a1#1")
	r.waitJob(w.ID, "a2#1")
	if n := r.core.submissions() - before; n != 2 {
		t.Errorf("the second run submitted %d jobs, want 2 (fresh steps never replay)", n)
	}
}

const judged = `name: judged
steps:
  - id: a1
    kind: exec
    command: [sh, try.sh]
    optional: true
  - id: a2
    kind: exec
    command: [sh, try.sh, again]
    optional: true
  - id: judge
    kind: exec
    command: [sh, judge.sh, "{{steps.a1.commit}}"]
    reads: [a1, a2]
    optional: true
`

// request is the request of the job submitted with key.
func (f *fakeCore) request(key string) apitypes.SubmitRequest {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, req := range f.submitted {
		if req.Key == key {
			return req
		}
	}
	f.t.Fatalf("no job submitted with key %s", key)
	return apitypes.SubmitRequest{}
}

// A step that reads others starts once they all ended, however they
// ended, at the base, and its job is given how each ended and the diff of
// each one's change; it replays only when every one of them ended the
// same. The pipeline is settled before it ends, again after an error.
func TestReadsGetsEveryOutcomeAndReplaysOnlyTheSame(t *testing.T) {
	r := newRig(t)
	r.core.settleErr = fmt.Errorf("not now")
	v := r.run(judged, nil)
	c1 := r.commit(r.base, "a.txt", "one\n")
	r.done(r.waitJob(v.ID, "a1#1"), c1, "")
	a2 := r.waitJob(v.ID, "a2#1")
	r.core.finish(a2.ID, job.Failed, "", "")
	r.e.JobChanged(a2.ID)
	j := r.waitJob(v.ID, "judge#1")
	req := r.core.request(j.Key)
	if req.Repo.Base != r.base || len(req.Args) != 3 || req.Args[2] != c1 {
		t.Fatalf("the judge's job %+v, want it at the base with a1's commit", req)
	}
	files := map[string]string{}
	for _, f := range req.Context {
		files[f.Name] = string(f.Data)
	}
	var outcomes []spec.ReadOutcome
	if err := json.Unmarshal([]byte(files[spec.ReadsFile]), &outcomes); err != nil {
		t.Fatalf("%s: %v (files %v)", spec.ReadsFile, err, files)
	}
	want := []spec.ReadOutcome{{Step: "a1", State: "done", Commit: c1, Diff: "a1.diff"}, {Step: "a2", State: "failed"}}
	if fmt.Sprint(outcomes) != fmt.Sprint(want) || len(files) != 2 || !strings.Contains(files["a1.diff"], "+one") {
		t.Fatalf("the judge was given %v, %v; want %v and a1's diff", outcomes, files, want)
	}
	r.done(j, "", `{"ranking": []}`)
	r.waitState(v.ID, "done")
	if n := len(r.core.settled); n != 2 {
		t.Errorf("settled %d times, want 2 (once refused, then again)", n)
	}

	// Again: a1 replays, a2 runs again and now succeeds, so the judge
	// reads something new and runs again.
	before := r.core.submissions()
	w := r.run(judged, nil)
	c2 := r.commit(r.base, "a.txt", "two\n")
	r.done(r.waitJob(w.ID, "a2#1"), c2, "")
	r.done(r.waitJob(w.ID, "judge#1"), "", `{"ranking": []}`)
	r.waitState(w.ID, "done")
	if n := r.core.submissions() - before; n != 2 {
		t.Errorf("the second run submitted %d jobs, want 2 (a2 and the judge)", n)
	}
	// And again: nothing changed, everything replays.
	before = r.core.submissions()
	x := r.run(judged, nil)
	got := r.waitState(x.ID, "done")
	if n := r.core.submissions() - before; n != 0 {
		t.Errorf("the third run submitted %d jobs, want none (all replayed)", n)
	}
	for _, s := range got.Steps {
		if len(s.Runs) != 1 || !s.Runs[0].Replayed {
			t.Errorf("step %s: %+v, want replayed", s.ID, s.Runs)
		}
	}
}
