package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// Targets from the issue.
const (
	targetP99       = 20 * time.Millisecond
	targetPerRunner = 64 << 10 // bytes of hub memory per idle connected runner
	// targetIdleCPU is how we read "indistinguishable from zero": under 1%
	// of one core, with the no-client floor shown beside it.
	targetIdleCPU = 1.0
)

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func kib(b float64) string { return fmt.Sprintf("%.1f KiB", b/1024) }

func mib(b int64) string { return fmt.Sprintf("%.1f MiB", float64(b)/(1<<20)) }

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "**no**"
}

// ratio renders a/b as "N×"; b == 0 means below measurement resolution
// (res), which gives a lower bound.
func ratio(a, b, res float64) string {
	switch {
	case a == 0 && b == 0:
		return "—"
	case b == 0:
		return fmt.Sprintf("> %.0f×", a/res)
	case a/b >= 10:
		return fmt.Sprintf("%.0f×", a/b)
	default:
		return fmt.Sprintf("%.2f×", a/b)
	}
}

// pollQuantile is the analytic dispatch delay of a poll loop at quantile p:
// a job submitted at a uniformly random moment waits U(0, interval) for the
// next poll. It leaves out the claim and process start that follow, so the
// polling figures are lower bounds.
func pollQuantile(interval time.Duration, p float64) time.Duration {
	return time.Duration(p * float64(interval))
}

func (r *Result) largest() (Latency, Memory) {
	var l Latency
	var m Memory
	if n := len(r.Latency); n > 0 {
		l = r.Latency[n-1]
	}
	if n := len(r.Memory); n > 0 {
		m = r.Memory[n-1]
	}
	return l, m
}

func (r *Result) interval() time.Duration {
	if r.Poll != nil {
		return r.Poll.Interval
	}
	return time.Second
}

func (r *Result) tick() time.Duration {
	if r.Machine.ClockTick <= 0 {
		return 10 * time.Millisecond
	}
	return time.Second / time.Duration(r.Machine.ClockTick)
}

// writeMachine writes the run's heading, command and machine table.
func (r *Result) writeMachine(p func(format string, args ...any)) {
	m := r.Machine
	p("## Run of %s", m.Date.Format("2006-01-02 15:04 MST"))
	p("")
	p("```")
	p("%s --markdown", r.Command)
	p("```")
	p("")
	p("| machine | |")
	p("|---|---|")
	p("| CPU | %s, %d logical CPUs |", m.CPUModel, m.NProc)
	p("| memory | %s |", m.MemTotal)
	p("| kernel | %s |", m.Kernel)
	p("| load average (1/5/15 min) | %s at the start, %s at the end (the bench's own load included) |", m.LoadStart, m.LoadEnd)
	if m.GoHub == m.GoBench {
		p("| Go | %s (hub and bench) |", m.GoBench)
	} else {
		p("| Go | hub %s, bench %s |", m.GoHub, m.GoBench)
	}
	if r.Postgres {
		p("| hub data | Postgres (`--db`), on this machine; the hub's files on %s |", m.DataFS)
	} else {
		p("| hub data | %s; SQLite in WAL mode with synchronous=FULL, so every commit fsyncs |", m.DataFS)
	}
	p("| open files | soft limit %d (the bench raises it to the hard limit; the hub inherits it) |", r.NoFile)
	p("| hub | `drover hub` as its own process, default settings: heartbeat every %s%s |", r.Heartbeat, r.idleBeat())
	p("")
}

// WriteMarkdown writes the run as a section for docs/benchmarks.md.
func (r *Result) WriteMarkdown(w io.Writer) error {
	var b strings.Builder
	m := r.Machine
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	r.writeMachine(p)
	if r.Failed != "" {
		p("**The run failed**: %s. What it measured before is below; the rest is empty.", r.Failed)
		p("")
	}
	if r.Tenancy != nil {
		r.Tenancy.writeMarkdown(p)
		_, err := io.WriteString(w, b.String())
		return err
	}
	r.writeProfile(p)
	iv := r.interval()
	l, mem := r.largest()

	p("### Against the targets")
	p("")
	p("| target | goal | measured | %s polling loop | polling ÷ gateway | met |", iv)
	p("|---|---|---|---|---|---|")
	worst := Latency{}
	for _, x := range r.Latency {
		if x.P99 >= worst.P99 {
			worst = x
		}
	}
	pp50, pp99 := pollQuantile(iv, 0.50), pollQuantile(iv, 0.99)
	p("| dispatch p99 (worst: %d runners) | ≤ %s | %s | ≥ %s (analytic) | ≥ %s | %s |", worst.Runners, ms(targetP99), ms(worst.P99),
		ms(pp99), ratio(float64(pp99), float64(worst.P99), 1), yesNo(worst.P99 <= targetP99))
	p("| dispatch p50 (%d runners) | — | %s | ≥ %s (analytic) | ≥ %s | — |", l.Runners, ms(l.P50),
		ms(pp50), ratio(float64(pp50), float64(l.P50), 1))
	pollMem, pollMemRatio := "not measured", "—"
	if r.Poll != nil {
		pollMem = kib(r.Poll.PerClient()) + " per client"
		pollMemRatio = ratio(r.Poll.PerClient(), mem.PerRunner(), 1)
	}
	p("| hub memory per idle runner (%d added) | ≤ %s | %s | %s | %s | %s |", mem.Added, kib(targetPerRunner), kib(mem.PerRunner()),
		pollMem, pollMemRatio, yesNo(mem.Added > 0 && mem.PerRunner() <= targetPerRunner))
	pollCPU, pollCPURatio := "not measured", "—"
	if r.Poll != nil {
		pollCPU = fmt.Sprintf("%.2f s (%.2f%%)", r.Poll.CPU.Used.Seconds(), r.Poll.CPU.Percent())
		pollCPURatio = ratio(float64(r.Poll.CPU.Used), float64(r.IdleCPU.Used), float64(r.tick()))
	}
	p("| hub CPU, %d idle runners, %s | ≈ 0 (< %.0f%% of a core) | %.2f s (%.3f%%) | %s | %s | %s |", r.IdleCPU.Clients, r.IdleCPU.Window.Round(time.Second),
		targetIdleCPU, r.IdleCPU.Used.Seconds(), r.IdleCPU.Percent(), pollCPU, pollCPURatio, yesNo(r.IdleCPU.Percent() < targetIdleCPU))
	p("")

	p("### Dispatch latency")
	p("")
	p("From `POST /api/v1/jobs` returning to the agent process running (its own `date +%%s%%N`), one job at a time. Each job")
	p("goes to the one runner that has the job's label, through offer → status → accept → ok → journal claim (file and")
	p("directory fsync) → fork/exec; the other runners are idle connections. Nearest-rank percentiles.")
	p("")
	p("| connected runners | jobs | completed | p50 | p90 | p99 | max | mean | submit round trip p50 |")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, x := range r.Latency {
		p("| %d | %d | %d | %s | %s | %s | %s | %s | %s |", x.Runners, x.Jobs, x.Completed, ms(x.P50), ms(x.P90), ms(x.P99), ms(x.Max), ms(x.Mean), ms(x.SubmitP50))
	}
	p("")
	p("The same, in stages (p50 / p99 of each stage on its own, so they do not add up exactly):")
	p("")
	p("| connected runners | submit → offer at runner (hub: dispatch + offer commit) | offer → accept ok (hub: accept commit) | ok → claim durable (runner fsyncs) | claim → agent running (fork/exec) |")
	p("|---:|---:|---:|---:|---:|")
	for _, x := range r.Latency {
		st := func(s Stage) string { return ms(s.P50) + " / " + ms(s.P99) }
		p("| %d | %s | %s | %s | %s |", x.Runners, st(x.Offer), st(x.Accept), st(x.Claim), st(x.Start))
	}
	p("")
	p("A %s polling loop (analytic, not measured): a job waits U(0, %s) for the next poll, so p50 %s, p90 %s, p99 %s,",
		iv, iv, ms(pp50), ms(pollQuantile(iv, 0.90)), ms(pp99))
	p("max %s, before the same claim and process start. These are lower bounds.", ms(iv))
	p("")

	p("### Hub memory")
	p("")
	p("Hub VmRSS (`/proc/PID/status`) before idle runners were added and %s after the last one connected; nothing forced", r.Settle)
	p("(no GC, no memory returned). \"Before\" of a step follows the previous step's latency jobs.")
	p("")
	p("| connected runners | added | hub RSS before | hub RSS after | per added runner |")
	p("|---:|---:|---:|---:|---:|")
	for _, x := range r.Memory {
		per := "—"
		if x.Added > 0 {
			per = kib(x.PerRunner())
		}
		p("| %d | %d | %s | %s | %s |", x.Runners, x.Added, mib(x.Before), mib(x.After), per)
	}
	p("")
	r.writeGoMemory(p)
	if r.Poll != nil {
		p("Polling baseline (fresh hub): %d clients each keeping one keep-alive connection: hub RSS %s → %s, %s per client.",
			r.Poll.Clients, mib(r.Poll.BaseRSS), mib(r.Poll.RSS), kib(r.Poll.PerClient()))
		p("")
	}

	p("### Hub CPU")
	p("")
	p("utime + stime of the hub (`/proc/PID/stat`, %d ticks/s, so a resolution of %s) over the window.", m.ClockTick, r.tick())
	p("")
	p("| hub | window | sent to the hub | CPU | %% of one core |")
	p("|---|---:|---:|---:|---:|")
	if r.Poll != nil {
		f := r.Poll.Floor
		p("| fresh hub, no clients (floor) | %s | — | %.2f s | %.3f%% |", f.Window.Round(time.Second), f.Used.Seconds(), f.Percent())
	}
	c := r.IdleCPU
	p("| %d idle runners, heartbeat every %s%s | %s | %d heartbeats | %.2f s | %.3f%% |", c.Clients, r.Heartbeat, r.idleBeat(), c.Window.Round(time.Second), c.Events, c.Used.Seconds(), c.Percent())
	if r.Poll != nil {
		pc := r.Poll.CPU
		p("| %d clients polling every %s | %s | %d requests (%d failed) | %.2f s | %.3f%% |", pc.Clients, r.Poll.Interval, pc.Window.Round(time.Second), pc.Events, r.Poll.Failed, pc.Used.Seconds(), pc.Percent())
	}
	p("")
	r.writeBurst(p)
	if r.Abuse != nil {
		r.Abuse.writeMarkdown(p)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// writeGoMemory writes the hub's Go heap beside its RSS, when its metrics
// were read.
func (r *Result) writeGoMemory(p func(format string, args ...any)) {
	if !r.HubMetrics {
		return
	}
	p("The hub's Go runtime at the same moments (its `/metrics` on `--metrics-listen`: `go_memstats_heap_inuse_bytes`,")
	p("`go_memstats_stack_inuse_bytes`, `go_goroutines`; no GC forced, so the heap includes garbage not yet collected):")
	p("")
	p("| connected runners | heap in use before | after | heap per added runner | stacks per added runner | goroutines per added runner |")
	p("|---:|---:|---:|---:|---:|---:|")
	for _, x := range r.Memory {
		if x.GoBefore == nil || x.GoAfter == nil {
			continue
		}
		heap, stack, gr, ok := x.GoPerRunner()
		if !ok {
			p("| %d | %s | %s | — | — | — |", x.Runners, mib(x.GoBefore.HeapInuse), mib(x.GoAfter.HeapInuse))
			continue
		}
		p("| %d | %s | %s | %s | %s | %.2f |", x.Runners, mib(x.GoBefore.HeapInuse), mib(x.GoAfter.HeapInuse), kib(heap), kib(stack), gr)
	}
	p("")
}

// writeBurst writes the burst section, when there was one.
func (r *Result) writeBurst(p func(format string, args ...any)) {
	bursts := r.Bursts
	if len(bursts) == 0 && r.Burst != nil {
		bursts = []Burst{*r.Burst}
	}
	if len(bursts) == 0 {
		return
	}
	p("### Burst")
	p("")
	p("Jobs (`exec true`, the idle runners' label) submitted at once by %d clients; each idle runner accepts an", burstSubmitters)
	p("offer and finishes it at once (no process). Rates are jobs over the time from the first submit to the last offer")
	p("at a runner (dispatched) and to the last finish acknowledged (completed).")
	p("")
	p("| connected runners | jobs | submitted in | dispatched in | completed in | dispatched per s | completed per s | submit → offer p50 / p99 | statements per job |")
	p("|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
	for _, bu := range bursts {
		st := "n/a"
		if bu.Statements >= 0 {
			st = fmt.Sprintf("%.1f", float64(bu.Statements)/float64(bu.Jobs))
		}
		p("| %d | %d | %s | %s | %s | %.1f | %.1f | %s / %s | %s |", bu.Runners, bu.Jobs, bu.Submitted.Round(time.Millisecond), bu.Dispatched.Round(time.Millisecond),
			bu.Completed.Round(time.Millisecond), bu.DispatchRate(), bu.CompleteRate(), ms(bu.Offer.P50), ms(bu.Offer.P99), st)
	}
	p("")
}

// WriteJSON writes the run as one JSON object (durations in nanoseconds,
// memory in bytes), for scripts.
func (r *Result) WriteJSON(w io.Writer) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	if err := enc.Encode(r); err != nil {
		return fmt.Errorf("bench: write the report as JSON: %w", err)
	}
	return nil
}

// WriteText writes a short plain summary.
func (r *Result) WriteText(w io.Writer) error {
	var b strings.Builder
	p := func(format string, args ...any) { fmt.Fprintf(&b, format+"\n", args...) }
	m := r.Machine
	p("%s", r.Command)
	p("machine: %s, %d CPUs, %s, %s, hub data on %s", m.CPUModel, m.NProc, m.Kernel, m.GoHub, m.DataFS)
	if r.Failed != "" {
		p("the run failed: %s; what it measured before:", r.Failed)
	}
	p("")
	if r.Tenancy != nil {
		r.Tenancy.writeText(p)
		_, err := io.WriteString(w, b.String())
		return err
	}
	p("dispatch latency (submit returned → agent running):")
	for _, x := range r.Latency {
		p("  %5d runners: p50 %s  p90 %s  p99 %s  max %s  (%d/%d completed)", x.Runners, ms(x.P50), ms(x.P90), ms(x.P99), ms(x.Max), x.Completed, x.Jobs)
	}
	iv := r.interval()
	p("  %s polling (analytic lower bound): p50 %s  p99 %s", iv, ms(pollQuantile(iv, 0.5)), ms(pollQuantile(iv, 0.99)))
	p("hub memory:")
	for _, x := range r.Memory {
		if x.Added > 0 {
			p("  %5d runners: RSS %s → %s, %s per added runner", x.Runners, mib(x.Before), mib(x.After), kib(x.PerRunner()))
		} else {
			p("  %5d runners: RSS %s", x.Runners, mib(x.After))
		}
	}
	for _, x := range r.Memory {
		if heap, stack, gr, ok := x.GoPerRunner(); ok {
			p("  %5d runners: Go heap in use %s → %s, %s heap, %s stacks, %.2f goroutines per added runner", x.Runners,
				mib(x.GoBefore.HeapInuse), mib(x.GoAfter.HeapInuse), kib(heap), kib(stack), gr)
		}
	}
	if r.Poll != nil {
		p("  %5d pollers: RSS %s → %s, %s per client", r.Poll.Clients, mib(r.Poll.BaseRSS), mib(r.Poll.RSS), kib(r.Poll.PerClient()))
	}
	p("hub CPU:")
	if r.Poll != nil {
		p("  no clients:            %.2f s over %s (%.3f%% of a core)", r.Poll.Floor.Used.Seconds(), r.Poll.Floor.Window.Round(time.Second), r.Poll.Floor.Percent())
	}
	p("  %5d idle runners:    %.2f s over %s (%.3f%% of a core)", r.IdleCPU.Clients, r.IdleCPU.Used.Seconds(), r.IdleCPU.Window.Round(time.Second), r.IdleCPU.Percent())
	if r.Poll != nil {
		p("  %5d pollers at %s: %.2f s over %s (%.3f%% of a core), %d requests, %d failed", r.Poll.Clients, r.Poll.Interval,
			r.Poll.CPU.Used.Seconds(), r.Poll.CPU.Window.Round(time.Second), r.Poll.CPU.Percent(), r.Poll.CPU.Events, r.Poll.Failed)
	}
	if bu := r.Burst; bu != nil {
		p("burst of %d jobs with %d runners: dispatched in %s (%.1f jobs/s), completed in %s (%.1f jobs/s); submit → offer p50 %s, p99 %s",
			bu.Jobs, bu.Runners, bu.Dispatched.Round(time.Millisecond), bu.DispatchRate(), bu.Completed.Round(time.Millisecond), bu.CompleteRate(),
			ms(bu.Offer.P50), ms(bu.Offer.P99))
	}
	if ab := r.Abuse; ab != nil {
		p("GET /api/v1/jobs p50 / p99: quiet %s / %s; a runner churning (%d connections) %s / %s; %d slow clients %s / %s; %d failed; hub descriptors %v of %s",
			ms(ab.Quiet.P50), ms(ab.Quiet.P99), ab.Churned, ms(ab.Churn.P50), ms(ab.Churn.P99), ab.Slow, ms(ab.Slowed.P50), ms(ab.Slowed.P99),
			ab.Failed, ab.FDs, limitText(ab.MaxFDs))
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// idleBeat says how seldom an idle runner heartbeats, if the hub lets it.
func (r *Result) idleBeat() string {
	if r.IdleBeat <= r.Heartbeat {
		return ""
	}
	return fmt.Sprintf(" (idle: every %s)", r.IdleBeat)
}
