// Package chaos runs a replayable fault campaign against real drover
// processes: a hub (or several on one Postgres) and several runners of one binary, the runners talking
// to the hub through a proxy that cuts connections and delays, duplicates
// and drops WebSocket frames, while the campaign kills, terminates and
// pauses runners, kills and restarts the hub, fills disks (as root, when
// asked), and submits jobs with and without idempotency keys. Everything random (the jobs, the schedule of faults,
// which submissions carry a key, which unknown jobs are retried) comes from
// one seed, so a failing campaign is run again with the same schedule by
// passing its seed. The processes' own timing is not the seed's: a replay
// is the same plan, not the same interleaving.
//
// Afterwards the checker reads the hub's store and every runner's journal and
// asserts what drover promises: every acknowledged submission exists once,
// nothing ran twice unless its owner retried it, every completed job's log
// is byte-exact, nothing is still running for a job that ended, and every
// unknown outcome is explained by a killed (or stopped) runner.
package chaos

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"drover/internal/apitypes"
	"drover/internal/auth"
	"drover/internal/childproc"
	"drover/internal/client"
	"drover/internal/job"
	"drover/internal/runner"
)

// Fault names, as --faults takes them.
const (
	FaultCut       = "cut"        // close every connection through the proxy
	FaultDelay     = "delay"      // hold one frame back up to 800 ms
	FaultDuplicate = "duplicate"  // deliver one frame twice
	FaultDrop      = "drop"       // lose one frame, and its connection
	FaultDropReply = "drop-reply" // lose one hub reply after the hub applied the request, and the connection
	FaultKill      = "kill"       // SIGKILL a runner; restart it later
	FaultTerm      = "term"       // SIGTERM a runner; restart it once it exited
	FaultHubKill   = "hub-kill"   // SIGKILL the hub; restart it on the same data
	FaultPause     = "pause"      // SIGSTOP a runner for 1-22 s (past its lease at times), then SIGCONT
	FaultHubPause  = "hub-pause"  // SIGSTOP the hub for 1-15 s, then SIGCONT
	FaultDisk      = "disk"       // fill the hub's or a runner's disk (a small tmpfs; root only), free it later
)

// DefaultFaults returns the faults a campaign injects unless told
// otherwise: every one but disk, which needs root for its tmpfs mounts and
// is left out until the full-disk handling (issue 10, part 1) lands.
func DefaultFaults() []string {
	return []string{FaultCut, FaultDelay, FaultDuplicate, FaultDrop, FaultDropReply, FaultKill, FaultTerm, FaultHubKill, FaultPause, FaultHubPause}
}

// faultWeight is how often a fault comes up in a schedule (0: no such
// fault).
func faultWeight(f string) int {
	switch f {
	case FaultDelay, FaultDuplicate:
		return 6
	case FaultDropReply:
		return 4
	case FaultCut, FaultDrop:
		return 3
	case FaultKill, FaultTerm, FaultHubKill, FaultDisk:
		return 2
	case FaultPause, FaultHubPause:
		return 1
	}
	return 0
}

// Options configure a campaign. Zero values take the defaults in brackets.
type Options struct {
	Binary   string        // drover binary for the hub and the runners (required)
	Dir      string        // where the hub's and runners' files go (required; kept)
	Seed     uint64        // 0: pick one
	Jobs     int           // jobs submitted [60]
	Runners  int           // runner processes [3]
	Slots    int           // slots per runner [2]
	Duration time.Duration // how long faults are injected; jobs are submitted in its first 80% [45s]
	Settle   time.Duration // longest wait for every job to end once faults stop [2m]
	Faults   []string      // [DefaultFaults]
	DB       string        // the hub's --db (a postgres:// URL); "" keeps SQLite in its data directory
	Hubs     int           // hub processes on DB (more than one needs DB) [1]
	Progress io.Writer     // progress lines [discarded]
}

// NewSeed picks a seed for a new campaign (never 0, which means "pick
// one"; below 2^63, so that every shell and flag parser takes it).
func NewSeed() uint64 { return rand.Uint64()>>1 | 1 }

func (o *Options) normalize() error {
	if o.Binary == "" || o.Dir == "" {
		return errors.New("chaos: a binary and a directory are required")
	}
	if o.Seed == 0 {
		o.Seed = NewSeed()
	}
	if o.Jobs == 0 {
		o.Jobs = 60
	}
	if o.Runners == 0 {
		o.Runners = 3
	}
	if o.Slots == 0 {
		o.Slots = 2
	}
	if o.Duration == 0 {
		o.Duration = 45 * time.Second
	}
	if o.Hubs == 0 {
		o.Hubs = 1
	}
	if o.Hubs > 1 && o.DB == "" {
		return errors.New("chaos: several hubs share one Postgres database: --hubs needs --db")
	}
	if o.Settle == 0 {
		o.Settle = 2 * time.Minute
	}
	if o.Faults == nil {
		o.Faults = DefaultFaults()
	}
	if o.Progress == nil {
		o.Progress = io.Discard
	}
	if o.Jobs < 1 || o.Runners < 1 || o.Slots < 1 || o.Hubs < 1 || o.Duration <= 0 || o.Settle <= 0 {
		return errors.New("chaos: jobs, runners, slots, hubs, duration and settle must be positive")
	}
	for _, f := range o.Faults {
		if faultWeight(f) == 0 {
			return fmt.Errorf("chaos: unknown fault %q (known: %s, %s)", f, strings.Join(DefaultFaults(), ", "), FaultDisk)
		}
	}
	return nil
}

// hubArgs is the hub's timing for a campaign: short enough that lost
// runners and offers resolve within it, long enough that a runner
// restarted after a kill or a reconnect after a cut is back before its
// lease runs out. With several hubs a killed leader's term lapses well
// within a lease. The lease is 15 s, not 10: a runner whose follower hub
// is paused notices within about 3.5 s and must be attached to another hub
// before its last renewal's lease ends (a follower's stall gives its
// runners no extra time), and with 10 s that left about 3 s for a dial, a
// hello and a write, which a loaded machine could take (TestCampaignOnThreeHubs
// saw such an attempt lost). db is the --db URL without its password.
func hubArgs(db string, hubs int) []string {
	args := []string{"--lease", "15s", "--heartbeat", "1s", "--offer-timeout", "5s"}
	if db != "" {
		args = append(args, "--db", db)
	}
	if hubs > 1 {
		args = append(args, "--hub-ttl", "3s")
	}
	return args
}

// hubDB splits a --db URL into what goes in the hub's argv and what goes
// in its environment: argv is readable by every local user, so a password
// travels as PGPASSWORD (which pgx reads), the URL's own or the one the
// campaign was given in its environment.
func hubDB(db string) (arg string, env []string, err error) {
	if db == "" {
		return "", nil, nil
	}
	pw, hasPW := os.LookupEnv("PGPASSWORD")
	if strings.Contains(db, "://") {
		u, err := url.Parse(db)
		if err != nil {
			return "", nil, errors.New("chaos: --db is not a URL") // the parse error would quote the password
		}
		if p, ok := u.User.Password(); ok {
			pw, hasPW = p, true
			u.User = url.User(u.User.Username())
			db = u.String()
		}
	}
	if hasPW {
		env = []string{"PGPASSWORD=" + pw}
	}
	return db, env, nil
}

// event is one planned fault.
type event struct {
	At     time.Duration // from the start of the fault phase
	Fault  string
	Target int           // runner index, for runner faults; for disk, -1 is the hub's; hub (or its proxy) index, for hub and frame faults
	Pause  time.Duration // how long the process stays down; the delay of a delayed frame
	Beats  bool          // a frame fault a heartbeat may take
}

// plan is everything a seed decides.
type plan struct {
	jobs   []jobSpec
	submit []time.Duration // job i's submission time
	events []event
}

// makePlan derives the campaign's jobs and fault schedule from the seed.
// It follows which processes are down so that it never kills what is not
// running.
func makePlan(o Options) plan {
	r := rand.New(rand.NewPCG(o.Seed, 0x5eed))
	var p plan
	for i := range o.Jobs {
		p.jobs = append(p.jobs, newJobSpec(o.Seed, i))
		p.submit = append(p.submit, time.Duration(r.Int64N(int64(o.Duration)*8/10+1)))
	}
	total := 0
	for _, f := range o.Faults {
		total += faultWeight(f)
	}
	if total == 0 {
		return p
	}
	downUntil := make([]time.Duration, o.Runners)
	fullUntil := make([]time.Duration, o.Runners+1) // disks: the hub's, then the runners'
	hubDownUntil := make([]time.Duration, o.Hubs)
	for at := time.Duration(0); ; {
		at += 300*time.Millisecond + time.Duration(r.Int64N(int64(900*time.Millisecond)))
		if at >= o.Duration {
			break
		}
		n := r.IntN(total)
		var f string
		for _, name := range o.Faults {
			if n -= faultWeight(name); n < 0 {
				f = name
				break
			}
		}
		e := event{At: at, Fault: f, Beats: r.IntN(4) == 0}
		switch f {
		case FaultDelay:
			e.Pause = time.Duration(50+r.IntN(750)) * time.Millisecond
			e.Target = pickHub(r, o.Hubs)
		case FaultKill, FaultTerm:
			e.Target = r.IntN(o.Runners)
			e.Pause = time.Duration(200+r.IntN(2800)) * time.Millisecond
			if downUntil[e.Target] > at {
				continue
			}
			downUntil[e.Target] = at + e.Pause + 5*time.Second // a SIGTERMed runner takes its time
		case FaultPause:
			e.Target = r.IntN(o.Runners)
			// Up to 22 s: past the campaign's 15 s lease at times.
			e.Pause = time.Duration(1000+r.IntN(21000)) * time.Millisecond
			if downUntil[e.Target] > at {
				continue
			}
			downUntil[e.Target] = at + e.Pause + time.Second
		case FaultDisk:
			e.Target = r.IntN(o.Runners+1) - 1
			e.Pause = time.Duration(500+r.IntN(3500)) * time.Millisecond
			if fullUntil[e.Target+1] > at {
				continue
			}
			fullUntil[e.Target+1] = at + e.Pause + time.Second
		case FaultHubPause:
			e.Pause = time.Duration(1000+r.IntN(14000)) * time.Millisecond
			e.Target = pickHub(r, o.Hubs)
			if hubDownUntil[e.Target] > at {
				continue
			}
			hubDownUntil[e.Target] = at + e.Pause + time.Second
		case FaultHubKill:
			e.Pause = time.Duration(100+r.IntN(1900)) * time.Millisecond
			e.Target = pickHub(r, o.Hubs)
			if hubDownUntil[e.Target] > at {
				continue
			}
			hubDownUntil[e.Target] = at + e.Pause + 3*time.Second
		case FaultCut, FaultDrop, FaultDropReply, FaultDuplicate:
			e.Target = pickHub(r, o.Hubs) // whose proxy
		}
		p.events = append(p.events, e)
	}
	return p
}

// pickHub picks one of n hubs; with one it draws nothing, so that a
// one-hub seed plans what it always did.
func pickHub(r *rand.Rand, n int) int {
	if n == 1 {
		return 0
	}
	return r.IntN(n)
}

// submission is what the campaign knows of one job it submitted.
type submission struct {
	Spec  jobSpec
	Acked bool   // the hub answered with a job
	JobID string // the job it answered with
	Tries int
	Err   string // the last failure, when not acknowledged
}

// kill is one runner the campaign SIGKILLed (or that needed a SIGKILL
// after SIGTERM), or stopped (SIGSTOP) from At to Until: the only
// explanations of an unknown outcome.
type kill struct {
	Runner string
	At     time.Time
	Until  time.Time // zero for a kill
}

// campaign is one run in progress.
type campaign struct {
	o       Options
	log     *slog.Logger
	plan    plan
	hubs    []*hubProc // hubs[0] made the admin user
	proxies []*proxy   // proxies[i] in front of hubs[i]
	admins  []*client.Client

	mu       sync.Mutex
	runners  []*runnerProc
	subs     []submission
	kills    []kill
	fills    []kill // a runner's disk held full, from the fill to the free
	injected map[string]int
	retried  map[string]bool // job id → retried by the campaign
	mounts   []string        // small disks mounted for the disk fault
}

func (c *campaign) progress(format string, args ...any) {
	fmt.Fprintf(c.o.Progress, "chaos: "+format+"\n", args...)
}

func (c *campaign) count(fault string) {
	c.mu.Lock()
	c.injected[fault]++
	c.mu.Unlock()
}

// Run runs a campaign and checks it. The error is for a campaign that
// could not run; what the checker found is in the Result.
func Run(ctx context.Context, o Options) (*Result, error) {
	if err := o.normalize(); err != nil {
		return nil, err
	}
	fmt.Fprintf(o.Progress, "chaos: seed %d (replay with --seed %d)\n", o.Seed, o.Seed)
	if err := os.MkdirAll(o.Dir, 0o700); err != nil {
		return nil, fmt.Errorf("make the campaign directory: %w", err)
	}
	lf, err := os.Create(filepath.Join(o.Dir, "campaign.log"))
	if err != nil {
		return nil, fmt.Errorf("create the campaign log: %w", err)
	}
	defer lf.Close()
	c := &campaign{o: o, log: slog.New(slog.NewTextHandler(lf, &slog.HandlerOptions{Level: slog.LevelDebug})),
		plan: makePlan(o), injected: map[string]int{}, retried: map[string]bool{}}
	c.log.Info("campaign", "seed", o.Seed, "hubs", o.Hubs, "jobs", o.Jobs, "runners", o.Runners, "duration", o.Duration, "faults", o.Faults, "events", len(c.plan.events))
	defer c.unmountAll()
	defer c.stopAll()
	start := time.Now()
	if err := c.setUp(ctx); err != nil {
		return nil, err
	}
	c.progress("%d hubs, %d jobs, %d runners × %d slots, %s of faults (%d planned: %s); files in %s",
		o.Hubs, o.Jobs, o.Runners, o.Slots, o.Duration, len(c.plan.events), planSummary(c.plan.events), o.Dir)
	faultStart := time.Now()
	var wg sync.WaitGroup
	subCtx, cancelSubs := context.WithTimeout(ctx, o.Duration+o.Settle)
	defer cancelSubs()
	for i := range c.plan.jobs {
		wg.Add(1)
		go func() { defer wg.Done(); c.submit(subCtx, i, faultStart.Add(c.plan.submit[i])) }()
	}
	watchCtx, stopWatch := context.WithCancel(ctx)
	watched := make(chan struct{})
	go func() { defer close(watched); c.retryUnknowns(watchCtx) }()
	if err := c.inject(ctx, faultStart); err != nil {
		stopWatch()
		return nil, err
	}
	c.progress("faults done; restarting what is down and waiting for every job to end")
	if err := c.heal(ctx); err != nil {
		stopWatch()
		return nil, err
	}
	wg.Wait()
	stuck := c.settle(ctx)
	stopWatch()
	<-watched
	end := time.Now()
	c.stopAll()
	res, err := c.check(ctx)
	if err != nil {
		return nil, err
	}
	res.Stuck = stuck
	res.Wall = end.Sub(start)
	res.Faulting = o.Duration
	for _, p := range c.proxies {
		for k, v := range p.appliedCounts() {
			res.Injected[k] += v
		}
	}
	return res, nil
}

func planSummary(events []event) string {
	n := map[string]int{}
	for _, e := range events {
		n[e.Fault]++
	}
	keys := make([]string, 0, len(n))
	for k := range n {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var parts []string
	for _, k := range keys {
		parts = append(parts, fmt.Sprintf("%s %d", k, n[k]))
	}
	return strings.Join(parts, ", ")
}

// setUp starts the hubs, a proxy in front of each and the runners
// (approved by the admin, logged in through the first proxy, given every
// proxy).
func (c *campaign) setUp(ctx context.Context) error {
	db, env, err := hubDB(c.o.DB)
	if err != nil {
		return err
	}
	var urls []string
	for i := range c.o.Hubs {
		addr, err := childproc.FreeAddr()
		if err != nil {
			return err
		}
		name := "hub"
		if i > 0 {
			name = fmt.Sprintf("hub-%d", i)
		}
		h := &hubProc{bin: c.o.Binary, name: name, dir: filepath.Join(c.o.Dir, name), addr: addr, db: c.o.DB, env: env, args: hubArgs(db, c.o.Hubs)}
		if i > 0 {
			h.admin = c.hubs[0].admin // the admin user is in the shared database
		}
		if err := c.mount(h.dir, hubDisk); err != nil {
			return err
		}
		if err := h.start(ctx); err != nil {
			return err
		}
		a, err := client.New(h.url(), h.admin, client.WithTimeout(30*time.Second))
		if err != nil {
			return fmt.Errorf("hub client: %w", err)
		}
		p, err := newProxy(addr, c.log)
		if err != nil {
			return err
		}
		c.hubs, c.admins, c.proxies = append(c.hubs, h), append(c.admins, a), append(c.proxies, p)
		urls = append(urls, p.url())
	}
	for i := range c.o.Runners {
		r := &runnerProc{name: fmt.Sprintf("chaos-%d", i), home: filepath.Join(c.o.Dir, fmt.Sprintf("runner-%d", i)),
			bin: c.o.Binary, hubURL: strings.Join(urls, ","), slots: c.o.Slots}
		if err := c.mount(r.home, runnerDisk); err != nil {
			return err
		}
		tok := auth.NewToken(auth.PrefixRunner)
		if _, err := c.admins[0].ApproveRunner(ctx, apitypes.ApproveRequest{Name: r.name, Key: auth.Hash(tok)}); err != nil {
			return fmt.Errorf("approve runner %s: %w", r.name, err)
		}
		if err := runner.SaveLogin(r.home, runner.Login{Hub: urls[0], Name: r.name, Token: tok}); err != nil {
			return fmt.Errorf("log runner %s in: %w", r.name, err)
		}
		if err := r.start(); err != nil {
			return err
		}
		c.runners = append(c.runners, r)
	}
	return c.waitConnected(ctx, len(c.runners))
}

// jobs lists the jobs in state s from the first hub that answers (another
// may be down), and that hub's client.
func (c *campaign) jobs(ctx context.Context, s job.State) (apitypes.JobList, *client.Client, error) {
	var err error
	for _, a := range c.admins {
		var l apitypes.JobList
		if l, err = a.Jobs(ctx, client.JobFilter{State: s, Limit: 1000}); err == nil {
			return l, a, nil
		}
	}
	return apitypes.JobList{}, nil, err
}

// waitConnected waits until n runners are connected.
func (c *campaign) waitConnected(ctx context.Context, n int) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	for {
		l, err := c.admins[0].Runners(ctx) // all hubs run when it is called
		if err == nil {
			up := 0
			for _, v := range l.Runners {
				if v.Connected {
					up++
				}
			}
			if up >= n {
				return nil
			}
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for %d connected runners: %w (see the runner logs in %s)", n, ctx.Err(), c.o.Dir)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// submit submits job i at its time, as a user would: a keyed submission is
// repeated with its key until the hub answers; an unkeyed one is tried
// once, since repeating it could create a second job.
func (c *campaign) submit(ctx context.Context, i int, at time.Time) {
	spec := c.plan.jobs[i]
	select {
	case <-ctx.Done():
		return
	case <-time.After(time.Until(at)):
	}
	s := submission{Spec: spec}
	req := apitypes.SubmitRequest{Agent: "exec", Args: spec.argv()}
	if spec.Keyed {
		req.Key = spec.key()
	}
	for {
		s.Tries++
		v, _, err := c.admins[i%len(c.admins)].Submit(ctx, req) // spread over the hubs
		if err == nil {
			s.Acked, s.JobID, s.Err = true, v.ID, ""
			break
		}
		s.Err = err.Error()
		if !spec.Keyed || client.Code(err) != "" || ctx.Err() != nil {
			break // an answer is the hub's decision; unkeyed is tried once
		}
		select {
		case <-ctx.Done():
		case <-time.After(500 * time.Millisecond):
		}
	}
	c.log.Info("submitted", "index", i, "keyed", spec.Keyed, "acked", s.Acked, "job", s.JobID, "tries", s.Tries, "err", s.Err)
	c.mu.Lock()
	c.subs = append(c.subs, s)
	c.mu.Unlock()
}

// inject runs the fault schedule.
func (c *campaign) inject(ctx context.Context, start time.Time) error {
	var restarts sync.WaitGroup
	defer restarts.Wait()
	for _, e := range c.plan.events {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(time.Until(start.Add(e.At))):
		}
		c.log.Info("fault", "fault", e.Fault, "target", e.Target, "pause", e.Pause)
		switch e.Fault {
		case FaultCut:
			c.proxies[e.Target].cut()
			c.count(e.Fault)
		case FaultDelay:
			c.proxies[e.Target].arm(armed{kind: faultDelay, delay: e.Pause, beats: e.Beats})
		case FaultDuplicate:
			c.proxies[e.Target].arm(armed{kind: faultDuplicate, beats: e.Beats})
		case FaultDrop:
			c.proxies[e.Target].arm(armed{kind: faultDrop, beats: e.Beats})
		case FaultDropReply:
			c.proxies[e.Target].arm(armed{kind: faultDropReply})
		case FaultKill, FaultTerm:
			r, p := c.take(e.Target)
			if p == nil {
				continue // still down from an earlier fault
			}
			c.count(e.Fault)
			restarts.Add(1)
			go func() {
				defer restarts.Done()
				defer c.release(r)
				if e.Fault == FaultKill {
					c.noteKill(r.name)
					p.kill()
				} else if p.terminate(30 * time.Second) {
					c.noteKill(r.name)
				}
				time.Sleep(e.Pause)
				c.mu.Lock()
				defer c.mu.Unlock()
				if err := r.start(); err != nil {
					c.log.Error("restart runner", "runner", r.name, "err", err)
				}
			}()
		case FaultDisk:
			dir := c.hubs[0].dir
			if e.Target >= 0 {
				dir = c.runners[e.Target].home
			}
			c.count(e.Fault)
			restarts.Add(1)
			go func() {
				defer restarts.Done()
				from := time.Now()
				n, err := fill(dir)
				c.log.Info("disk full", "dir", dir, "filled", n, "err", err)
				time.Sleep(e.Pause)
				if err := free(dir); err != nil {
					c.log.Error("free disk", "err", err)
				}
				if e.Target >= 0 {
					c.mu.Lock()
					c.fills = append(c.fills, kill{Runner: c.runners[e.Target].name, At: from, Until: time.Now()})
					c.mu.Unlock()
				}
			}()
		case FaultPause:
			r, p := c.take(e.Target)
			if p == nil {
				continue
			}
			c.count(e.Fault)
			restarts.Add(1)
			go func() {
				defer restarts.Done()
				defer c.release(r)
				from := time.Now()
				p.signal(syscall.SIGSTOP)
				time.Sleep(e.Pause)
				p.signal(syscall.SIGCONT)
				c.mu.Lock()
				c.kills = append(c.kills, kill{Runner: r.name, At: from, Until: time.Now()})
				c.mu.Unlock()
			}()
		case FaultHubPause:
			c.count(e.Fault)
			p := c.hubs[e.Target].p // the plan kills no hub while it is paused
			restarts.Add(1)
			go func() {
				defer restarts.Done()
				p.signal(syscall.SIGSTOP)
				time.Sleep(e.Pause)
				p.signal(syscall.SIGCONT)
			}()
		case FaultHubKill:
			c.count(e.Fault)
			h := c.hubs[e.Target]
			h.p.kill()
			time.Sleep(e.Pause)
			if err := h.start(ctx); err != nil {
				return fmt.Errorf("restart the hub: %w", err)
			}
		}
	}
	return nil
}

// take hands runner i and its process to one fault until release: nil
// when it is down or another fault has it (the schedule keeps faults of
// one runner apart, but a late executor can bunch them up).
func (c *campaign) take(i int) (*runnerProc, *proc) {
	c.mu.Lock()
	defer c.mu.Unlock()
	r := c.runners[i]
	if r.faulted || !r.alive() {
		return r, nil
	}
	r.faulted = true
	return r, r.p
}

func (c *campaign) release(r *runnerProc) {
	c.mu.Lock()
	r.faulted = false
	c.mu.Unlock()
}

func (c *campaign) noteKill(name string) {
	c.mu.Lock()
	c.kills = append(c.kills, kill{Runner: name, At: time.Now()})
	c.mu.Unlock()
}

// mount puts a small disk on dir when the campaign fills disks.
func (c *campaign) mount(dir string, size int64) error {
	if !slices.Contains(c.o.Faults, FaultDisk) {
		return nil
	}
	if err := mountSmall(dir, size); err != nil {
		return fmt.Errorf("chaos: %w", err)
	}
	c.mounts = append(c.mounts, dir)
	return nil
}

// unmountAll removes the small disks (their files go with them; the
// processes' logs are outside them).
func (c *campaign) unmountAll() {
	for _, dir := range c.mounts {
		if err := unmount(dir); err != nil {
			c.log.Error("unmount", "err", err)
		}
	}
}

// heal makes sure the hub and every runner run again after the faults.
func (c *campaign) heal(ctx context.Context) error {
	for _, h := range c.hubs {
		if !h.p.alive() {
			if err := h.start(ctx); err != nil {
				return fmt.Errorf("restart the hub: %w", err)
			}
		}
	}
	c.mu.Lock()
	for _, r := range c.runners {
		if !r.alive() {
			if err := r.start(); err != nil {
				c.mu.Unlock()
				return err
			}
		}
	}
	c.mu.Unlock()
	return c.waitConnected(ctx, len(c.runners))
}

// retryUnknowns plays the owner: a job found unknown is retried once if
// the seed says so.
func (c *campaign) retryUnknowns(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
		c.retryUnknownOnce(ctx)
	}
}

func (c *campaign) retryUnknownOnce(ctx context.Context) {
	l, admin, err := c.jobs(ctx, job.Unknown)
	if err != nil {
		return
	}
	for _, v := range l.Jobs {
		i, ok := c.indexOf(v.Args)
		c.mu.Lock()
		done := c.retried[v.ID]
		c.mu.Unlock()
		if !ok || done || !c.plan.jobs[i].Retry {
			continue
		}
		_, err := admin.Retry(ctx, v.ID)
		// Retry is not repeated: a failure to hear the answer may still
		// have retried it, which the checker reads from the job's events.
		c.mu.Lock()
		c.retried[v.ID] = true
		c.mu.Unlock()
		c.count("retry")
		c.log.Info("retried unknown job", "job", v.ID, "index", i, "err", err)
	}
}

// indexOf is the campaign index of a job from its argv.
func (c *campaign) indexOf(args []string) (int, bool) {
	tag := tagOf(args)
	for i, s := range c.plan.jobs {
		if s.Tag == tag {
			return i, true
		}
	}
	return 0, false
}

// settle waits until no job is queued, offered, running or waiting, and
// returns those still so when Settle runs out.
func (c *campaign) settle(ctx context.Context) []string {
	deadline := time.Now().Add(c.o.Settle)
	for {
		c.retryUnknownOnce(ctx)
		var left []string
		for _, s := range []job.State{job.Queued, job.Offered, job.Running, job.Waiting} { // none when settled
			l, _, err := c.jobs(ctx, s)
			if err != nil {
				left = append(left, "(list "+string(s)+": "+err.Error()+")")
				continue
			}
			for _, v := range l.Jobs {
				left = append(left, fmt.Sprintf("%s %s (%s)", v.ID, v.State, v.Waiting))
			}
		}
		if len(left) == 0 || time.Now().After(deadline) || ctx.Err() != nil {
			return left
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// stopAll stops the runners (SIGTERM) and the hub; it may be called again.
func (c *campaign) stopAll() {
	c.mu.Lock()
	var ps []*proc
	for _, r := range c.runners {
		if r.alive() {
			ps = append(ps, r.p)
		}
	}
	c.mu.Unlock()
	var wg sync.WaitGroup
	for _, p := range ps {
		wg.Add(1)
		go func() { defer wg.Done(); p.terminate(30 * time.Second) }()
	}
	wg.Wait()
	for _, p := range c.proxies {
		p.close()
	}
	for _, h := range c.hubs {
		if h.p != nil {
			h.p.terminate(30 * time.Second)
		}
	}
}
