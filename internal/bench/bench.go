// Package bench measures drover's core loop against a real hub: dispatch
// latency from a submit returning to the agent process running, the hub's
// memory per idle connected runner, and the hub's CPU time with idle runners
// connected, each beside the same measurement for the 1 s polling loop the
// runner gateway replaced. `drover bench` (Command) runs it and prints a
// report for docs/benchmarks.md.
//
// The hub runs as a separate process (`drover hub`), so its resident memory
// and CPU time are read from /proc/PID apart from the bench's own. The bench
// process plays every runner at the protocol level over loopback WebSockets;
// it raises its open file limit to the hard limit (the hub inherits it).
// Linux only.
package bench

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"drover/internal/retry"
)

// Options configure a run. Zero values take the defaults in brackets.
type Options struct {
	Binary       string        // drover binary to run `hub` from (required)
	Runners      []int         // connected runner counts to measure latency at [1, 100, 1000]
	Jobs         int           // latency samples per runner count [200]
	Idle         time.Duration // CPU measurement window [60s]
	PollInterval time.Duration // interval of the polling baseline [1s]
	Settle       time.Duration // wait after connecting before reading memory [5s]
	Dir          string        // where the hubs' data directories go [the system temp dir]
	NoPoll       bool          // skip the polling baseline (and the no-client floor)
	Progress     io.Writer     // progress lines [discarded]
	// Burst > 0 adds a burst of that many jobs, submitted at once, for the
	// idle runners to take once the CPU window is over (see Burst).
	Burst int
	// Owners > 0 runs the tenancy comparison instead (see runTenancy):
	// dispatch latency at the largest Runners count with the runners owned
	// by that many users and shared as Sharing says, beside the same fleet
	// owned by the admin, in one run. Memory, idle CPU and the polling
	// baseline are not measured then.
	Owners  int
	Sharing string // [SharingMixed], the only mix so far

	// Profile names the settings a --profile gave (profiles), "" for none.
	Profile string
	// BurstEach measures the burst at every runner count (the idle runners
	// of that count take it), instead of once at the largest.
	BurstEach bool
	// Reconnect restarts the hub after the CPU window and measures the
	// idle fleet's return (Reconnect).
	Reconnect bool
	// Abuse > 0 measures the API under hostile clients after the CPU
	// window, with that many slow clients (see Abuse).
	Abuse int
	// Database, a postgres:// URL of an empty database, keeps the measured
	// hub's state in Postgres (`drover hub --db`); the polling baseline's
	// hub stays on SQLite. Not with Owners.
	Database string
}

const warmupJobs = 5

func (o *Options) normalize() error {
	if o.Binary == "" {
		return errors.New("bench: no drover binary given")
	}
	if len(o.Runners) == 0 {
		o.Runners = []int{1, 100, 1000}
	}
	rs := slices.Clone(o.Runners)
	slices.Sort(rs)
	o.Runners = slices.Compact(rs)
	if o.Runners[0] < 1 {
		return fmt.Errorf("bench: runner counts must be at least 1 (the target runner), got %d", o.Runners[0])
	}
	if o.Jobs == 0 {
		o.Jobs = 200
	}
	if o.Jobs < 1 {
		return fmt.Errorf("bench: --jobs must be at least 1")
	}
	if o.Idle == 0 {
		o.Idle = 60 * time.Second
	}
	if o.PollInterval == 0 {
		o.PollInterval = time.Second
	}
	if o.Settle == 0 {
		o.Settle = 5 * time.Second
	}
	if o.Idle < 0 || o.PollInterval < 0 || o.Settle < 0 {
		return errors.New("bench: durations must not be negative")
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	switch {
	case o.Owners < 0:
		return errors.New("bench: --owners must not be negative")
	case o.Owners == 0 && o.Sharing != "":
		return errors.New("bench: --sharing needs --owners")
	case o.Owners > 0 && o.Sharing == "":
		o.Sharing = SharingMixed
	}
	switch {
	case o.Burst < 0:
		return errors.New("bench: --burst must not be negative")
	case o.Abuse < 0:
		return errors.New("bench: --abuse must not be negative")
	case o.Abuse > 0 && o.Owners > 0:
		return errors.New("bench: --abuse is not measured with --owners")
	case o.Database != "" && o.Owners > 0:
		return errors.New("bench: --db is not measured with --owners")
	case o.Burst > 0 && o.Owners > 0:
		return errors.New("bench: --burst is not measured with --owners")
	case o.BurstEach && o.Burst > 0 && o.Runners[0] < 2:
		return errors.New("bench: a burst at every runner count needs idle runners at each: every --runners count at least 2")
	case o.Reconnect && o.maxRunners() < 2:
		return errors.New("bench: the hub restart needs idle runners: --runners at least 2")
	case o.Burst > 0 && o.maxRunners() < 2:
		return errors.New("bench: --burst needs idle runners to take the jobs: --runners at least 2")
	}
	if o.Owners > 0 && o.Sharing != SharingMixed {
		return fmt.Errorf("bench: --sharing %q: the only mix is %q", o.Sharing, SharingMixed)
	}
	return nil
}

func (o *Options) maxRunners() int { return o.Runners[len(o.Runners)-1] }

// Result is everything one run measured.
type Result struct {
	Command   string        // a command line that repeats the run
	Machine   Machine       //
	Heartbeat time.Duration // the hub's heartbeat interval (from welcome)
	IdleBeat  time.Duration // the hub's idle heartbeat interval (from welcome; 0: none)
	Postgres  bool          // the measured hub kept its state in Postgres (--db)
	Settle    time.Duration // wait before each memory reading
	NoFile    uint64        // the bench's open file limit
	Latency   []Latency     // one row per runner count
	Memory    []Memory      // one row per runner count
	IdleCPU   CPU           // the largest runner count, idle, over Options.Idle
	Poll      *Polling      // nil with NoPoll
	Burst     *Burst        // nil without Options.Burst; with BurstEach, the largest count's
	Profile   string        // Options.Profile
	Bursts    []Burst       // with Options.BurstEach, one per runner count
	Reconnect *Reconnect    // nil without Options.Reconnect
	Abuse     *Abuse        // nil without Options.Abuse
	// HubMetrics is whether the hub served its Prometheus metrics
	// (--metrics-listen), from which Memory's Go figures come.
	HubMetrics bool
	Tenancy    *Tenancy // the tenancy comparison (Options.Owners); then nothing else is measured
	// Failed is why the run stopped short (empty: it did not); what it
	// measured before is reported all the same.
	Failed string `json:",omitempty"`
}

// Machine describes where the run happened.
type Machine struct {
	Date      time.Time
	NProc     int
	CPUModel  string
	Kernel    string
	MemTotal  string
	GoBench   string // Go that built the bench
	GoHub     string // Go that built the hub binary
	DataFS    string // filesystem of the hub's data (SQLite fsyncs on every commit)
	ClockTick int64
	LoadStart string // /proc/loadavg (1, 5, 15 min) when the run started
	LoadEnd   string // and when it ended: other work on the machine skews CPU and latency
}

// Latency is dispatch latency at one runner count: from POST /api/v1/jobs
// returning to the agent process's own start timestamp.
type Latency struct {
	Runners                  int // connected runners: the target plus idle ones
	Jobs                     int // submitted
	Completed                int // seen completed through the API afterwards
	P50, P90, P99, Max, Mean time.Duration
	SubmitP50                time.Duration // the submit call's round trip
	// The same latency in stages (they add up per job):
	Offer  Stage // submit returned → offer at the runner (hub: wake, read the queue, offer transaction)
	Accept Stage // offer → the hub's ok to accept at the runner (hub: accept transaction)
	Claim  Stage // ok → claim durable in the runner's journal (runner side)
	Start  Stage // claim → the agent process running (fork/exec)
}

// Stage is the median and 99th percentile of one stage of dispatch.
type Stage struct{ P50, P99 time.Duration }

func stageOf(ds []time.Duration) Stage {
	s := summarize(ds)
	return Stage{P50: s.p50, P99: s.p99}
}

// Memory is the hub's resident memory before and after idle runners were
// added to reach Runners connections.
type Memory struct {
	Runners int           // connected after the step
	Added   int           // idle runners connected in the step
	Connect time.Duration // connecting them, first dial → last welcome
	Before  int64         // hub VmRSS before the step, bytes
	After   int64         // hub VmRSS after the step settled, bytes
	// The hub's Go runtime figures at the same moments (nil without
	// Result.HubMetrics).
	GoBefore, GoAfter *GoStats
}

// PerRunner is the step's RSS growth per added runner in bytes (0 if none were added).
func (m Memory) PerRunner() float64 {
	if m.Added == 0 {
		return 0
	}
	return float64(m.After-m.Before) / float64(m.Added)
}

// GoPerRunner is the step's growth of the hub's heap in use, goroutine
// stacks and goroutines per added runner (ok false if not measured or
// none were added).
func (m Memory) GoPerRunner() (heap, stack, goroutines float64, ok bool) {
	if m.Added == 0 || m.GoBefore == nil || m.GoAfter == nil {
		return 0, 0, 0, false
	}
	n := float64(m.Added)
	return float64(m.GoAfter.HeapInuse-m.GoBefore.HeapInuse) / n, float64(m.GoAfter.StackInuse-m.GoBefore.StackInuse) / n,
		float64(m.GoAfter.Goroutines-m.GoBefore.Goroutines) / n, true
}

// CPU is the hub's CPU time (user + system) over a window.
type CPU struct {
	Clients int
	Window  time.Duration
	Used    time.Duration
	Events  int64 // heartbeats (runners) or requests (pollers) the hub got in the window
}

// Percent is CPU use as a percentage of one core.
func (c CPU) Percent() float64 {
	if c.Window <= 0 {
		return 0
	}
	return 100 * c.Used.Seconds() / c.Window.Seconds()
}

// Polling is the same hub measured with polling clients instead of runners,
// in a fresh hub process.
type Polling struct {
	Clients  int
	Interval time.Duration
	Floor    CPU   // the fresh hub with no clients at all, over the same window
	BaseRSS  int64 // hub VmRSS before the clients started
	RSS      int64 // hub VmRSS with every client polling
	CPU      CPU
	Failed   int64 // requests that failed in the window
}

// PerClient is hub RSS growth per polling client in bytes.
func (p Polling) PerClient() float64 {
	if p.Clients == 0 {
		return 0
	}
	return float64(p.RSS-p.BaseRSS) / float64(p.Clients)
}

// Run measures, and returns what it measured; WriteMarkdown and WriteText
// format it. A run that fails part way returns its error and, once it has
// begun measuring, what it measured before with the error in Failed.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.normalize(); err != nil {
		return nil, err
	}
	bin, err := filepath.Abs(o.Binary)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	o.Binary = bin
	// Per runner: one WebSocket in the bench, one in the hub (same limit,
	// inherited); pollers come later, after the runners are gone.
	need := uint64(o.maxRunners()) + uint64(o.Abuse) + 256
	if o.Owners > 0 {
		need += uint64(o.maxRunners()) // two hubs at once
	}
	limit, err := raiseNoFile(need)
	if err != nil {
		return nil, fmt.Errorf("bench: %w", err)
	}
	root, err := os.MkdirTemp(o.Dir, "drover-bench-")
	if err != nil {
		return nil, fmt.Errorf("bench: create data directory: %w", err)
	}
	defer os.RemoveAll(root)

	res := &Result{Command: o.command(), Profile: o.Profile, Settle: o.Settle, NoFile: limit, Machine: machineInfo(root, o.Binary),
		HubMetrics: o.Owners == 0 && hubHasMetrics(ctx, o.Binary)}
	err = runAll(ctx, o, root, res)
	res.Machine.LoadEnd = loadAvg()
	if err != nil {
		res.Failed = err.Error()
	}
	return res, err
}

// runAll runs the measurements o asks for into res.
func runAll(ctx context.Context, o Options, root string, res *Result) error {
	if o.Owners > 0 {
		return runTenancy(ctx, o, root, res)
	}
	if err := runPush(ctx, o, filepath.Join(root, "push"), res); err != nil {
		return err
	}
	if !o.NoPoll {
		return runPoll(ctx, o, filepath.Join(root, "poll"), res)
	}
	return nil
}

// command renders the options as a `drover bench` command line.
func (o *Options) command() string {
	if o.Owners > 0 {
		s := fmt.Sprintf("drover bench --runners %d --jobs %d --owners %d --sharing %s", o.maxRunners(), o.Jobs, o.Owners, o.Sharing)
		if o.Settle != 5*time.Second {
			s += fmt.Sprintf(" --settle %s", o.Settle)
		}
		return s
	}
	rs := make([]string, len(o.Runners))
	for i, n := range o.Runners {
		rs[i] = fmt.Sprint(n)
	}
	s := fmt.Sprintf("drover bench --runners %s --jobs %d --idle %s", strings.Join(rs, ","), o.Jobs, o.Idle)
	if o.PollInterval != time.Second {
		s += fmt.Sprintf(" --poll-interval %s", o.PollInterval)
	}
	if o.Settle != 5*time.Second {
		s += fmt.Sprintf(" --settle %s", o.Settle)
	}
	if o.NoPoll {
		s += " --no-poll"
	}
	if o.Burst > 0 {
		s += fmt.Sprintf(" --burst %d", o.Burst)
	}
	if o.Abuse > 0 {
		s += fmt.Sprintf(" --abuse %d", o.Abuse)
	}
	if o.Profile != "" {
		// The profile's own settings are the flags above; this says so.
		s = fmt.Sprintf("drover bench --profile %s  # = %s", o.Profile, s)
	}
	return s
}

func progress(o Options, format string, args ...any) {
	fmt.Fprintf(o.Progress, "%s bench: "+format+"\n", append([]any{time.Now().Format("15:04:05")}, args...)...)
}

// sleep waits d or until ctx ends.
func sleep(ctx context.Context, d time.Duration) error {
	if err := retry.Sleep(ctx, d); err != nil {
		return fmt.Errorf("bench interrupted: %w", err)
	}
	return nil
}

// runPush measures the design under test: runners connected over the
// gateway, jobs pushed to them.
func runPush(ctx context.Context, o Options, dir string, res *Result) (err error) {
	most := o.maxRunners()
	progress(o, "starting %s hub (data in %s)", o.Binary, dir)
	hp, err := startHub(ctx, o.Binary, dir, res.Machine.ClockTick, res.HubMetrics, o.Database)
	if err != nil {
		return err
	}
	defer func() {
		if serr := hp.stop(); err == nil && serr != nil {
			err = serr
		}
	}()
	api := newAPIClient(hp.url, hp.admin)

	progress(o, "approving %d runner tokens", most)
	names := make([]string, most)
	names[0] = "bench-target"
	for i := 1; i < most; i++ {
		names[i] = fmt.Sprintf("bench-idle-%04d", i)
	}
	tokens, err := approveRunners(ctx, api, names)
	if err != nil {
		return err
	}

	tgt, err := dialTarget(ctx, hp.url, tokens[:1], names[:1], filepath.Join(filepath.Dir(dir), "journal"))
	if err != nil {
		return err
	}
	defer tgt.close()
	res.Heartbeat = tgt.welcome.HeartbeatInterval.D()
	res.IdleBeat = tgt.welcome.IdleHeartbeatInterval.D()
	res.Postgres = o.Database != ""
	progress(o, "warming up with %d jobs", warmupJobs)
	for range warmupJobs {
		if _, err := tgt.runJob(ctx, api); err != nil {
			return fmt.Errorf("warm-up: %w", err)
		}
	}

	fl := newFleet(ctx, hp.url)
	defer fl.close()
	if err := sleep(ctx, o.Settle); err != nil {
		return err
	}
	for _, n := range o.Runners {
		before, err := hp.rss()
		if err != nil {
			return err
		}
		goBefore, err := hp.goStats(ctx)
		if err != nil {
			return err
		}
		have := 1 + fl.size()
		var took time.Duration
		if n > have {
			progress(o, "connecting %d idle runners (%d connected in all)", n-have, n)
			t0 := time.Now()
			if err := fl.connect(ctx, tokens[have:n]); err != nil {
				return err
			}
			took = time.Since(t0)
			if err := sleep(ctx, o.Settle); err != nil {
				return err
			}
		}
		after, err := hp.rss()
		if err != nil {
			return err
		}
		goAfter, err := hp.goStats(ctx)
		if err != nil {
			return err
		}
		res.Memory = append(res.Memory, Memory{Runners: n, Added: n - have, Connect: took, Before: before, After: after, GoBefore: goBefore, GoAfter: goAfter})

		progress(o, "%d jobs, one at a time, with %d runners connected", o.Jobs, n)
		lat, err := measureLatency(ctx, tgt, api, n, o.Jobs)
		if err != nil {
			return err
		}
		res.Latency = append(res.Latency, lat)
		if err := checkFleet(hp, fl); err != nil {
			return err
		}
		if o.BurstEach && o.Burst > 0 {
			b, err := burstAt(ctx, o, hp, api, fl, n)
			if err != nil {
				return err
			}
			res.Bursts = append(res.Bursts, b)
			res.Burst = &res.Bursts[len(res.Bursts)-1]
		}
	}

	if err := sleep(ctx, o.Settle); err != nil {
		return err
	}
	progress(o, "measuring hub CPU with %d idle runners for %s", most, o.Idle)
	c, err := measureCPU(ctx, hp, o.Idle, func() int64 { return fl.heartbeats.Load() + tgt.hb.Load() })
	if err != nil {
		return err
	}
	c.Clients = most
	res.IdleCPU = c
	if err := checkFleet(hp, fl); err != nil {
		return err
	}
	if o.Abuse > 0 {
		ab, err := measureAbuse(ctx, o, hp, api)
		if err != nil {
			return err
		}
		res.Abuse = &ab
		if err := checkFleet(hp, fl); err != nil {
			return err
		}
	}
	if o.Reconnect {
		rc, err := measureReconnect(ctx, o, hp, fl)
		if err != nil {
			return err
		}
		res.Reconnect = &rc
		if err := checkFleet(hp, fl); err != nil {
			return err
		}
	}
	if o.Burst == 0 || o.BurstEach {
		return nil
	}
	b, err := burstAt(ctx, o, hp, api, fl, most)
	if err != nil {
		return err
	}
	res.Burst = &b
	return nil
}

// burstAt runs a burst for the fleet's idle runners with runners connected
// in all, counting the hub's statements over it.
func burstAt(ctx context.Context, o Options, hp *hubProc, api *apiClient, fl *fleet, runners int) (Burst, error) {
	progress(o, "a burst of %d jobs, submitted at once, for the %d idle runners", o.Burst, fl.size())
	st0, err := hp.statements(ctx)
	if err != nil {
		return Burst{}, err
	}
	b, err := runBurst(ctx, api, fl, o.Burst)
	if err != nil {
		return b, err
	}
	b.Runners, b.Statements = runners, -1
	if st1, err := hp.statements(ctx); err != nil {
		return b, err
	} else if st0 >= 0 && st1 >= 0 {
		b.Statements = st1 - st0
	}
	return b, checkFleet(hp, fl)
}

// checkFleet fails if the hub died or dropped an idle runner.
func checkFleet(hp *hubProc, fl *fleet) error {
	if err := hp.alive(); err != nil {
		return err
	}
	if n := fl.lost.Load(); n > 0 {
		return fmt.Errorf("the hub dropped %d idle runner connection(s): %s", n, hp.logTail())
	}
	if n := fl.offers.Load(); n > 0 {
		return fmt.Errorf("idle runners got %d offer(s); jobs should only go to the target runner", n)
	}
	return nil
}

func measureLatency(ctx context.Context, tgt *target, api *apiClient, runners, jobs int) (Latency, error) {
	lat := Latency{Runners: runners, Jobs: jobs}
	var dispatch, submit, offer, accept, claim, start []time.Duration
	for range jobs {
		s, err := tgt.runJob(ctx, api)
		if err != nil {
			return lat, fmt.Errorf("latency with %d runners: %w", runners, err)
		}
		dispatch, submit = append(dispatch, s.dispatch), append(submit, s.submit)
		offer, accept, claim, start = append(offer, s.offer), append(accept, s.accept), append(claim, s.claim), append(start, s.start)
		var v struct {
			State string `json:"state"`
		}
		if err := api.call(ctx, "GET", "/jobs/"+s.job, nil, &v); err != nil {
			return lat, fmt.Errorf("check job %s: %w", s.job, err)
		}
		if v.State == "completed" {
			lat.Completed++
		}
	}
	st := summarize(dispatch)
	lat.P50, lat.P90, lat.P99, lat.Max, lat.Mean = st.p50, st.p90, st.p99, st.max, st.mean
	lat.SubmitP50 = summarize(submit).p50
	lat.Offer, lat.Accept, lat.Claim, lat.Start = stageOf(offer), stageOf(accept), stageOf(claim), stageOf(start)
	return lat, nil
}

// measureCPU reads the hub's CPU time across a window; events counts what
// the hub was sent meanwhile.
func measureCPU(ctx context.Context, hp *hubProc, window time.Duration, events func() int64) (CPU, error) {
	c0, err := hp.cpu()
	if err != nil {
		return CPU{}, err
	}
	e0, t0 := events(), time.Now()
	if err := sleep(ctx, window); err != nil {
		return CPU{}, err
	}
	c1, err := hp.cpu()
	if err != nil {
		return CPU{}, err
	}
	return CPU{Window: time.Since(t0), Used: c1 - c0, Events: events() - e0}, nil
}

// runPoll measures the design the gateway replaced, in a fresh hub: first
// the hub with no clients (the floor), then with polling clients.
func runPoll(ctx context.Context, o Options, dir string, res *Result) (err error) {
	n := o.maxRunners()
	progress(o, "starting a fresh hub for the polling baseline")
	hp, err := startHub(ctx, o.Binary, dir, res.Machine.ClockTick, false, "")
	if err != nil {
		return err
	}
	defer func() {
		if serr := hp.stop(); err == nil && serr != nil {
			err = serr
		}
	}()
	api := newAPIClient(hp.url, hp.admin)
	names := make([]string, n)
	for i := range names {
		names[i] = fmt.Sprintf("bench-poll-%04d", i)
	}
	progress(o, "approving %d runner tokens", n)
	tokens, err := approveRunners(ctx, api, names)
	if err != nil {
		return err
	}
	p := &Polling{Clients: n, Interval: o.PollInterval}
	if err := sleep(ctx, o.Settle); err != nil {
		return err
	}
	progress(o, "measuring hub CPU with no clients for %s", o.Idle)
	if p.Floor, err = measureCPU(ctx, hp, o.Idle, func() int64 { return 0 }); err != nil {
		return err
	}
	if p.BaseRSS, err = hp.rss(); err != nil {
		return err
	}
	progress(o, "starting %d clients polling every %s", n, o.PollInterval)
	pl := startPollers(ctx, hp.url, tokens, o.PollInterval)
	defer pl.stop()
	if err := sleep(ctx, max(o.Settle, 2*o.PollInterval)); err != nil {
		return err
	}
	if p.RSS, err = hp.rss(); err != nil {
		return err
	}
	progress(o, "measuring hub CPU with %d polling clients for %s", n, o.Idle)
	failed0 := pl.failed.Load()
	if p.CPU, err = measureCPU(ctx, hp, o.Idle, pl.ok.Load); err != nil {
		return err
	}
	p.CPU.Clients = n
	p.Failed = pl.failed.Load() - failed0
	res.Poll = p
	return hp.alive()
}
