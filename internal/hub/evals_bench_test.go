package hub

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"sync"
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
// so grading needs no git). Nothing asserts a time.

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

// BenchmarkEvalOverhead: an evaluation of N trivial instances (exec
// agent, test_cmd true), max_parallel 20, on 20 runners, from StartEval
// to the evaluation done (the time in StartEval, which checks every
// instance's base, apart too); against, in the same iteration, the same jobs
// submitted plainly by 20 clients, each taking an instance at a time: its
// agent-like job (exec at the base, keyed), and once that finished its
// grading-like job (exec, observe, no network, keyed), to the last one
// finished (issue 29, target ≤ 1.1×). Also the hub's heap retained per
// instance once the evaluation ended, and the events stored per instance
// beside the plain jobs'. The two go first in turn: -benchtime=2x (or
// any even count) runs each first once.
func BenchmarkEvalOverhead(b *testing.B) {
	const parallel = 20
	n := evalBenchInstances(b)
	pb := newPipeBench(b, parallel)
	var evalWall, plainWall time.Duration
	var evalEvents, plainEvents, heap int64
	var started time.Duration // in StartEval
	for b.Loop() {
		pb.n++
		run := pb.n
		lines := make([]apitypes.EvalLine, n)
		for i := range lines {
			lines[i] = apitypes.EvalLine{Line: i + 1, Instance: &apitypes.EvalInstance{InstanceID: fmt.Sprintf("bench__%d-%d", run, i),
				Repo: "bench", BaseCommit: pb.base, ProblemStatement: fmt.Sprintf("instance %d of run %d", i, run), TestCmd: "true"}}
		}
		evalRun := func() {
			heap0, _ := memNow()
			at := time.Now()
			v, _, err := pb.th.h.evals.StartEval(b.Context(), pb.c, apitypes.EvalRunRequest{Agent: "exec", Exec: "true",
				MaxParallel: parallel, Lines: lines})
			if err != nil {
				b.Fatal(err)
			}
			started += time.Since(at)
			pb.waitEval(b, v.ID)
			evalWall += time.Since(at)
			heap1, _ := memNow()
			heap += heap1 - heap0
			evalEvents += pb.events(b, "eval:"+v.ID+":%")
		}
		plainRun := func() {
			at := time.Now()
			var wg sync.WaitGroup
			for w := range parallel {
				wg.Go(func() {
					for i := w; i < n; i += parallel {
						key := fmt.Sprintf("plain:%d:%d:", run, i)
						pb.fl.waitDone(b, pb.submitReq(b, apitypes.SubmitRequest{Agent: "exec", Key: key + "agent",
							Args: []string{"sh", "-c", "true", "plain", fmt.Sprint(i)}, Repo: &apitypes.SubmitRepo{Project: "bench", Base: pb.base}}))
						pb.fl.waitDone(b, pb.submitReq(b, apitypes.SubmitRequest{Agent: "exec", Key: key + "grade", Mode: protocol.ModeObserve,
							Network: []string{"none"}, Args: []string{"sh", "-c", "true", "grade", fmt.Sprint(i)},
							Repo: &apitypes.SubmitRepo{Project: "bench", Base: pb.base}}))
					}
				})
			}
			wg.Wait()
			plainWall += time.Since(at)
			plainEvents += pb.events(b, fmt.Sprintf("plain:%d:%%", run))
		}
		// Every job makes the hub's tables larger: the two go first in
		// turn, so that neither gains by going first.
		if run%2 == 1 {
			evalRun()
			plainRun()
		} else {
			plainRun()
			evalRun()
		}
	}
	per := float64(b.N) * float64(n)
	b.ReportMetric(evalWall.Seconds()*1e3/float64(b.N), "eval-ms")
	b.ReportMetric(plainWall.Seconds()*1e3/float64(b.N), "plain-ms")
	b.ReportMetric(float64(evalWall)/float64(plainWall), "ratio")
	b.ReportMetric(started.Seconds()*1e3/float64(b.N), "start-ms")
	b.ReportMetric(float64(heap)/per/1024, "heap-KiB/instance")
	b.ReportMetric(float64(evalEvents)/per, "events/instance")
	b.ReportMetric(float64(plainEvents)/per, "plain-events/instance")
	b.Logf("%d instances, max_parallel %d, on %d runners: %v per evaluation (%v of it in StartEval), %v for the same %d jobs plain (%.2f×); "+
		"heap retained %.1f KiB per instance; %.1f events stored per instance (plain: %.1f)",
		n, parallel, parallel, (evalWall / time.Duration(b.N)).Round(time.Millisecond), (started / time.Duration(b.N)).Round(time.Millisecond), (plainWall / time.Duration(b.N)).Round(time.Millisecond),
		2*n, float64(evalWall)/float64(plainWall), float64(heap)/per/1024, float64(evalEvents)/per, float64(plainEvents)/per)
}

// submitReq submits req as the bench's caller, from any goroutine.
func (pb *pipeBench) submitReq(b *testing.B, req apitypes.SubmitRequest) string {
	s, err := pb.th.h.SubmitJob(context.Background(), pb.c, req)
	if err != nil {
		b.Errorf("submit: %v", err)
	}
	return s.Job.ID
}

// waitEval waits for evaluation id to end, polling its one row every 5
// ms (the bench's reads must not crowd the hub's); every item must have
// been resolved.
func (pb *pipeBench) waitEval(b *testing.B, id string) {
	deadline := time.Now().Add(10 * time.Minute)
	for {
		var ev store.Eval
		err := pb.th.h.store.Read(b.Context(), func(tx store.Tx) error {
			var err error
			ev, err = tx.Eval(id)
			return err
		})
		switch {
		case err != nil:
			b.Fatal(err)
		case ev.State != store.EvalRunning:
			v, err := pb.th.h.evals.ShowEval(b.Context(), pb.c, id)
			if err != nil || v.Counts["resolved"] != len(v.Items) {
				b.Fatalf("evaluation %s %s: %v %v", id, ev.State, v.Counts, err)
			}
			return
		case time.Now().After(deadline):
			b.Fatalf("evaluation %s not done within 10 minutes", id)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// events counts the events stored of the jobs whose key is LIKE pattern.
func (pb *pipeBench) events(b *testing.B, pattern string) int64 {
	db, err := sql.Open("sqlite", "file:"+StorePath(pb.th.cfg.DataDir)+"?mode=ro")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var n int64
	if err := db.QueryRow(`SELECT COUNT(*) FROM events e JOIN jobs j ON j.id = e.job_id WHERE j.key LIKE ?`, pattern).Scan(&n); err != nil {
		b.Fatal(err)
	}
	return n
}
