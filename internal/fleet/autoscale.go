package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"
	"unicode"

	"drover/internal/protocol"
)

// Hub is what the autoscaler asks of the hub (the CLI's client).
type Hub interface {
	Demand(ctx context.Context, labels map[string]string, after uint64, wait time.Duration) (protocol.Demand, error)
	Launch(ctx context.Context, req protocol.LaunchRequest) (protocol.LaunchResponse, error)
	RevokeLaunch(ctx context.Context, id string) (protocol.LaunchView, error)
	LaunchFailure(ctx context.Context, id, reason string) error
	Runners(ctx context.Context) (protocol.RunnerList, error)
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
			a.stop(sctx, s)
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
			select {
			case <-ctx.Done():
				return nil
			case <-time.After(2 * time.Second):
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
					nextTry = now.Add(min(time.Second<<min(failures, 6), time.Minute))
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
	byName := map[string]protocol.RunnerView{}
	for _, r := range rs.Runners {
		byName[r.Name] = r
	}
	kept := live[:0]
	for _, s := range live {
		if !running[s.name] {
			a.retire(ctx, s)
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

// retire forgets a runner that exited: the target cleans up after it (a
// container is removed, its log kept) and its launch is revoked, so its
// runner token is good for nothing more.
func (a *Autoscaler) retire(ctx context.Context, s *scaled) {
	err := a.Target.Stop(ctx, s.id)
	if _, rerr := a.Hub.RevokeLaunch(ctx, s.id); rerr != nil {
		err = errors.Join(err, rerr)
	}
	if err != nil {
		a.Log.Warn("autoscale: retire an exited runner", "launch", s.id, "err", err)
		return
	}
	a.Log.Info("autoscale: runner exited", "launch", s.id, "runner", s.name)
}

// scaleDown stops up to n runners idle for their whole grace.
func (a *Autoscaler) scaleDown(ctx context.Context, live []*scaled, n int, now time.Time) []*scaled {
	kept := live[:0]
	for _, s := range live {
		if n > 0 && !s.idleSince.IsZero() && now.Sub(s.idleSince) >= a.IdleGrace {
			a.stop(ctx, s)
			n--
			continue
		}
		kept = append(kept, s)
	}
	return kept
}

func (a *Autoscaler) launch(ctx context.Context) (*scaled, error) {
	resp, err := a.Hub.Launch(ctx, protocol.LaunchRequest{Target: a.TargetName, Count: 1, Slots: a.Slots, Labels: a.Labels})
	if err != nil {
		return nil, err
	}
	spec := Spec{LaunchID: resp.ID, Hub: a.HubURL, Labels: a.Labels, Slots: a.Slots, MaxJobs: 1,
		Runners: []RunnerSpec{{Name: resp.Registrations[0].Name, Token: resp.Registrations[0].Token}}}
	if _, err := a.Target.Launch(ctx, spec); err != nil {
		sctx := context.WithoutCancel(ctx)
		_, rerr := a.Hub.RevokeLaunch(sctx, resp.ID)
		ferr := a.Hub.LaunchFailure(sctx, resp.ID, failureReason(err))
		return nil, errors.Join(err, rerr, ferr)
	}
	if err := a.Hub.LaunchFailure(ctx, resp.ID, ""); err != nil {
		a.Log.Warn("autoscale: could not clear the launch failure", "err", err)
	}
	a.Log.Info("autoscale: launched", "launch", resp.ID, "runner", spec.Runners[0].Name)
	return &scaled{id: resp.ID, name: spec.Runners[0].Name}, nil
}

func (a *Autoscaler) stop(ctx context.Context, s *scaled) {
	err := a.Target.Stop(ctx, s.id)
	if _, rerr := a.Hub.RevokeLaunch(ctx, s.id); rerr != nil {
		err = errors.Join(err, rerr)
	}
	if err != nil {
		a.Log.Warn("autoscale: stop", "launch", s.id, "err", err)
		return
	}
	a.Log.Info("autoscale: stopped an idle runner", "launch", s.id, "runner", s.name)
}

// failureReason is err as the hub takes a launch failure: one line of
// plain text (an engine's or ssh's message may hold anything), clipped.
func failureReason(err error) string {
	r := strings.Join(strings.FieldsFunc(err.Error(), func(r rune) bool { return unicode.IsSpace(r) || protocol.IsControl(r) }), " ")
	if len(r) > protocol.MaxLaunchFailureReason {
		r = strings.ToValidUTF8(r[:protocol.MaxLaunchFailureReason-3], "") + "..."
	}
	return r
}
