package hub

import (
	"context"
	"database/sql"
	"fmt"
	"maps"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/protocol"
	"drover/internal/store"
)

// Issue 29's benchmark (docs/benchmarks.md): an evaluation of trivial
// instances against the same work as plain jobs, in the same run, on the
// fleet of runners_bench_test.go (an offer is accepted at once and
// finished with exit 0, no result: each agent leaves the base as it was,
// so grading needs no git). Nothing asserts a time. Each side's
// timeline is logged (evals_timeline_bench_test.go): where its wall time
// went, job by job.

// evalBenchInstances is DROVER_BENCH_INSTANCES, 500 by default.
func evalBenchInstances(b *testing.B) int {
	v := os.Getenv("DROVER_BENCH_INSTANCES")
	if v == "" {
		return 500
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		b.Fatalf("DROVER_BENCH_INSTANCES=%q: want a positive count", v)
	}
	return n
}

// evalOverhead is what BenchmarkEvalOverhead measured, summed over its
// iterations.
type evalOverhead struct {
	instances                             int
	evalWall, plainWall, started          time.Duration
	evalEvents, plainEvents, heap, itemBs int64
	// What each side cost the store, load or not: its commits (writes)
	// and reads, and the evaluation's passes.
	eval, plain storeCount
}

// storeCounts counts a hub's transactions: its writes (each a commit),
// its reads, and its evaluations' passes (a pass reads the open items
// once); and the writes' time: from Write to its return (queued, run,
// committed), and in their fns, which hold the single writer. by is the
// writes' count and time in their fns by the function that wrote
// (offer, accept, finish, submit): where the writer's time went.
type storeCounts struct {
	writes, reads, passes, writeNs, fnNs atomic.Int64
	mu                                   sync.Mutex
	by                                   map[string]*[2]int64
}

// logWrites logs the writes by function since the last call, for side.
func (c *storeCounts) logWrites(t testing.TB, side string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, k := range slices.Sorted(maps.Keys(c.by)) {
		if v := c.by[k]; v[0] >= 100 {
			t.Logf("%s: %d writes by %s, %v each in its fn", side, v[0], k, time.Duration(v[1]/v[0]))
		}
	}
	c.by = nil
}

// storeCount is storeCounts at a moment, or between two (cpuNs: the
// process's CPU time).
type storeCount struct{ writes, reads, passes, writeNs, fnNs, cpuNs int64 }

// now is c at this moment, and the process's CPU time so far (user and
// system): each side's, as the sides run one after the other.
func (c *storeCounts) now() storeCount {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return storeCount{c.writes.Load(), c.reads.Load(), c.passes.Load(), c.writeNs.Load(), c.fnNs.Load(),
		ru.Utime.Nano() + ru.Stime.Nano()}
}

func (c storeCount) add(from, to storeCount) storeCount {
	return storeCount{c.writes + to.writes - from.writes, c.reads + to.reads - from.reads, c.passes + to.passes - from.passes,
		c.writeNs + to.writeNs - from.writeNs, c.fnNs + to.fnNs - from.fnNs, c.cpuNs + to.cpuNs - from.cpuNs}
}

type countingStore struct {
	store.Store
	c *storeCounts
}

func (s countingStore) Read(ctx context.Context, fn func(store.Tx) error) error {
	s.c.reads.Add(1)
	return s.Store.Read(ctx, func(tx store.Tx) error { return fn(countingTx{tx, s.c}) })
}

func (s countingStore) Write(ctx context.Context, fn func(store.Tx) error) error {
	s.c.writes.Add(1)
	at := time.Now()
	var pcs [1]uintptr
	runtime.Callers(3, pcs[:]) // Write's caller's caller: the function that writes
	name := strings.TrimPrefix(runtime.FuncForPC(pcs[0]).Name(), "drover/internal/")
	defer func() { s.c.writeNs.Add(int64(time.Since(at))) }()
	return s.Store.Write(ctx, func(tx store.Tx) error {
		at := time.Now()
		defer func() { s.c.wrote(name, int64(time.Since(at))) }()
		return fn(tx)
	})
}

// wrote counts a write's fn by the function that wrote, d long.
func (c *storeCounts) wrote(name string, d int64) {
	c.fnNs.Add(d)
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.by == nil {
		c.by = map[string]*[2]int64{}
	}
	v := c.by[name]
	if v == nil {
		v = new([2]int64)
		c.by[name] = v
	}
	v[0]++
	v[1] += d
}

type countingTx struct {
	store.Tx
	c *storeCounts
}

func (t countingTx) EvalOpenItems(evalID string, queued int) ([]store.EvalItem, error) {
	t.c.passes.Add(1)
	return t.Tx.EvalOpenItems(evalID, queued)
}

// newCountedPipeBench is newPipeBench counting the hub's transactions.
func newCountedPipeBench(t testing.TB, runners int) *pipeBench {
	c := &storeCounts{}
	pb := newPipeBenchOn(t, runners, func(st store.Store) store.Store { return countingStore{st, c} })
	pb.counts = c
	return pb
}

// BenchmarkEvalOverhead: an evaluation of N trivial instances (exec
// agent, test_cmd true), max_parallel 20, on 20 runners, from StartEval
// to the evaluation done (the time in StartEval, which checks every
// instance's base, apart too); against, in the same iteration, the same
// jobs submitted plainly by 20 clients, each taking an instance at a time:
// its agent-like job (exec at the base, keyed), and once that finished its
// grading-like job (exec, observe, no network, keyed), to the last one
// finished (issue 29, target ≤ 1.1×). Also the hub's heap retained per
// instance once the evaluation ended, the events stored per instance
// beside the plain jobs', and the bytes of its item's row. The two go
// first in turn: -benchtime=2x (or any even count) runs each first once.
func BenchmarkEvalOverhead(b *testing.B) {
	const parallel = 20
	n := evalBenchInstances(b)
	pb := newCountedPipeBench(b, parallel)
	var m evalOverhead
	for b.Loop() {
		pb.evalOverhead(b, n, parallel, &m)
	}
	per := float64(m.instances)
	b.ReportMetric(m.evalWall.Seconds()*1e3/float64(b.N), "eval-ms")
	b.ReportMetric(m.plainWall.Seconds()*1e3/float64(b.N), "plain-ms")
	ratio := func(x, y int64) float64 { // 0 with one side run alone
		if x == 0 || y == 0 {
			return 0
		}
		return float64(x) / float64(y)
	}
	b.ReportMetric(ratio(int64(m.evalWall), int64(m.plainWall)), "ratio")
	b.ReportMetric(ratio(m.eval.cpuNs, m.plain.cpuNs), "cpu-ratio")
	b.ReportMetric(m.started.Seconds()*1e3/float64(b.N), "start-ms")
	b.ReportMetric(float64(m.heap)/per/1024, "heap-KiB/instance")
	b.ReportMetric(float64(m.evalEvents)/per, "events/instance")
	b.ReportMetric(float64(m.plainEvents)/per, "plain-events/instance")
	b.ReportMetric(float64(m.itemBs)/per, "item-bytes/instance")
	b.ReportMetric(float64(m.eval.passes)/per, "passes/instance")
	b.ReportMetric(float64(m.eval.writes)/per, "commits/instance")
	b.ReportMetric(float64(m.plain.writes)/per, "plain-commits/instance")
	b.ReportMetric(float64(m.eval.reads)/per, "reads/instance")
	b.ReportMetric(float64(m.plain.reads)/per, "plain-reads/instance")
	b.Logf("%d instances, max_parallel %d, on %d runners: %v per evaluation (%v of it in StartEval), %v for the same %d jobs plain (%.2f×); "+
		"heap retained %.1f KiB per instance; %.1f events stored per instance (plain: %.1f), and an item of %.0f bytes",
		n, parallel, parallel, (m.evalWall / time.Duration(b.N)).Round(time.Millisecond), (m.started / time.Duration(b.N)).Round(time.Millisecond),
		(m.plainWall / time.Duration(b.N)).Round(time.Millisecond), 2*n, ratio(int64(m.evalWall), int64(m.plainWall)),
		float64(m.heap)/per/1024, float64(m.evalEvents)/per, float64(m.plainEvents)/per, float64(m.itemBs)/per)
	b.Logf("per instance: %.2f passes; %.2f commits (plain: %.2f); %.2f reads (plain: %.2f)",
		float64(m.eval.passes)/per, float64(m.eval.writes)/per, float64(m.plain.writes)/per, float64(m.eval.reads)/per, float64(m.plain.reads)/per)
	b.Logf("per write: %v from Write to its return, %v in its fn (plain: %v, %v); per instance in fns: %v (plain: %v)",
		time.Duration(m.eval.writeNs/max(m.eval.writes, 1)), time.Duration(m.eval.fnNs/max(m.eval.writes, 1)),
		time.Duration(m.plain.writeNs/max(m.plain.writes, 1)), time.Duration(m.plain.fnNs/max(m.plain.writes, 1)),
		time.Duration(float64(m.eval.fnNs)/per), time.Duration(float64(m.plain.fnNs)/per))
	b.Logf("process CPU per instance: %v (plain: %v, %.2f×)", time.Duration(float64(m.eval.cpuNs)/per), time.Duration(float64(m.plain.cpuNs)/per),
		ratio(m.eval.cpuNs, m.plain.cpuNs))
}

// The benchmark's body at a tiny size, so that it keeps working: every
// instance resolved, each job's events counted; no time is checked.
func TestEvalOverheadSmoke(t *testing.T) {
	t.Parallel()
	pb := newCountedPipeBench(t, 2)
	var m evalOverhead
	pb.evalOverhead(t, 3, 2, &m)
	pb.evalOverhead(t, 3, 2, &m)
	if m.instances != 6 || m.evalEvents == 0 || m.evalEvents != m.plainEvents || m.itemBs == 0 {
		t.Fatalf("%+v; want 6 instances, as many events as the plain jobs', item bytes", m)
	}
	if m.eval.passes == 0 || m.eval.writes == 0 || m.plain.writes == 0 {
		t.Fatalf("%+v; want passes and both sides' commits counted", m)
	}
}

// evalOverhead runs one iteration: an evaluation of n trivial instances
// and the same jobs plain, parallel at a time, the one or the other first.
func (pb *pipeBench) evalOverhead(t testing.TB, n, parallel int, m *evalOverhead) {
	pb.n++
	run := pb.n
	lines := make([]apitypes.EvalLine, n)
	for i := range lines {
		lines[i] = apitypes.EvalLine{Line: i + 1, Instance: &apitypes.EvalInstance{InstanceID: fmt.Sprintf("bench__%d-%d", run, i),
			Repo: "bench", BaseCommit: pb.base, ProblemStatement: fmt.Sprintf("instance %d of run %d", i, run), TestCmd: "true"}}
	}
	evalRun := func() {
		heap0, _ := memNow()
		c0 := pb.count()
		done := pb.fl.finished()
		at := time.Now()
		v, _, err := pb.th.h.evals.StartEval(t.Context(), pb.c, apitypes.EvalRunRequest{Agent: "exec", Exec: "true",
			MaxParallel: parallel, Lines: lines})
		if err != nil {
			t.Fatal(err)
		}
		m.started += time.Since(at)
		pb.waitEval(t, v.ID, done+2*n)
		end := time.Now()
		m.evalWall += end.Sub(at)
		t.Logf("run %d, evaluation: %v", run, pb.timeline(t, "eval:"+v.ID+":%", parallel, at, end))
		m.eval = m.eval.add(c0, pb.count())
		pb.counts.logWrites(t, "evaluation")
		heap1, _ := memNow()
		m.heap += heap1 - heap0
		m.evalEvents += pb.events(t, "eval:"+v.ID+":%")
		m.itemBs += pb.itemBytes(t, v.ID)
	}
	plainRun := func() {
		repo := &apitypes.SubmitRepo{Project: "bench", Base: pb.base}
		c0 := pb.count()
		at := time.Now()
		var wg sync.WaitGroup
		for w := range parallel {
			wg.Go(func() {
				for i := w; i < n; i += parallel {
					key := fmt.Sprintf("plain:%d:%d:", run, i)
					pb.fl.waitDone(t, pb.submitReq(t, apitypes.SubmitRequest{Agent: "exec", Key: key + "agent",
						Args: []string{"sh", "-c", "true", "plain", fmt.Sprint(i)}, Repo: repo}))
					pb.fl.waitDone(t, pb.submitReq(t, apitypes.SubmitRequest{Agent: "exec", Key: key + "grade", Mode: protocol.ModeObserve,
						Network: []string{"none"}, Args: []string{"sh", "-c", "true", "grade", fmt.Sprint(i)}, Repo: repo}))
				}
			})
		}
		wg.Wait()
		end := time.Now()
		m.plainWall += end.Sub(at)
		t.Logf("run %d, plain: %v", run, pb.timeline(t, fmt.Sprintf("plain:%d:%%", run), parallel, at, end))
		m.plain = m.plain.add(c0, pb.count())
		pb.counts.logWrites(t, "plain")
		m.plainEvents += pb.events(t, fmt.Sprintf("plain:%d:%%", run))
	}
	// Every job makes the hub's tables larger: the two go first in turn,
	// so that neither gains by going first. DROVER_BENCH_SIDE=eval or
	// plain runs that side alone: a CPU profile of one side.
	switch side := os.Getenv("DROVER_BENCH_SIDE"); {
	case side == "eval":
		evalRun()
	case side == "plain":
		plainRun()
	case run%2 == 1:
		evalRun()
		plainRun()
	default:
		plainRun()
		evalRun()
	}
	m.instances += n
}

// finished is how many jobs the fleet has finished so far.
func (fl *benchFleet) finished() int {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return len(fl.done)
}

// count is the hub's transactions so far (none counted: zero).
func (pb *pipeBench) count() storeCount {
	if pb.counts == nil {
		return storeCount{}
	}
	return pb.counts.now()
}

// submitReq submits req as the bench's caller, from any goroutine.
func (pb *pipeBench) submitReq(t testing.TB, req apitypes.SubmitRequest) string {
	s, err := pb.th.h.SubmitJob(context.Background(), pb.c, req)
	if err != nil {
		t.Errorf("submit: %v", err)
	}
	return s.Job.ID
}

// waitEval waits for evaluation id to end, every item resolved. As the
// plain jobs' clients do, it waits in memory until the fleet has
// finished jobs in all (the evaluation's last one), and only then polls
// the evaluation's row, every millisecond, for the pass that ends it: it
// polled the row every 5 ms from the start, the bench's reads taking the
// hub's CPU, more of it than a pass's reads (a CPU profile).
func (pb *pipeBench) waitEval(t testing.TB, id string, jobs int) {
	deadline := time.Now().Add(10 * time.Minute)
	for pb.fl.finished() < jobs {
		if time.Now().After(deadline) {
			t.Fatalf("evaluation %s's jobs not finished within 10 minutes", id)
		}
		time.Sleep(time.Millisecond)
	}
	for {
		var ev store.Eval
		st := pb.th.h.store
		if c, ok := st.(countingStore); ok {
			st = c.Store // the bench's polls are not the hub's reads
		}
		err := st.Read(t.Context(), func(tx store.Tx) error {
			var err error
			ev, err = tx.Eval(id)
			return err
		})
		switch {
		case err != nil:
			t.Fatal(err)
		case ev.State != store.EvalRunning:
			v, err := pb.th.h.evals.ShowEval(t.Context(), pb.c, id)
			if err != nil || v.Counts["resolved"] != len(v.Items) {
				t.Fatalf("evaluation %s %s: %v %v", id, ev.State, v.Counts, err)
			}
			return
		case time.Now().After(deadline):
			t.Fatalf("evaluation %s not done within 10 minutes", id)
		}
		time.Sleep(time.Millisecond)
	}
}

// storeDB opens the hub's SQLite file to read.
func (pb *pipeBench) storeDB(t testing.TB) *sql.DB {
	db, err := sql.Open("sqlite", "file:"+StorePath(pb.th.cfg.DataDir)+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

// events counts the events stored of the jobs whose key is LIKE pattern.
func (pb *pipeBench) events(t testing.TB, pattern string) int64 {
	var n int64
	if err := pb.storeDB(t).QueryRow(`SELECT COUNT(*) FROM events e JOIN jobs j ON j.id = e.job_id WHERE j.key LIKE ?`, pattern).Scan(&n); err != nil {
		t.Fatal(err)
	}
	return n
}

// itemBytes is the bytes of evaluation id's items' rows (each value's
// size: text's length, 8 for a number).
func (pb *pipeBench) itemBytes(t testing.TB, id string) int64 {
	_, n := rowSizes(t, pb.storeDB(t), "SELECT * FROM eval_items WHERE eval_id = ?", id)
	return int64(n)
}
