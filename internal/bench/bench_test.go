package bench

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"drover/internal/testkit/plainbuild"
)

// droverBinary returns $DROVER_BENCH_BINARY when set (to bench an already
// built binary), else the suite's plain drover (plainbuild.Drover).
func droverBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("DROVER_BENCH_BINARY"); bin != "" {
		return bin
	}
	bin, err := plainbuild.Drover(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return bin
}

// smokeSetup skips a test that runs the bench where it cannot run (or
// under -short), and gives it a freshly built drover and a deadline.
func smokeSetup(t *testing.T) (string, context.Context) {
	t.Helper()
	if runtime.GOOS != "linux" {
		t.Skip("the bench reads /proc")
	}
	if testing.Short() {
		t.Skip("starts hub processes")
	}
	bin := droverBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	t.Cleanup(cancel)
	return bin, ctx
}

// TestBenchSmoke runs the whole bench at a tiny size. It checks that every
// number was produced and every job finished, never how fast anything was.
func TestBenchSmoke(t *testing.T) {
	bin, ctx := smokeSetup(t)
	var progress bytes.Buffer
	res, err := Run(ctx, Options{
		Binary: bin, Runners: []int{3, 1}, Jobs: 5, Idle: time.Second,
		Settle: 200 * time.Millisecond, PollInterval: 100 * time.Millisecond,
		Dir: t.TempDir(), Progress: &progress, Burst: 7,
	})
	if err != nil {
		t.Fatalf("bench: %v\nprogress:\n%s", err, progress.String())
	}

	if len(res.Latency) != 2 || res.Latency[0].Runners != 1 || res.Latency[1].Runners != 3 {
		t.Fatalf("latency rows: %+v", res.Latency)
	}
	for _, l := range res.Latency {
		if l.Jobs != 5 || l.Completed != 5 {
			t.Errorf("%d runners: %d of %d jobs completed", l.Runners, l.Completed, l.Jobs)
		}
		if l.P50 <= 0 || l.P99 < l.P50 || l.Max < l.P99 || l.Mean <= 0 || l.SubmitP50 <= 0 {
			t.Errorf("%d runners: latency not measured: %+v", l.Runners, l)
		}
	}
	if len(res.Memory) != 2 || res.Memory[1].Added != 2 {
		t.Fatalf("memory rows: %+v", res.Memory)
	}
	for _, m := range res.Memory {
		if m.Before <= 0 || m.After <= 0 {
			t.Errorf("memory not measured: %+v", m)
		}
	}
	if !res.HubMetrics {
		t.Error("the hub's Go figures were not read, though this drover's hub has --metrics-listen")
	}
	// Only that they were read: with 2 runners added the growth is lost in
	// what else the hub holds and frees (API connections closing, garbage).
	for _, m := range res.Memory {
		if m.GoBefore == nil || m.GoAfter == nil || m.GoBefore.HeapInuse <= 0 || m.GoAfter.StackInuse <= 0 || m.GoAfter.Goroutines <= 0 {
			t.Errorf("Go figures at %d runners: %+v → %+v", m.Runners, m.GoBefore, m.GoAfter)
		}
	}
	if _, _, _, ok := res.Memory[1].GoPerRunner(); !ok {
		t.Error("no Go figures per added runner")
	}
	if b := res.Burst; b == nil || b.Jobs != 7 || b.Runners != 3 || b.Dispatched <= 0 || b.Completed < b.Dispatched || b.DispatchRate() <= 0 || b.Offer.P99 < b.Offer.P50 {
		t.Errorf("burst: %+v", res.Burst)
	}
	if c := res.IdleCPU; c.Clients != 3 || c.Window < time.Second || c.Used < 0 {
		t.Errorf("idle CPU: %+v", c)
	}
	if res.Heartbeat <= 0 {
		t.Errorf("heartbeat interval not learned")
	}
	p := res.Poll
	if p == nil {
		t.Fatal("no polling baseline")
	}
	if p.Clients != 3 || p.BaseRSS <= 0 || p.RSS <= 0 || p.CPU.Events == 0 || p.Floor.Window < time.Second {
		t.Errorf("polling baseline: %+v", p)
	}

	var md, txt, js bytes.Buffer
	if err := res.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if err := res.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	if err := res.WriteJSON(&js); err != nil {
		t.Fatal(err)
	}
	// scripts/bench-compare reads these fields.
	var back struct {
		Latency []struct{ P50, P99 int64 }
		Memory  []struct {
			Added, Before, After int64
			GoBefore, GoAfter    *struct{ HeapInuse, StackInuse int64 }
		}
		Burst *struct{ Jobs, Dispatched, Completed int64 }
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil {
		t.Fatalf("JSON report: %v\n%s", err, js.String())
	}
	if len(back.Latency) != 2 || back.Latency[1].P99 != int64(res.Latency[1].P99) || back.Memory[1].GoAfter == nil ||
		back.Memory[1].GoAfter.HeapInuse != res.Memory[1].GoAfter.HeapInuse || back.Burst == nil || back.Burst.Dispatched != int64(res.Burst.Dispatched) {
		t.Errorf("JSON report does not hold the result:\n%s", js.String())
	}
	for _, want := range []string{"### Against the targets", "### Dispatch latency", "### Hub memory", "### Hub CPU", "### Burst", "heap per added runner",
		"drover bench --runners 1,3 --jobs 5 --idle 1s --poll-interval 100ms --settle 200ms --burst 7"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	if !strings.Contains(txt.String(), "dispatch latency") || !strings.Contains(txt.String(), "burst of 7 jobs") {
		t.Errorf("text report:\n%s", txt.String())
	}
	t.Logf("\n%s", md.String())
}

func TestSummarizeUsesNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	s := summarize(ds)
	if s.p50 != 50*time.Millisecond || s.p90 != 90*time.Millisecond || s.p99 != 99*time.Millisecond || s.max != 100*time.Millisecond {
		t.Fatalf("summary of 1..100 ms: %+v", s)
	}
	if s.mean != 50500*time.Microsecond {
		t.Fatalf("mean %s", s.mean)
	}
	if one := summarize([]time.Duration{7}); one.p50 != 7 || one.p99 != 7 || one.max != 7 {
		t.Fatalf("one sample: %+v", one)
	}
	if ds[0] != 100*time.Millisecond {
		t.Fatal("summarize sorted its input")
	}
}

func TestParseStatTicks(t *testing.T) {
	tests := []struct {
		name string
		line string
		want int64
		ok   bool
	}{
		{"plain", "1234 (drover) S 1 1234 1234 0 -1 4194560 500 0 0 0 250 70 0 0 20 0 9 0 100 0 0", 320, true},
		{"name with spaces and parens", "1234 (a) b (c)) R 1 1234 1234 0 -1 4194560 500 0 0 0 3 4 0 0 20 0 9 0 100 0 0", 7, true},
		{"truncated", "1234 (drover) S 1 2 3", 0, false},
		{"no name", "garbage", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatTicks([]byte(tt.line))
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("got %d, %v; want %d (ok %v)", got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestRatioHandlesZero(t *testing.T) {
	tests := []struct {
		a, b, res float64
		want      string
	}{
		{990, 9.9, 1, "100×"},
		{3, 2, 1, "1.50×"},
		{5, 0, 0.5, "> 10×"},
		{0, 0, 1, "—"},
	}
	for _, tt := range tests {
		if got := ratio(tt.a, tt.b, tt.res); got != tt.want {
			t.Errorf("ratio(%v, %v, %v) = %q, want %q", tt.a, tt.b, tt.res, got, tt.want)
		}
	}
}

// TestBenchTenancySmoke runs the tenancy comparison at a tiny size: both
// hubs, every job completed, every route sampled. No timing is checked.
func TestBenchTenancySmoke(t *testing.T) {
	bin, ctx := smokeSetup(t)
	var progress bytes.Buffer
	res, err := Run(ctx, Options{
		Binary: bin, Runners: []int{20}, Jobs: 8, Owners: 4,
		Settle: 200 * time.Millisecond, Dir: t.TempDir(), Progress: &progress,
	})
	if err != nil {
		t.Fatalf("bench: %v\nprogress:\n%s", err, progress.String())
	}
	tn := res.Tenancy
	if tn == nil || len(res.Latency) != 0 || res.Poll != nil {
		t.Fatalf("want only the tenancy comparison: %+v", res)
	}
	for name, l := range map[string]Latency{"baseline": tn.Base, "tenancy": tn.Tenant} {
		if l.Jobs != 8 || l.Completed != 8 || l.P50 <= 0 || l.P99 < l.P50 || l.Runners != 20 {
			t.Errorf("%s: %+v", name, l)
		}
	}
	for _, k := range kinds {
		if tn.TenantByKind[k].Jobs != 2 || tn.BaseByKind[k].Jobs != 2 {
			t.Errorf("route %s: %d tenancy and %d baseline samples, want 2 each", k, tn.TenantByKind[k].Jobs, tn.BaseByKind[k].Jobs)
		}
	}
	if tn.Kinds[kindHub] != 2 || tn.Kinds[kindProject] != 4 || tn.Kinds[kindUsers] != 6 || tn.Kinds[kindPrivate] != 8 || len(tn.Targets) != 4 {
		t.Errorf("fleet: %+v, targets %+v", tn.Kinds, tn.Targets)
	}
	var md, txt bytes.Buffer
	if err := res.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if err := res.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"### Against the target", "tenancy ÷ baseline", "drover bench --runners 20 --jobs 8 --owners 4 --sharing mixed"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	if !strings.Contains(txt.String(), "tenancy ÷ baseline") {
		t.Errorf("text report:\n%s", txt.String())
	}
	t.Logf("\n%s", md.String())
}

// Every route of the mixed layout is runnable by its target runner and by
// no idle one's label; the kinds come in the stated shares.
func TestMixedLayout(t *testing.T) {
	l, err := mixedLayout(1000, 100, 1)
	if err != nil {
		t.Fatal(err)
	}
	count := map[string]int{}
	owners := map[string]int{}
	var targets []benchRunner
	for _, r := range l.runners {
		count[r.kind]++
		owners[r.owner]++
		if r.target {
			targets = append(targets, r)
		}
		switch {
		case r.kind == kindHub && r.owner != "":
			t.Errorf("hub-wide runner %s belongs to %s, not the admin", r.name, r.owner)
		case r.kind == kindUsers && (len(r.users) < 1 || len(r.users) > 3 || slices.Contains(r.users, r.owner)):
			t.Errorf("runner %s is shared with %v (owner %s)", r.name, r.users, r.owner)
		case r.kind == kindProject && (len(l.members[r.project]) < 2 || !slices.Contains(l.members[r.project], r.owner)):
			t.Errorf("runner %s is shared with project %s of members %v", r.name, r.project, l.members[r.project])
		}
	}
	if count[kindPrivate] != 400 || count[kindUsers] != 300 || count[kindProject] != 200 || count[kindHub] != 100 {
		t.Errorf("kinds: %v", count)
	}
	if len(owners) != 101 || owners[""] != 100 || owners["owner-000"] != 9 {
		t.Errorf("owners: %d (admin %d, owner-000 %d)", len(owners), owners[""], owners["owner-000"])
	}
	if len(targets) != 10 || len(l.routes) != 10 {
		t.Fatalf("%d targets, %d routes", len(targets), len(l.routes))
	}
	for i, rt := range l.routes {
		if rt.project != "" && !slices.Contains(l.members[rt.project], rt.user) {
			t.Errorf("route %d: %s is not a member of %s", i, rt.user, rt.project)
		}
		ok := false
		for _, tg := range targets {
			if tg.kind == rt.via && l.mayRun(tg, rt.user, rt.project) {
				ok = true
			}
		}
		if !ok {
			t.Errorf("route %d (%+v): no %s target may run it", i, rt, rt.via)
		}
	}
	again, _ := mixedLayout(1000, 100, 1)
	if !slices.EqualFunc(l.runners, again.runners, func(a, b benchRunner) bool {
		return a.name == b.name && a.kind == b.kind && slices.Equal(a.users, b.users) && a.project == b.project
	}) {
		t.Error("the same seed gave another layout")
	}
}

func TestParseGoStats(t *testing.T) {
	const full = `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 2011
# HELP go_memstats_heap_inuse_bytes Number of heap bytes that are in use.
go_memstats_heap_inuse_bytes 3.5766272e+07
go_memstats_heap_alloc_bytes 1.2e+07
go_memstats_stack_inuse_bytes 2.1495808e+07
go_memstats_stack_sys_bytes 9e+07
`
	got, err := parseGoStats(full)
	if err != nil {
		t.Fatal(err)
	}
	if want := (GoStats{HeapInuse: 35766272, StackInuse: 21495808, Goroutines: 2011}); *got != want {
		t.Errorf("got %+v, want %+v", *got, want)
	}
	for name, text := range map[string]string{
		"missing":   "go_goroutines 3\ngo_memstats_heap_inuse_bytes 10\n",
		"malformed": "go_goroutines many\ngo_memstats_heap_inuse_bytes 10\ngo_memstats_stack_inuse_bytes 5\n",
		"empty":     "",
	} {
		if s, err := parseGoStats(text); err == nil {
			t.Errorf("%s: got %+v, want an error", name, s)
		}
	}
}

func TestHelpHasFlag(t *testing.T) {
	const help = `Flags:
      --listen string            address (default "127.0.0.1:8080")
      --metrics-listen string    serve Prometheus metrics at /metrics on this address too
      --metrics-token-file string`
	for flag, want := range map[string]bool{"metrics-listen": true, "listen": true, "metrics": false, "metrics-token": false, "burst": false} {
		if got := helpHasFlag(help, flag); got != want {
			t.Errorf("helpHasFlag(--%s) = %v, want %v", flag, got, want)
		}
	}
}

func TestOptionsCheckBurst(t *testing.T) {
	for name, o := range map[string]Options{
		"negative":        {Runners: []int{10}, Burst: -1},
		"with owners":     {Runners: []int{10}, Burst: 5, Owners: 2},
		"no idle runners": {Runners: []int{1}, Burst: 5},
	} {
		o.Binary = "drover"
		if err := o.normalize(); err == nil {
			t.Errorf("%s: %+v accepted", name, o)
		}
	}
	o := Options{Binary: "drover", Runners: []int{1, 10}, Burst: 5}
	if err := o.normalize(); err != nil {
		t.Errorf("a burst with 9 idle runners: %v", err)
	}
}

// A burst's figures come from the offers and finishes the fleet logged:
// rates over the last offer and the last finish, each job's queueing from
// its own submit.
func TestBurstSummary(t *testing.T) {
	var l burstLog
	l.init()
	begin := time.Unix(1000, 0)
	ids := []string{"j1", "j2", "j3", "j4"}
	starts := make([]time.Time, len(ids))
	for i, id := range ids {
		starts[i] = begin.Add(time.Duration(i) * 10 * time.Millisecond)
		l.offers[id] = starts[i].Add(time.Duration(i+1) * 100 * time.Millisecond)
		l.done[id] = l.offers[id].Add(5 * time.Millisecond)
	}
	b, err := l.summarize(begin, ids, starts)
	if err != nil {
		t.Fatal(err)
	}
	if b.Jobs != 4 || b.Dispatched != 430*time.Millisecond || b.Completed != 435*time.Millisecond ||
		b.Offer.P50 != 200*time.Millisecond || b.Offer.P99 != 400*time.Millisecond {
		t.Errorf("summary %+v", b)
	}
	if r := b.DispatchRate(); r < 9.30 || r > 9.31 {
		t.Errorf("dispatch rate %.3f, want 4 jobs / 0.43 s", r)
	}
	delete(l.done, "j3")
	if _, err := l.summarize(begin, ids, starts); err == nil {
		t.Error("a job that never finished was summarized")
	}
}

// wait returns once every job finished, and fails at the first refusal.
func TestBurstWait(t *testing.T) {
	var l burstLog
	l.init()
	ids := []string{"a", "b", "c"}
	for _, id := range ids {
		l.offered(id)
	}
	go func() {
		for _, id := range ids {
			l.finished(id)
		}
	}()
	if err := l.wait(context.Background(), ids); err != nil {
		t.Fatalf("wait: %v", err)
	}

	var refused burstLog
	refused.init()
	refusal := errors.New("the hub refused f-x")
	go refused.failed(refusal)
	if err := refused.wait(context.Background(), []string{"x"}); !errors.Is(err, refusal) {
		t.Fatalf("wait after a refusal: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := new(burstLog).wait(ctx, []string{"x"}); !errors.Is(err, context.Canceled) {
		t.Fatalf("wait with an ended context: %v", err)
	}
}

func TestCommandTakesOneFormat(t *testing.T) {
	cmd := Command()
	cmd.SetArgs([]string{"--markdown", "--json"})
	cmd.SetOut(new(bytes.Buffer))
	cmd.SetErr(new(bytes.Buffer))
	if err := cmd.Execute(); err == nil || !strings.Contains(err.Error(), "give one") {
		t.Fatalf("--markdown --json: %v", err)
	}
}

// TestBenchProfileSmoke runs a profile's steps at a tiny size: a burst at
// each runner count with the hub's statements counted, and a hub restart
// the whole fleet comes back from. It checks that every figure was
// produced, never a speed.
func TestBenchProfileSmoke(t *testing.T) {
	bin, ctx := smokeSetup(t)
	pr, err := profileNamed("quick")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Binary: bin, Dir: t.TempDir()}
	given := map[string]bool{"runners": true, "jobs": true, "burst": true, "idle": true, "settle": true, "abuse": true}
	o.Runners, o.Jobs, o.Burst, o.Idle, o.Settle, o.Abuse = []int{2, 4}, 3, 6, time.Second, 200*time.Millisecond, 5
	pr.apply(&o, func(f string) bool { return given[f] })
	var progress bytes.Buffer
	o.Progress = &progress
	res, err := Run(ctx, o)
	if err != nil {
		t.Fatalf("bench: %v\nprogress:\n%s", err, progress.String())
	}
	if res.Profile != "quick" || res.Poll != nil {
		t.Errorf("profile %q, polling baseline %v: want quick, none", res.Profile, res.Poll)
	}
	if len(res.Bursts) != 2 || res.Bursts[0].Runners != 2 || res.Bursts[1].Runners != 4 {
		t.Fatalf("bursts: %+v", res.Bursts)
	}
	for _, b := range res.Bursts {
		if b.Jobs != 6 || b.CompleteRate() <= 0 || b.Statements <= 0 {
			t.Errorf("burst with %d runners: %+v", b.Runners, b)
		}
	}
	if rc := res.Reconnect; rc == nil || rc.Runners != 3 || rc.All < rc.Down || rc.Down <= 0 || rc.Refused != 0 {
		t.Errorf("reconnect: %+v", res.Reconnect)
	}
	if ab := res.Abuse; ab == nil || ab.Slow != 5 || ab.Churned == 0 || ab.Quiet.P99 <= 0 || ab.Churn.P99 <= 0 || ab.Slowed.P99 <= 0 || ab.FDs[2] <= ab.FDs[0] {
		t.Errorf("abuse: %+v; want every phase timed, the slow clients' descriptors counted", res.Abuse)
	}
	if m := res.Memory[1]; m.Added != 2 || m.Connect <= 0 {
		t.Errorf("connect time not measured: %+v", m)
	}
	var md bytes.Buffer
	if err := res.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"### Summary (profile quick)", "burst rate with 4 runners ÷ with 2", "hub restart: all 3 runners", "statements per burst job",
		"GET /api/v1/jobs p99 quiet / a runner churning / 5 slow clients", "### The API under hostile clients"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
}

func TestProfiles(t *testing.T) {
	if _, err := profileNamed("nope"); err == nil || !strings.Contains(err.Error(), "idle10k") {
		t.Errorf("unknown profile: %v; want an error naming the profiles", err)
	}
	pr, err := profileNamed("idle10k")
	if err != nil {
		t.Fatal(err)
	}
	o := Options{Binary: "drover", Jobs: 7}
	pr.apply(&o, func(f string) bool { return f == "jobs" })
	if err := o.normalize(); err != nil {
		t.Fatal(err)
	}
	if o.maxRunners() != 10000 || o.Jobs != 7 || !o.NoPoll || !o.BurstEach || !o.Reconnect || o.Burst != 0 {
		t.Errorf("idle10k with --jobs 7: %+v", o)
	}
	for name, o := range map[string]Options{
		"burst each, one runner": {Runners: []int{1, 10}, Burst: 5, BurstEach: true},
		"restart, no idle":       {Runners: []int{1}, Reconnect: true},
		"negative abuse":         {Runners: []int{1}, Abuse: -1},
	} {
		o.Binary = "drover"
		if err := o.normalize(); err == nil {
			t.Errorf("%s: %+v accepted", name, o)
		}
	}
}
