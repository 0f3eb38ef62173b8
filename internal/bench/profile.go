package bench

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
)

// A profile is a named set of settings of `drover bench --profile NAME`:
// the flags it sets unless given on the command line.
type profile struct {
	name, about string
	runners     []int
	jobs        int
	idle        time.Duration
	settle      time.Duration
	burst       int
	reconnect   bool
	abuse       int
}

// profiles are the published settings (docs/benchmarks.md, "Issue 30").
// A burst is measured at every runner count, so that its ratio between
// the largest and the smallest count comes from one run; none runs the
// polling baseline.
var profiles = []profile{
	{name: "quick", about: "CI-sized: 10 and 100 runners, 20 latency jobs, a 100-job burst at each, a hub restart",
		runners: []int{10, 100}, jobs: 20, idle: 2 * time.Second, settle: time.Second, burst: 100, reconnect: true, abuse: 20},
	{name: "burst", about: "bursts that should not depend on the fleet: 2,000 jobs with 10 and with 1,000 runners connected",
		runners: []int{10, 1000}, jobs: 50, idle: 5 * time.Second, settle: 2 * time.Second, burst: 2000},
	{name: "abuse", about: "the API under hostile clients with 1,000 runners connected: a runner churning its connection, 1,000 slow clients",
		runners: []int{10, 1000}, jobs: 20, idle: 5 * time.Second, settle: 2 * time.Second, abuse: 1000},
	{name: "idle10k", about: "10,000 idle runners: connect, idle CPU and memory, a hub restart, dispatch to one among them (no burst: see burst)",
		runners: []int{10, 10000}, jobs: 100, idle: 60 * time.Second, settle: 5 * time.Second, reconnect: true},
}

func profileNamed(name string) (profile, error) {
	for _, p := range profiles {
		if p.name == name {
			return p, nil
		}
	}
	names := make([]string, len(profiles))
	for i, p := range profiles {
		names[i] = p.name
	}
	return profile{}, fmt.Errorf("bench: no profile %q; the profiles are %s", name, strings.Join(names, ", "))
}

// apply sets o from p, except what given says the command line set.
func (p profile) apply(o *Options, given func(flag string) bool) {
	o.Profile, o.NoPoll, o.BurstEach = p.name, true, true
	set := func(flag string, f func()) {
		if !given(flag) {
			f()
		}
	}
	set("runners", func() { o.Runners = slices.Clone(p.runners) })
	set("jobs", func() { o.Jobs = p.jobs })
	set("idle", func() { o.Idle = p.idle })
	set("settle", func() { o.Settle = p.settle })
	set("burst", func() { o.Burst = p.burst })
	set("abuse", func() { o.Abuse = p.abuse })
	o.Reconnect = p.reconnect
}

// Reconnect is the fleet coming back after a hub restart: the hub stopped
// (SIGTERM) and started again on the same port and data, every idle runner
// redialing as a runner does (exponential backoff from 500 ms with full
// jitter), the hub taking hellos as they come.
type Reconnect struct {
	Runners int           // idle runners connected before the restart
	Down    time.Duration // SIGTERM sent → the new hub answering the API
	All     time.Duration // SIGTERM sent → every runner connected again
	Retries int64         // dials that failed and were tried again
	Later   int64         // of those, dials the hub told when to come back (before their hello)
	Refused int64         // runners the hub refused for good (must be 0)
	// Of Retries, by how the dial was refused: nothing listening, 503 with
	// a place, 503 without one, closed with 1013 after the upgrade, other.
	NotListening, Placed, Unplaced, TryLater, Other int64
}

// measureReconnect restarts the hub and waits until the whole fleet is
// back, or until a runner is refused for good.
func measureReconnect(ctx context.Context, o Options, hp *hubProc, fl *fleet) (Reconnect, error) {
	r := Reconnect{Runners: fl.size()}
	fl.reconnect.Store(true)
	defer fl.reconnect.Store(false)
	redialed0, tries0, later0, kinds0 := fl.redialed.Load(), fl.tries.Load(), fl.toldLater.Load(), fl.refusals.load()
	progress(o, "restarting the hub with %d idle runners connected", r.Runners)
	begin := time.Now()
	if err := hp.restart(ctx); err != nil {
		return r, err
	}
	r.Down = time.Since(begin)
	for {
		back := fl.redialed.Load() - redialed0
		if int(back) >= r.Runners && fl.connected() == r.Runners {
			break
		}
		if n := fl.refused.Load(); n > 0 {
			return r, fmt.Errorf("hub restart: %d runner(s) refused for good: %s", n, hp.logTail())
		}
		if err := hp.alive(); err != nil {
			return r, err
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return r, err
		}
	}
	r.All = time.Since(begin)
	r.Retries = fl.tries.Load() - tries0
	r.Later = fl.toldLater.Load() - later0
	kinds := fl.refusals.load()
	for i, n := range []*int64{&r.NotListening, &r.Placed, &r.Unplaced, &r.TryLater, &r.Other} {
		*n = kinds[i] - kinds0[i]
	}
	return r, nil
}

// writeProfile writes the profile's summary table: the figures,
// each beside its target.
func (r *Result) writeProfile(p func(format string, args ...any)) {
	if r.Profile == "" {
		return
	}
	l, mem := r.largest()
	p("### Summary (profile %s)", r.Profile)
	p("")
	p("| measurement | measured | target |")
	p("|---|---|---|")
	if mem.Added > 0 {
		p("| connect %d idle runners (16 dialing at once) | %s | — |", mem.Added, mem.Connect.Round(time.Millisecond))
		p("| hub RSS per idle runner beyond the hub before them | %s | ≤ 32 KiB |", kib(mem.PerRunner()))
		if heap, _, _, ok := mem.GoPerRunner(); ok {
			p("| hub Go heap per idle runner (no GC forced) | %s | — |", kib(heap))
		}
	}
	p("| hub CPU with %d idle runners over %s | %.2f%% of a core | ≤ 1%% |", r.IdleCPU.Clients, r.IdleCPU.Window.Round(time.Second), r.IdleCPU.Percent())
	if rc := r.Reconnect; rc != nil {
		p("| hub restart: all %d runners connected again (hub down and up again in %s; %d dials retried, %d of them told when to come back) | %s | ≤ 60 s, none refused for good (%d refused) |",
			rc.Runners, rc.Down.Round(time.Millisecond), rc.Retries, rc.Later, rc.All.Round(time.Millisecond), rc.Refused)
		p("| hub restart: dials refused, by kind: nothing listening / 503 with a place / 503 without / 1013 after the upgrade / other | %d / %d / %d / %d / %d | — |",
			rc.NotListening, rc.Placed, rc.Unplaced, rc.TryLater, rc.Other)
	}
	p("| dispatch to one idle runner among %d, p50 / p99 | %s / %s | p99 ≤ 25 ms |", l.Runners, ms(l.P50), ms(l.P99))
	if n := len(r.Bursts); n > 0 {
		small, big := r.Bursts[0], r.Bursts[n-1]
		for _, b := range r.Bursts {
			p("| burst of %d jobs with %d runners connected: completed per s | %.1f | ≥ 300 |", b.Jobs, b.Runners, b.CompleteRate())
		}
		if n > 1 && small.CompleteRate() > 0 {
			p("| burst rate with %d runners ÷ with %d, same run | %.2f | ≥ 0.8 |", big.Runners, small.Runners, big.CompleteRate()/small.CompleteRate())
		}
		for _, b := range r.Bursts {
			if b.Statements >= 0 {
				p("| statements per burst job, %d runners | %.1f | — |", b.Runners, float64(b.Statements)/float64(b.Jobs))
			}
		}
	}
	if ab := r.Abuse; ab != nil {
		p("| GET /api/v1/jobs p99 quiet / a runner churning / %d slow clients | %s / %s / %s | reported |", ab.Slow, ms(ab.Quiet.P99), ms(ab.Churn.P99), ms(ab.Slowed.P99))
	}
	p("")
}
