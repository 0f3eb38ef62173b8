package eval

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/store"
	"drover/internal/store/sqlite"
)

var (
	alice = call.Caller{UserID: "u-1", Name: "alice"}
	bob   = call.Caller{UserID: "u-2", Name: "bob"}
)

const (
	goodBase    = "1111111111111111111111111111111111111111"
	missingBase = "2222222222222222222222222222222222222222"
)

// fakeJobsCore is the hub's core as evaluations see it: jobs the test
// ends by hand, found again by key as the hub finds them; a base other
// than goodBase is refused as the hub refuses one the project lacks.
type fakeJobsCore struct {
	Core
	mu    sync.Mutex
	jobs  map[string]*apitypes.JobView
	reqs  map[string]apitypes.SubmitRequest
	byKey map[string]string
	subs  map[string]int // jobs written (or found) by key
	reads atomic.Int64   // jobs read
}

func (f *fakeJobsCore) Caller(context.Context, string) (call.Caller, error) { return alice, nil }
func (f *fakeJobsCore) Leading() bool                                       { return true }
func (f *fakeJobsCore) Source(_ context.Context, _ call.Caller, project, base string) (string, error) {
	if base != goodBase {
		return "", call.BadRequest("base %s is not a commit of project %s", base, project)
	}
	return "", nil
}

func (f *fakeJobsCore) Prepare(_ context.Context, _ call.Caller, req apitypes.SubmitRequest) (Submission, error) {
	return fakeSubmission{f, req}, nil
}

// fakeSubmission queues its job in the fake's memory when the write that
// records its item runs.
type fakeSubmission struct {
	f   *fakeJobsCore
	req apitypes.SubmitRequest
}

func (s fakeSubmission) Insert(store.Tx) (string, bool, error) {
	f, req := s.f, s.req
	f.mu.Lock()
	defer f.mu.Unlock()
	f.subs[req.Key]++
	if id, ok := f.byKey[req.Key]; ok {
		return id, false, nil
	}
	v := &apitypes.JobView{ID: fmt.Sprintf("j-%d", len(f.jobs)+1), State: job.Queued, Key: req.Key}
	f.jobs[v.ID], f.reqs[v.ID], f.byKey[req.Key] = v, req, v.ID
	return v.ID, true, nil
}

func (s fakeSubmission) Submitted(context.Context) {}

func (f *fakeJobsCore) Job(_ context.Context, id string) (apitypes.JobView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return *f.jobs[id], nil
}

func (f *fakeJobsCore) Jobs(_ context.Context, ids []string) ([]apitypes.JobView, error) {
	f.reads.Add(int64(len(ids)))
	f.mu.Lock()
	defer f.mu.Unlock()
	vs := make([]apitypes.JobView, len(ids))
	for i, id := range ids {
		if v, ok := f.jobs[id]; ok {
			vs[i] = *v
		}
	}
	return vs, nil
}

// end ends the job of key as state with exit code.
func (f *fakeJobsCore) end(key string, state job.State, code int) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := f.jobs[f.byKey[key]]
	v.State, v.ExitCode, v.Reason = state, &code, job.ReasonExited
	v.Attempts = []apitypes.AttemptView{{Usage: &protocol.Usage{CostUSD: 0.5, InputTokens: 10}}}
	return v.ID
}

func (f *fakeJobsCore) has(key string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.byKey[key]
	return ok
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// newStore is a hub's store with alice in it.
func newStore(t *testing.T) store.Store {
	t.Helper()
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
	return st
}

func newFakeJobsCore() *fakeJobsCore {
	return &fakeJobsCore{jobs: map[string]*apitypes.JobView{}, reqs: map[string]apitypes.SubmitRequest{}, byKey: map[string]string{}, subs: map[string]int{}}
}

func inst(id, base string) *apitypes.EvalInstance {
	return &apitypes.EvalInstance{InstanceID: id, Repo: "web", BaseCommit: base, ProblemStatement: "fix " + id, TestCmd: "make test"}
}

// set moves the job of key to state, as a usage window parks it or a
// question makes it wait.
func (f *fakeJobsCore) set(key string, state job.State) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	v := f.jobs[f.byKey[key]]
	v.State = state
	return v.ID
}

// An evaluation refuses the instances the hub refuses, runs one sample at
// a time under max_parallel 1, grades each in a job of its own (exec, no
// network, observe), and a restarted engine submits nothing twice.
func TestEvalRunsEachSampleOnceAndGradesItApart(t *testing.T) {
	st := newStore(t)
	core := &fakeJobsCore{jobs: map[string]*apitypes.JobView{}, reqs: map[string]apitypes.SubmitRequest{}, byKey: map[string]string{}, subs: map[string]int{}}
	ctx, stop := context.WithCancel(t.Context())
	e := New(ctx, core, Config{Lazy: time.Millisecond, Store: st, Sweep: 10 * time.Millisecond})
	req := apitypes.EvalRunRequest{Key: "k", Agent: "claude", MaxParallel: 1, Lines: []apitypes.EvalLine{
		{Line: 1, Instance: inst("a", goodBase)}, {Line: 2, Instance: inst("b", goodBase)}, {Line: 3, Instance: inst("c", missingBase)},
	}}
	v, started, err := e.StartEval(t.Context(), alice, req)
	if err != nil || !started {
		t.Fatalf("start: %v %v", started, err)
	}
	if again, started, err := e.StartEval(t.Context(), alice, req); err != nil || started || again.ID != v.ID {
		t.Fatalf("start again: %s %v %v, want %s not started", again.ID, started, err, v.ID)
	}
	if _, err := e.ShowEval(t.Context(), bob, v.ID); !errors.As(err, new(*call.Refusal)) {
		t.Fatalf("bob sees alice's evaluation: %v", err)
	}
	if v.Counts["refused"] != 1 || v.Items[2].Reason != "base "+missingBase+" is not a commit of project web" {
		t.Fatalf("refused: %+v", v.Items)
	}

	key := func(id, what string) string { return "eval:" + v.ID + ":" + id + "#1#1:" + what }
	waitFor(t, "a's agent job", func() bool { return core.has(key("a", "agent")) })
	if core.has(key("b", "agent")) {
		t.Fatal("b started beside a under max_parallel 1")
	}
	e.JobChanged(core.end(key("a", "agent"), job.Completed, 0))
	waitFor(t, "a's grading job", func() bool { return core.has(key("a", "grade")) })
	g := core.reqs[core.byKey[key("a", "grade")]]
	if g.Agent != "exec" || g.Mode != protocol.ModeObserve || len(g.Network) != 1 || g.Network[0] != "none" || g.Repo.Base != goodBase {
		t.Fatalf("grading job: %+v", g)
	}

	// A restarted engine carries on and submits nothing anew.
	stop()
	e.Wait()
	e = New(t.Context(), core, Config{Lazy: time.Millisecond, Store: st, Sweep: 10 * time.Millisecond})
	e.JobChanged(core.end(key("a", "grade"), job.Completed, 0))
	waitFor(t, "b's agent job", func() bool { return core.has(key("b", "agent")) })
	e.JobChanged(core.end(key("b", "agent"), job.Completed, 0))
	waitFor(t, "b's grading job", func() bool { return core.has(key("b", "grade")) })
	e.JobChanged(core.end(key("b", "grade"), job.Failed, 1))
	waitFor(t, "the evaluation's end", func() bool {
		v, err := e.ShowEval(t.Context(), alice, v.ID)
		return err == nil && v.State == "done"
	})
	r, err := e.EvalReport(t.Context(), alice, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.Resolved != 1 || r.Total != 2 || r.Refused != 1 || r.CostUSD != 1 || r.Tokens != 20 {
		t.Fatalf("report: %d/%d resolved, %d refused, $%v, %d tokens", r.Resolved, r.Total, r.Refused, r.CostUSD, r.Tokens)
	}
	if r.Eval.Items[1].Reason != "tests failed (exit 1)" {
		t.Errorf("b's reason: %q", r.Eval.Items[1].Reason)
	}
	core.mu.Lock()
	defer core.mu.Unlock()
	if len(core.jobs) != 4 {
		t.Errorf("%d jobs, want 4: %v", len(core.jobs), core.byKey)
	}
}

// A sample whose agent job waits (parked on a usage window, or on a
// question) waits with it, never counted as failed; once the agents spent
// max_cost, the samples not started are skipped, not counted.
func TestEvalWaitsWithParkedJobsAndSkipsPastMaxCost(t *testing.T) {
	core := newFakeJobsCore()
	e := New(t.Context(), core, Config{Lazy: time.Millisecond, Store: newStore(t), Sweep: 10 * time.Millisecond})
	v, _, err := e.StartEval(t.Context(), alice, apitypes.EvalRunRequest{Agent: "claude", MaxParallel: 2, MaxCostUSD: 0.4,
		Lines: []apitypes.EvalLine{{Line: 1, Instance: inst("a", goodBase)}, {Line: 2, Instance: inst("b", goodBase)}, {Line: 3, Instance: inst("c", goodBase)}}})
	if err != nil {
		t.Fatal(err)
	}
	key := func(id, what string) string { return "eval:" + v.ID + ":" + id + "#1#1:" + what }
	waitFor(t, "a's and b's agent jobs", func() bool { return core.has(key("a", "agent")) && core.has(key("b", "agent")) })
	e.JobChanged(core.set(key("a", "agent"), job.Waiting))
	e.JobChanged(core.end(key("b", "agent"), job.Completed, 0))
	waitFor(t, "b's grading job", func() bool { return core.has(key("b", "grade")) })
	e.JobChanged(core.end(key("b", "grade"), job.Completed, 0))
	show := func() apitypes.EvalView {
		v, err := e.ShowEval(t.Context(), alice, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	waitFor(t, "b resolved and c skipped", func() bool {
		c := show().Counts
		return c["resolved"] == 1 && c["skipped"] == 1
	})
	if got := show(); got.Items[0].State != "agent" || got.State != "running" {
		t.Fatalf("a's job waits: a is %s, the evaluation %s", got.Items[0].State, got.State)
	}
	if core.has(key("c", "agent")) {
		t.Fatal("c started past max_cost")
	}
	e.JobChanged(core.set(key("a", "agent"), job.Queued)) // parked again
	e.JobChanged(core.end(key("a", "agent"), job.Failed, 2))
	waitFor(t, "the evaluation's end", func() bool { return show().State == "done" })
	r, err := e.EvalReport(t.Context(), alice, v.ID)
	if err != nil {
		t.Fatal(err)
	}
	if r.Resolved != 1 || r.Total != 2 || r.Skipped != 1 || !strings.Contains(r.Eval.Items[2].Reason, "max cost of $0.40") ||
		r.Eval.Items[0].State != "unresolved" || !strings.HasPrefix(r.Eval.Items[0].Reason, "the agent's job failed") {
		t.Fatalf("report: %d/%d, %d skipped; items %+v", r.Resolved, r.Total, r.Skipped, r.Eval.Items)
	}
}

// The list holds the evaluations the caller may see (scope: a user's own,
// every one for an admin), newest first within the limit, each with the
// same counts as its own view; another user's reads as not found.
func TestListEvalsKeepsToWhatTheCallerMaySee(t *testing.T) {
	st := newStore(t)
	if err := st.Write(t.Context(), func(tx store.Tx) error {
		return tx.InsertUser(store.User{ID: bob.UserID, Name: bob.Name, CreatedAt: time.Now()})
	}); err != nil {
		t.Fatal(err)
	}
	var clock atomic.Int64 // seconds: each evaluation is newer than the last
	e := New(t.Context(), newFakeJobsCore(), Config{Lazy: time.Millisecond, Store: st, Sweep: time.Hour, Now: func() time.Time {
		return time.Unix(1000+clock.Add(1), 0)
	}})
	start := func(c call.Caller, lines ...apitypes.EvalLine) string {
		v, _, err := e.StartEval(t.Context(), c, apitypes.EvalRunRequest{Agent: "claude", MaxParallel: 1, Lines: lines})
		if err != nil {
			t.Fatal(err)
		}
		return v.ID
	}
	older := start(alice, apitypes.EvalLine{Line: 1, Instance: inst("a", goodBase)}, apitypes.EvalLine{Line: 2, Instance: inst("b", missingBase)})
	bobs := start(bob, apitypes.EvalLine{Line: 1, Instance: inst("a", goodBase)})
	newer := start(alice, apitypes.EvalLine{Line: 1, Instance: inst("c", goodBase)})
	admin := call.Caller{UserID: "u-9", Name: "root", Admin: true}
	ids := func(c call.Caller, limit int) []string {
		l, err := e.ListEvals(t.Context(), c, limit)
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, v := range l.Evals {
			out = append(out, v.ID)
		}
		return out
	}
	for _, tc := range []struct {
		who   call.Caller
		limit int
		want  []string
	}{
		{alice, 0, []string{newer, older}},
		{alice, 1, []string{newer}},
		{bob, 0, []string{bobs}},
		{admin, 0, []string{newer, bobs, older}},
		{admin, 2, []string{newer, bobs}},
	} {
		if got := ids(tc.who, tc.limit); fmt.Sprint(got) != fmt.Sprint(tc.want) {
			t.Errorf("%s's list (limit %d) = %v, want %v", tc.who.Name, tc.limit, got, tc.want)
		}
	}
	if _, err := e.EvalReport(t.Context(), bob, older); !errors.As(err, new(*call.Refusal)) {
		t.Errorf("bob reads alice's report: %v", err)
	}
	var full apitypes.EvalView
	waitFor(t, "a's agent job (the item stays there)", func() bool {
		var err error
		full, err = e.ShowEval(t.Context(), alice, older)
		return err == nil && full.Counts["agent"] == 1
	})
	l, err := e.ListEvals(t.Context(), alice, 0)
	if err != nil {
		t.Fatal(err)
	}
	got := l.Evals[1]
	full.Items = nil
	if fmt.Sprint(got) != fmt.Sprint(full) || got.Total != 2 || got.Done != 1 || got.Counts["refused"] != 1 {
		t.Errorf("listed %+v, shown %+v", got, full)
	}
}

// An evaluation's agent named AGENT:ACCOUNT (as --agent native:ACCOUNT
// says) submits each agent job as that agent pinned to that account; an
// agent the hub does not know, or one that takes no prompt, is refused
// before anything starts.
func TestEvalAgentWithAnAccountPinsIt(t *testing.T) {
	core := newFakeJobsCore()
	e := New(t.Context(), core, Config{Lazy: time.Millisecond, Store: newStore(t), Sweep: 10 * time.Millisecond})
	for _, agent := range []string{"nosuch", "nosuch:acct", "native:bad\x1b", "shell"} {
		if _, _, err := e.StartEval(t.Context(), alice, apitypes.EvalRunRequest{Agent: agent,
			Lines: []apitypes.EvalLine{{Line: 1, Instance: inst("a", goodBase)}}}); !errors.As(err, new(*call.Refusal)) {
			t.Errorf("agent %q: %v, want refused", agent, err)
		}
	}
	v, _, err := e.StartEval(t.Context(), alice, apitypes.EvalRunRequest{Agent: "native:oai", Model: "qwen-fake",
		Lines: []apitypes.EvalLine{{Line: 1, Instance: inst("a", goodBase)}}})
	if err != nil {
		t.Fatal(err)
	}
	key := "eval:" + v.ID + ":a#1#1:agent"
	waitFor(t, "a's agent job", func() bool { return core.has(key) })
	core.mu.Lock()
	req := core.reqs[core.byKey[key]]
	core.mu.Unlock()
	if req.Agent != "native" || req.Account != "oai" || req.Model != "qwen-fake" {
		t.Fatalf("agent job: agent %q account %q model %q; want native, oai, qwen-fake", req.Agent, req.Account, req.Model)
	}
	if v.Name != "native:oai/qwen-fake" {
		t.Errorf("model_name_or_path %q", v.Name)
	}
}

// barrierCore holds each Prepare until want of them are in flight (or a
// while has passed), and records the most in flight at once.
type barrierCore struct {
	*fakeJobsCore
	want     int
	mu       sync.Mutex
	in, most int
	all      chan struct{} // closed once want are in flight
}

func (b *barrierCore) Prepare(ctx context.Context, c call.Caller, req apitypes.SubmitRequest) (Submission, error) {
	b.mu.Lock()
	b.in++
	b.most = max(b.most, b.in)
	all := b.all
	if b.in == b.want {
		close(all)
	}
	b.mu.Unlock()
	select {
	case <-all:
	case <-time.After(3 * time.Second):
	}
	defer func() { b.mu.Lock(); b.in--; b.mu.Unlock() }()
	return b.fakeJobsCore.Prepare(ctx, c, req)
}

// The samples max_parallel lets start are submitted at once, not one
// after another: a submission waits on the store and a git process, and
// one at a time an evaluation went at the pace of one job at a time
// (BenchmarkEvalOverhead); so are the grading jobs of samples whose
// agents ended together.
func TestEvalSubmitsTheSamplesItStartsAtOnce(t *testing.T) {
	core := &barrierCore{fakeJobsCore: newFakeJobsCore(), want: 3, all: make(chan struct{})}
	e := New(t.Context(), core, Config{Lazy: time.Millisecond, Store: newStore(t), Sweep: time.Hour})
	v, _, err := e.StartEval(t.Context(), alice, apitypes.EvalRunRequest{Agent: "claude", MaxParallel: 3,
		Lines: []apitypes.EvalLine{{Line: 1, Instance: inst("a", goodBase)}, {Line: 2, Instance: inst("b", goodBase)}, {Line: 3, Instance: inst("c", goodBase)}}})
	if err != nil {
		t.Fatal(err)
	}
	key := func(id, what string) string { return "eval:" + v.ID + ":" + id + "#1#1:" + what }
	waitFor(t, "three agent jobs", func() bool {
		return core.has(key("a", "agent")) && core.has(key("b", "agent")) && core.has(key("c", "agent"))
	})
	core.mu.Lock()
	most := core.most
	core.most, core.all = 0, make(chan struct{})
	core.mu.Unlock()
	if most != 3 {
		t.Fatalf("at most %d agent jobs submitted at once, want 3", most)
	}
	for _, id := range []string{"a", "b", "c"} {
		e.JobChanged(core.end(key(id, "agent"), job.Completed, 0))
	}
	waitFor(t, "three grading jobs", func() bool {
		return core.has(key("a", "grade")) && core.has(key("b", "grade")) && core.has(key("c", "grade"))
	})
	core.mu.Lock()
	defer core.mu.Unlock()
	if core.most != 3 {
		t.Fatalf("at most %d grading jobs submitted at once, want 3", core.most)
	}
}

func (f *fakeJobsCore) byKeyID(key string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.byKey[key]
}

// itemCounts is evaluation id's items by state.
func itemCounts(t *testing.T, e *Evals, id string) map[string]int {
	v, err := e.ShowEval(t.Context(), alice, id)
	if err != nil {
		t.Fatal(err)
	}
	return v.Counts
}

// countingStore counts its write transactions.
type countingStore struct {
	store.Store
	writes atomic.Int64
}

func (s *countingStore) Write(ctx context.Context, fn func(store.Tx) error) error {
	s.writes.Add(1)
	return s.Store.Write(ctx, fn)
}

// A pass that starts three samples, or grades three, records them in one
// write transaction, not one each: each of SQLite's commits waits on the
// disk, and one a sample made an evaluation slower than the same jobs
// plain (BenchmarkEvalOverhead).
func TestEvalRecordsAPassInOneWrite(t *testing.T) {
	core := newFakeJobsCore()
	st := &countingStore{Store: newStore(t)}
	e := New(t.Context(), core, Config{Lazy: time.Millisecond, Store: st, Sweep: time.Hour})
	// The evaluation's start is one write; its first pass may record the
	// three samples before StartEval returns.
	started := st.writes.Load()
	v, _, err := e.StartEval(t.Context(), alice, apitypes.EvalRunRequest{Agent: "claude", MaxParallel: 3,
		Lines: []apitypes.EvalLine{{Line: 1, Instance: inst("a", goodBase)}, {Line: 2, Instance: inst("b", goodBase)}, {Line: 3, Instance: inst("c", goodBase)}}})
	if err != nil {
		t.Fatal(err)
	}
	counts := func() map[string]int { return itemCounts(t, e, v.ID) }
	waitFor(t, "three samples at their agents", func() bool { return counts()["agent"] == 3 })
	if n := st.writes.Load() - started; n != 2 {
		t.Fatalf("%d writes to start the evaluation and three samples, want 2", n)
	}
	key := func(id, what string) string { return "eval:" + v.ID + ":" + id + "#1#1:" + what }
	for _, id := range []string{"a", "b", "c"} {
		core.end(key(id, "agent"), job.Completed, 0)
	}
	at := st.writes.Load()
	e.mu.Lock()
	e.full[v.ID] = true // one pass reads the three ended jobs, as the sweep's does
	e.mu.Unlock()
	e.JobChanged(core.byKeyID(key("a", "agent")))
	waitFor(t, "three samples grading", func() bool { return counts()["grading"] == 3 })
	if n := st.writes.Load() - at; n != 1 {
		t.Fatalf("%d writes to grade three samples, want 1", n)
	}
}

// A pass that sees a sample graded and starts the next one records both in
// one write: it recorded the ended samples, then submitted the next ones
// and recorded them in a second write, each commit waiting on the disk
// while the evaluation's next pass waited on it (BenchmarkEvalOverhead).
func TestEvalPassEndsAndStartsInOneWrite(t *testing.T) {
	core := newFakeJobsCore()
	st := &countingStore{Store: newStore(t)}
	e := New(t.Context(), core, Config{Lazy: time.Millisecond, Store: st, Sweep: time.Hour})
	v, _, err := e.StartEval(t.Context(), alice, apitypes.EvalRunRequest{Agent: "claude", MaxParallel: 1,
		Lines: []apitypes.EvalLine{{Line: 1, Instance: inst("a", goodBase)}, {Line: 2, Instance: inst("b", goodBase)}}})
	if err != nil {
		t.Fatal(err)
	}
	key := func(id, what string) string { return "eval:" + v.ID + ":" + id + "#1#1:" + what }
	waitFor(t, "a's agent job", func() bool { return core.has(key("a", "agent")) })
	e.JobChanged(core.end(key("a", "agent"), job.Completed, 0))
	waitFor(t, "a's grading job", func() bool { return core.has(key("a", "grade")) })
	counts := func() map[string]int { return itemCounts(t, e, v.ID) }
	waitFor(t, "a grading", func() bool { return counts()["grading"] == 1 })
	at := st.writes.Load()
	e.JobChanged(core.end(key("a", "grade"), job.Completed, 0))
	waitFor(t, "a resolved and b at its agent", func() bool { c := counts(); return c["resolved"] == 1 && c["agent"] == 1 })
	if n := st.writes.Load() - at; n != 1 {
		t.Fatalf("%d writes to record a's grade and b's start, want 1", n)
	}
}

// readCountingStore records the most items one read of an evaluation's
// items returned.
type readCountingStore struct {
	store.Store
	most atomic.Int64
}

type readCountingTx struct {
	store.Tx
	s *readCountingStore
}

func (s *readCountingStore) Read(ctx context.Context, fn func(store.Tx) error) error {
	return s.Store.Read(ctx, func(tx store.Tx) error { return fn(readCountingTx{tx, s}) })
}

func (s *readCountingStore) note(n int) {
	for m := s.most.Load(); int64(n) > m && !s.most.CompareAndSwap(m, int64(n)); m = s.most.Load() {
	}
}

func (tx readCountingTx) EvalItems(id string) ([]store.EvalItem, error) {
	items, err := tx.Tx.EvalItems(id)
	tx.s.note(len(items))
	return items, err
}

func (tx readCountingTx) EvalOpenItems(id string, queued int) ([]store.EvalItem, error) {
	items, err := tx.Tx.EvalOpenItems(id, queued)
	tx.s.note(len(items))
	return items, err
}

// A pass reads the items it may move (at their agent or grading, and as
// many queued as may start), not the whole dataset: it runs at every
// change of the evaluation's jobs, and reading every item (patches too)
// made an evaluation of 500 slower than the same jobs plain.
func TestEvalPassReadsOnlyItsOpenItems(t *testing.T) {
	core := newFakeJobsCore()
	st := &readCountingStore{Store: newStore(t)}
	e := New(t.Context(), core, Config{Lazy: time.Millisecond, Store: st, Sweep: time.Hour})
	var lines []apitypes.EvalLine
	ids := []string{"a", "b", "c", "d", "e", "f", "g", "h", "i", "j"}
	for i, id := range ids {
		lines = append(lines, apitypes.EvalLine{Line: i + 1, Instance: inst(id, goodBase)})
	}
	v, _, err := e.StartEval(t.Context(), alice, apitypes.EvalRunRequest{Agent: "claude", MaxParallel: 1, Lines: lines})
	if err != nil {
		t.Fatal(err)
	}
	key := func(id, what string) string { return "eval:" + v.ID + ":" + id + "#1#1:" + what }
	for _, id := range ids[:8] {
		waitFor(t, id+"'s agent job", func() bool { return core.has(key(id, "agent")) })
		e.JobChanged(core.end(key(id, "agent"), job.Completed, 0))
		waitFor(t, id+"'s grading job", func() bool { return core.has(key(id, "grade")) })
		e.JobChanged(core.end(key(id, "grade"), job.Completed, 0))
	}
	waitFor(t, "i's agent job", func() bool { return core.has(key("i", "agent")) })
	st.most.Store(0)
	e.JobChanged(core.end(key("i", "agent"), job.Completed, 0))
	waitFor(t, "i's grading job", func() bool { return core.has(key("i", "grade")) })
	e.JobChanged(core.end(key("i", "grade"), job.Completed, 0))
	waitFor(t, "j's agent job", func() bool { return core.has(key("j", "agent")) })
	if n := st.most.Load(); n > 2 {
		t.Fatalf("a pass read %d items with 8 done, 1 running and 1 queued; want at most 2", n)
	}
}

func (f *fakeJobsCore) Cancel(_ context.Context, _ call.Caller, id string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if v := f.jobs[id]; !v.State.Terminal() {
		v.State = job.Cancelled
	}
	return nil
}

// Cancelling an evaluation cancels the jobs of its running samples and
// skips every sample not over; the graded ones keep their grade. A pass
// that was under way when it was cancelled may still start a sample: the
// pass after it stops that one too.
func TestCancelEvalStopsWhatIsNotOver(t *testing.T) {
	core := newFakeJobsCore()
	e := New(t.Context(), core, Config{Lazy: time.Millisecond, Store: newStore(t), Sweep: time.Hour})
	v, _, err := e.StartEval(t.Context(), alice, apitypes.EvalRunRequest{Agent: "claude", MaxParallel: 1,
		Lines: []apitypes.EvalLine{{Line: 1, Instance: inst("a", goodBase)}, {Line: 2, Instance: inst("b", goodBase)}, {Line: 3, Instance: inst("c", goodBase)}}})
	if err != nil {
		t.Fatal(err)
	}
	key := func(id, what string) string { return "eval:" + v.ID + ":" + id + "#1#1:" + what }
	show := func() apitypes.EvalView {
		v, err := e.ShowEval(t.Context(), alice, v.ID)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	waitFor(t, "a's agent job", func() bool { return core.has(key("a", "agent")) })
	e.JobChanged(core.end(key("a", "agent"), job.Completed, 0))
	waitFor(t, "a's grading job", func() bool { return core.has(key("a", "grade")) })
	e.JobChanged(core.end(key("a", "grade"), job.Completed, 0))
	waitFor(t, "a resolved and b at its agent", func() bool {
		c := show().Counts
		return c["resolved"] == 1 && c["agent"] == 1
	})
	if _, err := e.CancelEval(t.Context(), alice, v.ID); err != nil {
		t.Fatal(err)
	}
	waitFor(t, "b and c skipped", func() bool {
		c := show().Counts
		return c["resolved"] == 1 && c["skipped"] == 2
	})
	if got := show(); got.State != "cancelled" {
		t.Fatalf("the evaluation is %s, want cancelled", got.State)
	}
	for _, id := range []string{"b", "c"} {
		if !core.has(key(id, "agent")) {
			continue
		}
		if j, _ := core.Job(t.Context(), core.byKeyID(key(id, "agent"))); j.State != job.Cancelled {
			t.Errorf("%s's agent job is %s, want cancelled", id, j.State)
		}
	}
}

// An instance's image reaches both its agent job and its grading job; a
// line whose image is bad is refused with the reason and the run goes on.
func TestEvalInstanceImageRunsBothJobs(t *testing.T) {
	core := newFakeJobsCore()
	e := New(t.Context(), core, Config{Lazy: time.Millisecond, Store: newStore(t), Sweep: 10 * time.Millisecond})
	good, bad := inst("a", goodBase), inst("b", goodBase)
	good.Image, bad.Image = "swebench/sweb.eval.x86_64.a-1", "--privileged"
	v, _, err := e.StartEval(t.Context(), alice, apitypes.EvalRunRequest{Agent: "claude",
		Lines: []apitypes.EvalLine{{Line: 1, Instance: good}, {Line: 2, Instance: bad}}})
	if err != nil {
		t.Fatal(err)
	}
	if v.Counts["refused"] != 1 || !strings.Contains(v.Items[1].Reason, `image "--privileged"`) {
		t.Fatalf("items: %+v", v.Items)
	}
	key := func(what string) string { return "eval:" + v.ID + ":a#1#1:" + what }
	waitFor(t, "a's agent job", func() bool { return core.has(key("agent")) })
	e.JobChanged(core.end(key("agent"), job.Completed, 0))
	waitFor(t, "a's grading job", func() bool { return core.has(key("grade")) })
	core.mu.Lock()
	defer core.mu.Unlock()
	if a, g := core.reqs[core.byKey[key("agent")]], core.reqs[core.byKey[key("grade")]]; a.Image != good.Image || g.Image != good.Image {
		t.Fatalf("agent job image %q, grading job image %q; want %q for both", a.Image, g.Image, good.Image)
	}
	if len(core.jobs) != 2 {
		t.Fatalf("%d jobs, want a's two: %v", len(core.jobs), core.byKey)
	}
}

// A pass reads the job of a running sample only when it changed since a
// pass last read it (or on the sweep's full pass): with 3 samples
// running, the end of one costs one read of a job, not three. A job a
// pass submits is watched from its write on, not read by a pass after it
// (that pass made every job end that came meanwhile wait for it).
func TestEvalPassReadsOnlyTheJobsThatChanged(t *testing.T) {
	core := newFakeJobsCore()
	e := New(t.Context(), core, Config{Lazy: time.Millisecond, Store: newStore(t), Sweep: time.Hour})
	v, _, err := e.StartEval(t.Context(), alice, apitypes.EvalRunRequest{Agent: "claude", MaxParallel: 3,
		Lines: []apitypes.EvalLine{{Line: 1, Instance: inst("a", goodBase)}, {Line: 2, Instance: inst("b", goodBase)}, {Line: 3, Instance: inst("c", goodBase)}}})
	if err != nil {
		t.Fatal(err)
	}
	key := func(id, what string) string { return "eval:" + v.ID + ":" + id + "#1#1:" + what }
	counts := func() map[string]int { return itemCounts(t, e, v.ID) }
	waitFor(t, "three samples at their agents", func() bool { return counts()["agent"] == 3 })
	// Passes run one at a time: once the pass a change wakes read its
	// job, any pass the submissions woke has run too.
	e.JobChanged(core.byKeyID(key("a", "agent"))) // nothing ended
	waitFor(t, "a pass", func() bool { return core.reads.Load() >= 1 })
	if n := core.reads.Load(); n != 1 {
		t.Fatalf("%d reads of jobs after three were submitted and one changed, want 1", n)
	}
	e.JobChanged(core.end(key("b", "agent"), job.Completed, 0))
	waitFor(t, "b grading", func() bool { return counts()["grading"] == 1 })
	e.JobChanged(core.byKeyID(key("a", "agent"))) // settle: nothing ended
	waitFor(t, "a pass", func() bool { return core.reads.Load() >= 3 })
	if n := core.reads.Load(); n != 3 {
		t.Fatalf("%d reads of jobs, want a's twice and b's once (3): b's grading job needs none until it changes", n)
	}
}
