package fleet

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

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

// Autoscaler keeps desired = min(Min + queued jobs its runners could run,
// Max) runners on a target, one launch per runner. It wakes when the
// hub's queue changes (a long-poll the dispatcher answers), not on a
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
}

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
		if err := a.observe(ctx, live, now); err != nil {
			a.Log.Warn("autoscale: cannot read the runners", "err", err)
		}
		desired := min(a.Min+d.Queued, a.Max)
		switch {
		case desired > len(live) && !now.Before(nextTry):
			for range desired - len(live) {
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
		case desired < len(live):
			live = a.scaleDown(ctx, live, len(live)-desired, now)
		}
		// Wake for the queue, for the next retry, or when an idle runner's
		// grace ends.
		wait = 30 * time.Second
		if !nextTry.IsZero() {
			wait = min(wait, max(time.Until(nextTry), time.Millisecond))
		}
		for _, s := range live {
			if !s.idleSince.IsZero() {
				wait = min(wait, max(time.Until(s.idleSince.Add(a.IdleGrace)), time.Millisecond))
			}
		}
	}
}

// observe marks which runners are idle now.
func (a *Autoscaler) observe(ctx context.Context, live []*scaled, now time.Time) error {
	if len(live) == 0 {
		return nil
	}
	rs, err := a.Hub.Runners(ctx)
	if err != nil {
		return err
	}
	byName := map[string]protocol.RunnerView{}
	for _, r := range rs.Runners {
		byName[r.Name] = r
	}
	for _, s := range live {
		r, ok := byName[s.name]
		switch {
		case !ok || !r.Connected || r.Running > 0:
			s.idleSince = time.Time{}
		case s.idleSince.IsZero():
			s.idleSince = now
		}
	}
	return nil
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
	spec := Spec{LaunchID: resp.ID, Hub: a.HubURL, Labels: a.Labels, Slots: a.Slots,
		Runners: []RunnerSpec{{Name: resp.Registrations[0].Name, Token: resp.Registrations[0].Token}}}
	if _, err := a.Target.Launch(ctx, spec); err != nil {
		sctx := context.WithoutCancel(ctx)
		_, rerr := a.Hub.RevokeLaunch(sctx, resp.ID)
		ferr := a.Hub.LaunchFailure(sctx, resp.ID, err.Error())
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
