package hub

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/store"
)

// Issue 27's benchmarks (docs/benchmarks.md): pipelines' steps are jobs
// the hub's pipeline engine submits, run here by the fleet of
// runners_bench_test.go (an offer is accepted at once and finished with
// exit 0). Every figure is beside a baseline of plain jobs measured in
// the same run; nothing asserts a time.

// pipeBench is a hub hosting project "bench", with runners connected and
// the admin as the caller of pipelines and jobs.
type pipeBench struct {
	th   *testHub
	fl   *benchFleet
	c    call.Caller
	base string
	n    int // jobs submitted so far, to keep their commands apart
	// counts counts the hub's transactions, when the bench asked for it
	// (newCountedPipeBench).
	counts *storeCounts
}

func newPipeBench(b testing.TB, runners int) *pipeBench {
	return newPipeBenchOn(b, runners, nil)
}

// newPipeBenchOn is newPipeBench with the hub's store seen through wrap
// (startHubOn).
func newPipeBenchOn(b testing.TB, runners int, wrap func(store.Store) store.Store) *pipeBench {
	th := startHubOn(b, Config{}, wrap)
	_, base := th.hostProject(th.admin, "bench")
	rs := make([]benchRunner, runners)
	for i := range rs {
		rs[i] = benchRunner{url: th.srv.URL, token: th.registerRunner(fmt.Sprintf("b%04d", i))}
	}
	fl := newBenchFleet()
	b.Cleanup(fl.close)
	fl.join(b, "pipelines", rs, th.h.cfg.Heartbeat/2)
	c, err := th.h.AuthenticateToken(b.Context(), th.admin)
	if err != nil {
		b.Fatal(err)
	}
	return &pipeBench{th: th, fl: fl, c: c, base: base}
}

// submit submits a plain exec job on the project, as a pipeline's step
// would be, from any goroutine.
func (pb *pipeBench) submit(b *testing.B, args ...string) string {
	s, err := pb.th.h.SubmitJob(context.Background(), pb.c, apitypes.SubmitRequest{Agent: "exec", Args: append([]string{"true"}, args...),
		Repo: &apitypes.SubmitRepo{Project: "bench", Base: pb.base}})
	if err != nil {
		b.Errorf("submit: %v", err)
	}
	return s.Job.ID
}

// run runs a pipeline to its end and returns it and its runs; run, a
// param every bench pipeline has, keeps its steps from replaying earlier
// ones' results.
func (pb *pipeBench) run(b *testing.B, source string) (store.Pipeline, []store.PipelineRun) {
	pb.n++
	v, _, err := pb.th.h.pipelines.RunPipeline(b.Context(), pb.c, apitypes.PipelineRunRequest{File: "bench.yaml", Source: source,
		Project: "bench", Base: pb.base, Params: map[string]string{"run": fmt.Sprint(pb.n)}})
	if err != nil {
		b.Fatalf("run pipeline: %v", err)
	}
	// Polled every 5 ms, reading one row: the bench's own reads must not
	// crowd the hub's.
	deadline := time.Now().Add(5 * time.Minute)
	for {
		var p store.Pipeline
		var runs []store.PipelineRun
		err := pb.th.h.store.Read(b.Context(), func(tx store.Tx) error {
			var err error
			if p, err = tx.Pipeline(v.ID); err != nil || p.State != store.PipelineDone {
				return err
			}
			runs, err = tx.PipelineRuns(v.ID)
			return err
		})
		switch {
		case err != nil:
			b.Fatal(err)
		case p.State == store.PipelineDone:
			return p, runs
		case p.State.Terminal() || p.State == store.PipelineNeedsHuman:
			b.Fatalf("pipeline %s %s: %s", p.ID, p.State, p.Reason)
		case time.Now().After(deadline):
			b.Fatalf("pipeline %s not done within 5 minutes", p.ID)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// chainSource is a pipeline of n exec steps, each depending on the one
// before.
func chainSource(n int) string {
	var sb strings.Builder
	sb.WriteString("name: chain\nparams:\n  - name: run\nsteps:\n")
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&sb, "  - id: s%d\n    kind: exec\n    command: [\"true\", \"{{params.run}}\", \"%d\"]\n", i, i)
		if i > 1 {
			fmt.Fprintf(&sb, "    depends_on: [s%d]\n", i-1)
		}
	}
	return sb.String()
}

// fanOutSource is one exec step over items 0 … n-1, parallel at most at
// once.
func fanOutSource(n, parallel int) string {
	items := make([]string, n)
	for i := range items {
		items[i] = fmt.Sprintf("%q", fmt.Sprint(i))
	}
	return fmt.Sprintf(`name: fan
params:
  - name: run
steps:
  - id: items
    kind: exec
    command: ["true", "{{params.run}}", "{{item}}"]
    for_each:
      items: [%s]
      max_parallel: %d
`, strings.Join(items, ", "), parallel)
}

// BenchmarkPipelineStepOverhead: the hub's cost of moving a pipeline on
// (issue 27, target p99 ≤ 5 ms over plain dispatch). Each iteration runs a
// chain of 50 exec steps on one runner and takes, for each step after the
// first, the time from the previous step's finish being acknowledged to
// its offer arriving; then as many plain jobs one at a time, each's
// submit → offer (the baseline: what dispatch costs without a pipeline).
// It also reports the pipeline's stored events and bytes per step.
func BenchmarkPipelineStepOverhead(b *testing.B) {
	const steps = 50
	pb := newPipeBench(b, 1)
	var step, plain []time.Duration
	var sz pipeSize
	for b.Loop() {
		p, runs := pb.run(b, chainSource(steps))
		jobs := runJobs(b, runs, steps)
		for k := 1; k < steps; k++ {
			step = append(step, pb.fl.offerOf(jobs[k]).Sub(pb.fl.doneOf(jobs[k-1])))
		}
		sz = sz.plus(pb.size(b, p.ID))
		for k := range steps {
			pb.n++
			at := time.Now()
			id := pb.submit(b, "plain", fmt.Sprint(pb.n), fmt.Sprint(k))
			pb.fl.waitDone(b, id)
			plain = append(plain, pb.fl.offerOf(id).Sub(at))
		}
	}
	s, p := benchQuantiles(step), benchQuantiles(plain)
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	b.ReportMetric(ms(s.p50), "step-p50-ms")
	b.ReportMetric(ms(s.p99), "step-p99-ms")
	b.ReportMetric(ms(p.p50), "plain-p50-ms")
	b.ReportMetric(ms(p.p99), "plain-p99-ms")
	b.ReportMetric(ms(s.p50-p.p50), "overhead-p50-ms")
	b.ReportMetric(ms(s.p99-p.p99), "overhead-p99-ms")
	sz.report(b)
	b.Logf("%d steps: previous finished → offer p50 %v p99 %v max %v; %d plain jobs: submit → offer p50 %v p99 %v max %v; %v",
		len(step), s.p50, s.p99, s.max, len(plain), p.p50, p.p99, p.max, sz)
}

// BenchmarkPipelineFanOut: a for_each of 100 items, max_parallel 20, on 20
// runners, from RunPipeline to the pipeline done, against 100 plain jobs
// submitted at once (20 at a time) to the last one finished, in the same
// iteration (issue 27, target ≤ 1.1×).
func BenchmarkPipelineFanOut(b *testing.B) {
	const items, parallel = 100, 20
	pb := newPipeBench(b, parallel)
	var fan, plain time.Duration
	var sz pipeSize
	for b.Loop() {
		at := time.Now()
		p, _ := pb.run(b, fanOutSource(items, parallel))
		fan += time.Since(at)
		sz = sz.plus(pb.size(b, p.ID))

		pb.n++
		ids := make([]string, items)
		at = time.Now()
		var wg sync.WaitGroup
		for w := range parallel {
			wg.Go(func() {
				for i := w; i < items; i += parallel {
					ids[i] = pb.submit(b, "plain", fmt.Sprint(pb.n), fmt.Sprint(i))
				}
			})
		}
		wg.Wait()
		for _, id := range ids {
			pb.fl.waitDone(b, id)
		}
		plain += time.Since(at)
	}
	n := float64(b.N)
	b.ReportMetric(fan.Seconds()*1e3/n, "fanout-ms")
	b.ReportMetric(plain.Seconds()*1e3/n, "plain-ms")
	b.ReportMetric(float64(fan)/float64(plain), "ratio")
	sz.report(b)
	b.Logf("%d items, max_parallel %d, on %d runners: %v per pipeline, %v per %d plain jobs (%.2f×); %v",
		items, parallel, parallel, (fan / time.Duration(b.N)).Round(time.Millisecond), (plain / time.Duration(b.N)).Round(time.Millisecond),
		items, float64(fan)/float64(plain), sz)
}

// runJobs are the jobs of a pipeline's runs of steps s1 … sn, in order.
func runJobs(b *testing.B, runs []store.PipelineRun, n int) []string {
	jobs := make([]string, n)
	for _, r := range runs {
		var k int
		if _, err := fmt.Sscanf(r.Step, "s%d", &k); err != nil || k < 1 || k > n {
			b.Fatalf("run %s: unexpected step", r.Key)
		}
		jobs[k-1] = r.JobID
	}
	if slices.Contains(jobs, "") {
		b.Fatalf("runs %v: a step has no job", runs)
	}
	return jobs
}

func (fl *benchFleet) doneOf(id string) time.Time {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.done[id]
}

// pipeSize is what pipelines left in the store: their runs (one a step,
// or a step's item), events, and the bytes of their runs' and events'
// rows (the values' sizes: text's length, 8 for a number).
type pipeSize struct{ runs, events, bytes int }

func (s pipeSize) plus(o pipeSize) pipeSize {
	return pipeSize{s.runs + o.runs, s.events + o.events, s.bytes + o.bytes}
}

func (s pipeSize) report(b *testing.B) {
	b.ReportMetric(float64(s.events)/float64(s.runs), "events/step")
	b.ReportMetric(float64(s.bytes)/float64(s.runs), "bytes/step")
}

func (s pipeSize) String() string {
	return fmt.Sprintf("%.1f events and %.0f bytes stored per step", float64(s.events)/float64(s.runs), float64(s.bytes)/float64(s.runs))
}

// size reads pipeline id's rows from the hub's SQLite file.
func (pb *pipeBench) size(b *testing.B, id string) pipeSize {
	db, err := sql.Open("sqlite", "file:"+StorePath(pb.th.cfg.DataDir)+"?mode=ro")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	var s pipeSize
	for _, table := range []string{"pipeline_runs", "pipeline_events"} {
		rows, bytes := rowSizes(b, db, "SELECT * FROM "+table+" WHERE pipeline_id = ?", id)
		s.bytes += bytes
		if table == "pipeline_runs" {
			s.runs = rows
		} else {
			s.events = rows
		}
	}
	return s
}

// rowSizes runs query and returns its rows and their values' bytes.
func rowSizes(b testing.TB, db *sql.DB, query string, args ...any) (rows, bytes int) {
	rs, err := db.Query(query, args...)
	if err != nil {
		b.Fatal(err)
	}
	defer rs.Close()
	names, _ := rs.Columns()
	vals := make([]any, len(names))
	ptrs := make([]any, len(names))
	for i := range vals {
		ptrs[i] = &vals[i]
	}
	for rs.Next() {
		if err := rs.Scan(ptrs...); err != nil {
			b.Fatal(err)
		}
		rows++
		for _, v := range vals {
			switch v := v.(type) {
			case string:
				bytes += len(v)
			case []byte:
				bytes += len(v)
			case nil:
			default:
				bytes += 8
			}
		}
	}
	if err := rs.Err(); err != nil {
		b.Fatal(err)
	}
	return rows, bytes
}
