package hub

import (
	"context"
	"fmt"
	"sync"
	"time"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/job"
	"drover/internal/rules"
	"drover/internal/store"
)

// fleetState is what autoscalers watch: a generation that grows after
// every dispatch pass (the queue may have changed), and the latest launch
// failure of each owner (by name), which the owner's waiting jobs show. The zero value is
// ready.
type fleetState struct {
	mu       sync.Mutex
	gen      uint64
	ch       chan struct{} // closed at the next change
	failures map[string]launchFailure
}

type launchFailure struct {
	labels map[string]string
	text   string
}

// watch returns the current generation and a channel closed after it.
func (f *fleetState) watch() (<-chan struct{}, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ch == nil {
		f.ch = make(chan struct{})
	}
	return f.ch, f.gen
}

func (f *fleetState) changed() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gen++
	if f.ch != nil {
		close(f.ch)
		f.ch = nil
	}
}

// fail records (text "" clears) the owner's latest launch failure for
// jobs the launch's labels would run.
func (f *fleetState) fail(owner string, labels map[string]string, text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failures == nil {
		f.failures = map[string]launchFailure{}
	}
	if text == "" {
		delete(f.failures, owner)
		return
	}
	f.failures[owner] = launchFailure{labels: labels, text: text}
}

// annotate adds the owner's launch failure to why a job with labels waits.
func (f *fleetState) annotate(owner string, labels map[string]string, why string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	lf, ok := f.failures[owner]
	if !ok || !labelsMatch(labels, lf.labels) {
		return why
	}
	if why == "" {
		return lf.text
	}
	return why + "; " + lf.text
}

const maxDemandWait = 60 * time.Second

// WaitDemand answers how many of the caller's queued jobs runners with the
// given labels could take, at once when the generation differs from
// after, else when the queue next changes (or wait ms pass): an
// autoscaler's event, not a poll. It returns ctx's error if ctx ends first.
func (h *Hub) WaitDemand(ctx context.Context, p call.Caller, req call.DemandRequest) (apitypes.Demand, error) {
	if err := rules.CheckLabels(req.Labels); err != nil {
		return apitypes.Demand{}, call.BadRequest("labels: %v", err)
	}
	if req.WaitMS < 0 {
		return apitypes.Demand{}, call.BadRequest("wait must be milliseconds")
	}
	after, wait := req.After, min(time.Duration(req.WaitMS)*time.Millisecond, maxDemandWait)
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		ch, gen := h.fleet.watch()
		if gen != after || wait == 0 {
			n, err := h.demand(ctx, p, req.Labels)
			return apitypes.Demand{Queued: n, Generation: gen}, err
		}
		select {
		case <-ch:
		case <-timer.C:
			wait = 0
		case <-ctx.Done():
			return apitypes.Demand{}, ctx.Err()
		}
	}
}

func (h *Hub) demand(ctx context.Context, p call.Caller, labels map[string]string) (int, error) {
	n := 0
	err := h.store.Read(ctx, func(tx store.Tx) error {
		js, err := tx.Jobs(store.JobFilter{State: job.Queued, RequesterID: p.UserID, Limit: apitypes.MaxDemand})
		if err != nil {
			return err
		}
		n = 0
		for _, j := range js {
			if labelsMatch(j.Labels, labels) {
				n++
			}
		}
		return nil
	})
	return n, err
}

// RecordLaunchFailure records that a launch failed on its target (an image
// missing, a host unreachable, a host key changed): the owner's waiting
// jobs say so until a launch succeeds (an empty reason clears it). It is
// stored, so a restarted hub still says so; fleetState holds a copy for
// the job views.
func (h *Hub) RecordLaunchFailure(ctx context.Context, p call.Caller, req call.LaunchFailureRequest) error {
	if err := rules.CheckPlainText("reason", req.Reason, false); err != nil || len(req.Reason) > apitypes.MaxLaunchFailureReason {
		return call.BadRequest("reason must be at most %d bytes of plain text", apitypes.MaxLaunchFailureReason)
	}
	var l store.Launch
	var owner string
	now := h.now()
	err := h.store.Write(ctx, func(tx store.Tx) error {
		var err error
		if l, err = launchOf(tx, req.ID, p); err != nil {
			return err
		}
		owner = newNamer(tx).user(l.OwnerID)
		if req.Reason == "" {
			return tx.ClearLaunchFailure(l.OwnerID)
		}
		return tx.PutLaunchFailure(store.LaunchFailure{OwnerID: l.OwnerID, LaunchID: l.ID, Target: l.Target,
			Labels: l.Labels, Reason: req.Reason, FailedAt: now})
	})
	if err != nil {
		return fmt.Errorf("record the launch failure: %w", err)
	}
	if req.Reason != "" {
		h.log.Warn("fleet launch failed", "launch", l.ID, "target", l.Target, "reason", req.Reason)
	}
	h.fleet.fail(owner, l.Labels, launchFailureText(l.Target, req.Reason))
	return nil
}

// launchFailureText is what a waiting job shows of a launch failure ("" for none).
func launchFailureText(target, reason string) string {
	if reason == "" {
		return ""
	}
	return fmt.Sprintf("launching a runner on %s failed (an infrastructure failure, retried): %s", target, reason)
}

// loadLaunchFailures fills fleetState from the store at start.
func (h *Hub) loadLaunchFailures(ctx context.Context) error {
	return h.store.Read(ctx, func(tx store.Tx) error {
		fs, err := tx.LaunchFailures()
		if err != nil {
			return fmt.Errorf("read the launch failures: %w", err)
		}
		n := newNamer(tx)
		for _, f := range fs {
			h.fleet.fail(n.user(f.OwnerID), f.Labels, launchFailureText(f.Target, f.Reason))
		}
		return nil
	})
}
