package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"

	"drover/internal/apitypes"
	"drover/internal/retry"
	"drover/internal/rules"
)

// Hub is what the autoscaler asks of the hub (the CLI's client).
type Hub interface {
	Launcher
	Demand(ctx context.Context, labels map[string]string, after uint64, wait time.Duration) (apitypes.Demand, error)
	Runners(ctx context.Context) (apitypes.RunnerList, error)
}

// Autoscaler keeps min(Min + queued jobs its runners could run, Max - used)
// fresh runners on a target, one launch per runner. Its runners are
// ephemeral (--max-jobs 1): a used one (it took its attempt) exits after
// it, and counts as gone once the target no longer runs it. It wakes when
// the hub's queue changes (a long-poll the dispatcher answers), not on a
// clock. A launch counts from the moment it is asked for, so one queued
// job never causes two; a runner is stopped only after it was idle (no
// attempt offered or running) for IdleGrace; a failed launch is reported
// to the hub, which shows it on the waiting jobs, and retried with backoff.
type Autoscaler struct {
	Hub        Hub
	Target     Target
	TargetName string
	HubURL     string
	Min, Max   int
	Labels     map[string]string
	Slots      int
	IdleGrace  time.Duration
	Log        *slog.Logger
}

type scaled struct {
	id, name  string
	idleSince time.Time // zero while busy or not yet connected
	used      bool      // it took its one attempt: it exits after it
}

// usedExitPoll is how often a used runner's exit is looked for: the hub
// has no event for a runner process that ended.
const usedExitPoll = 500 * time.Millisecond

// demandRetry is the wait before the queue is read again after it could
// not be.
const demandRetry = 2 * time.Second

// launchRetry spaces the tries of a failing launch: 2s doubling to a minute.
func launchRetry() retry.Policy { return retry.Policy{First: 2 * time.Second, Max: time.Minute} }

// Run scales until ctx ends, then stops every runner it launched.
func (a *Autoscaler) Run(ctx context.Context) error {
	if a.Min < 0 || a.Max < 1 || a.Min > a.Max {
		return fmt.Errorf("autoscale wants 0 <= --min <= --max and --max >= 1, not %d and %d", a.Min, a.Max)
	}
	var (
		live      []*scaled
		gen       uint64
		failures  int
		nextTry   time.Time
		lastWrong error
	)
	defer func() {
		sctx := context.WithoutCancel(ctx)
		for _, s := range live {
			a.stop(sctx, s, "a runner")
		}
	}()
	wait := time.Duration(0)
	for {
		d, err := a.Hub.Demand(ctx, a.Labels, gen, wait)
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			if lastWrong == nil || lastWrong.Error() != err.Error() {
				a.Log.Warn("autoscale: cannot read the queue", "err", err)
			}
			lastWrong = err
			if retry.Sleep(ctx, demandRetry) != nil {
				return nil
			}
			continue
		}
		lastWrong = nil
		gen = d.Generation
		now := time.Now()
		var oerr error
		if live, oerr = a.observe(ctx, live, now); oerr != nil {
			a.Log.Warn("autoscale: cannot read the runners", "err", oerr)
		}
		used := 0
		for _, s := range live {
			if s.used {
				used++
			}
		}
		fresh := len(live) - used
		desired := min(a.Min+d.Queued, a.Max-used)
		switch {
		case desired > fresh && !now.Before(nextTry):
			for range desired - fresh {
				s, err := a.launch(ctx)
				if err != nil {
					failures++
					nextTry = now.Add(launchRetry().Delay(failures - 1))
					a.Log.Warn("autoscale: launch failed; retrying", "err", err, "at", nextTry.Format(time.TimeOnly))
					break
				}
				failures, nextTry = 0, time.Time{}
				live = append(live, s)
			}
		case desired < fresh:
			live = a.scaleDown(ctx, live, fresh-desired, now)
		}
		// Wake for the queue, for the next retry, or when an idle runner's
		// grace ends.
		wait = 30 * time.Second
		if !nextTry.IsZero() {
			wait = min(wait, max(time.Until(nextTry), time.Millisecond))
		}
		for _, s := range live {
			if s.used {
				wait = min(wait, usedExitPoll)
			} else if !s.idleSince.IsZero() {
				wait = min(wait, max(time.Until(s.idleSince.Add(a.IdleGrace)), time.Millisecond))
			}
		}
	}
}

// observe marks which runners are idle or used now, and drops the ones
// the target no longer runs (an ephemeral runner that took its attempt
// exited), revoking their launches.
func (a *Autoscaler) observe(ctx context.Context, live []*scaled, now time.Time) ([]*scaled, error) {
	if len(live) == 0 {
		return live, nil
	}
	rs, err := a.Hub.Runners(ctx)
	if err != nil {
		return live, err
	}
	ins, err := a.Target.List(ctx)
	if err != nil {
		return live, err
	}
	running := map[string]bool{}
	for _, in := range ins {
		running[in.Name] = running[in.Name] || in.Running
	}
	byName := map[string]apitypes.RunnerView{}
	for _, r := range rs.Runners {
		byName[r.Name] = r
	}
	kept := live[:0]
	for _, s := range live {
		if !running[s.name] {
			a.stop(ctx, s, "an exited runner")
			continue
		}
		r, ok := byName[s.name]
		if ok && r.Running > 0 {
			s.used = true
		}
		switch {
		case !ok || !r.Connected || r.Running > 0 || s.used:
			s.idleSince = time.Time{}
		case s.idleSince.IsZero():
			s.idleSince = now
		}
		kept = append(kept, s)
	}
	return kept, nil
}

// scaleDown stops up to n runners idle for their whole grace.
func (a *Autoscaler) scaleDown(ctx context.Context, live []*scaled, n int, now time.Time) []*scaled {
	kept := live[:0]
	for _, s := range live {
		if n > 0 && !s.idleSince.IsZero() && now.Sub(s.idleSince) >= a.IdleGrace {
			a.stop(ctx, s, "an idle runner")
			n--
			continue
		}
		kept = append(kept, s)
	}
	return kept
}

func (a *Autoscaler) launch(ctx context.Context) (*scaled, error) {
	resp, _, err := Start(ctx, a.Log, a.Hub, a.Target, apitypes.LaunchRequest{Target: a.TargetName, Count: 1, Slots: a.Slots, Labels: a.Labels},
		a.HubURL, 1)
	if err != nil {
		return nil, err
	}
	name := resp.Registrations[0].Name
	a.Log.Info("autoscale: launched", "launch", resp.ID, "runner", name)
	return &scaled{id: resp.ID, name: name}, nil
}

// Launcher is the hub's part of a launch.
type Launcher interface {
	Launch(ctx context.Context, req apitypes.LaunchRequest) (apitypes.LaunchResponse, error)
	RevokeLaunch(ctx context.Context, id string) (apitypes.LaunchView, error)
	LaunchFailure(ctx context.Context, id, reason string) error
}

// Start launches req's runners on t (maxJobs > 0: ephemeral), with tokens
// the hub mints. When the target fails, the launch is revoked and its
// reason reported to the hub, which shows it on the owner's waiting jobs
// (an infrastructure failure); a launch that starts clears it (logged to
// log when it cannot: the runners run all the same).
func Start(ctx context.Context, log *slog.Logger, h Launcher, t Target, req apitypes.LaunchRequest, hubURL string, maxJobs int) (apitypes.LaunchResponse, []Instance, error) {
	resp, err := h.Launch(ctx, req)
	if err != nil {
		return resp, nil, err
	}
	spec := Spec{LaunchID: resp.ID, Hub: hubURL, Labels: req.Labels, Slots: req.Slots, MaxJobs: maxJobs}
	for _, r := range resp.Registrations {
		spec.Runners = append(spec.Runners, RunnerSpec{Name: r.Name, Token: r.Token})
	}
	ins, err := t.Launch(ctx, spec)
	if err != nil {
		// Nothing of the launch may keep working: its tokens go too.
		sctx := context.WithoutCancel(ctx)
		_, rerr := h.RevokeLaunch(sctx, resp.ID)
		ferr := h.LaunchFailure(sctx, resp.ID, failureReason(err))
		return resp, nil, errors.Join(fmt.Errorf("launch on %s: %w", req.Target, err), rerr, ferr)
	}
	if err := h.LaunchFailure(ctx, resp.ID, ""); err != nil {
		log.Warn("launched, but could not clear the launch failure", "launch", resp.ID, "err", err)
	}
	return resp, ins, nil
}

// stop ends a runner (what says which): the target stops it or cleans
// up after it (a container is removed, its log kept), and its launch is
// revoked, so its runner token is good for nothing more.
func (a *Autoscaler) stop(ctx context.Context, s *scaled, what string) {
	err := a.Target.Stop(ctx, s.id)
	if _, rerr := a.Hub.RevokeLaunch(ctx, s.id); rerr != nil {
		err = errors.Join(err, rerr)
	}
	if err != nil {
		a.Log.Warn("autoscale: stop "+what, "launch", s.id, "err", err)
		return
	}
	a.Log.Info("autoscale: stopped "+what, "launch", s.id, "runner", s.name)
}

// failureReason is err as the hub takes a launch failure: one line of
// plain text (an engine's or ssh's message may hold anything), clipped.
func failureReason(err error) string {
	r := strings.Join(strings.FieldsFunc(err.Error(), func(r rune) bool { return unicode.IsSpace(r) || rules.IsControl(r) }), " ")
	if len(r) > apitypes.MaxLaunchFailureReason {
		r = strings.ToValidUTF8(r[:apitypes.MaxLaunchFailureReason-3], "") + "..."
	}
	return r
}
