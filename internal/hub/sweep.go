package hub

import (
	"context"
	"slices"
	"time"

	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/store"
	"drover/internal/tick"
)

// ledgerKeep is how long applied request ids are remembered. A runner
// resends within its reconnect backoff (about a minute), so a day is ample.
const ledgerKeep = 24 * time.Hour

// sweepLoop expires leases, offers and questions. It runs when kicked (a
// runner left, an offer still holding its slot at its timeout (watchOffer),
// a question with an expiry was asked: each schedules a kick for when its
// deadline passes), at the next lease deadline of an offline runner the
// last sweep saw, and on a slow safety timer. Each hub expires the stale
// offers of the runners it holds; only the leader does what no
// connection's hub can: leases of runners offline everywhere, question
// expiry, pruning.
func (h *Hub) sweepLoop(ctx context.Context) {
	t := time.NewTimer(tick.Next(time.Now(), h.cfg.Sweep))
	defer t.Stop()
	next := time.NewTimer(h.cfg.Sweep)
	defer next.Stop()
	var lastPrune time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			t.Reset(tick.Next(time.Now(), h.cfg.Sweep))
		case <-next.C:
		case <-h.sweepWake:
		}
		if due := h.sweepPass(ctx, &lastPrune); !due.IsZero() {
			next.Reset(max(due.Sub(h.now()), 0) + 50*time.Millisecond)
		}
	}
}

// sweepPass is one pass of sweepLoop: the next lease deadline it saw (zero
// for none); lastPrune is when the leader last pruned.
func (h *Hub) sweepPass(ctx context.Context, lastPrune *time.Time) time.Time {
	lead := h.leading()
	due, err := h.sweep(ctx, lead)
	if err != nil && ctx.Err() == nil {
		h.logFailed("sweep", err)
	}
	if !lead {
		return due
	}
	if err := h.expireQuestions(ctx); err != nil && ctx.Err() == nil {
		h.logFailed("expire questions", err)
	}
	if now := h.now(); now.Sub(*lastPrune) > time.Hour {
		*lastPrune = now
		if err := h.store.Write(ctx, func(tx store.Tx) error {
			if err := tx.PruneHubs(now.Add(-hubKeep)); err != nil {
				return err
			}
			return tx.PruneRequests(now.Add(-ledgerKeep))
		}); err != nil && ctx.Err() == nil {
			h.logFailed("prune request ledger and hubs gone", err)
		}
	}
	return due
}

// hubKeep is how long the row of a hub that stopped heartbeating is kept
// (not listed: it is not live) before the leader removes it.
const hubKeep = time.Hour

func (h *Hub) kickSweep() {
	select {
	case h.sweepWake <- struct{}{}:
	default:
	}
}

func (h *Hub) connected(runnerID string) bool {
	return h.reg.get(runnerID) != nil
}

// sweep expires the offers that went unaccepted too long on the runners
// this hub holds and, on the leader (lead), the offers and leases of
// runners no live hub holds. It returns the next lease deadline of such a
// runner's attempt (zero when none), for the leader to sweep again then.
func (h *Hub) sweep(ctx context.Context, lead bool) (time.Time, error) {
	var (
		active []store.Attempt
		held   map[string]string // runner id → live hub holding it
	)
	if err := h.store.Read(ctx, func(tx store.Tx) error {
		var err error
		if active, err = tx.ActiveAttempts(); err != nil {
			return err
		}
		// Who holds a runner matters only for attempts of runners not
		// connected here: an idle fleet (nothing active) or one hub's own
		// runners cost no read of every held runner (a row per runner,
		// at every sweep).
		if !slices.ContainsFunc(active, func(a store.Attempt) bool { return !h.connected(a.RunnerID) }) {
			return nil
		}
		held, err = tx.HeldRunners(h.liveSince(h.now()))
		return err
	}); err != nil {
		return time.Time{}, err
	}
	now := h.now()
	var due time.Time
	for _, a := range active {
		local := h.connected(a.RunnerID)
		if !local && (held[a.RunnerID] != "" || !lead) {
			continue // another live hub's runner (its hub sweeps its offers), or the leader's duty
		}
		offerStale := a.State == job.AttemptOffered && now.Sub(a.OfferedAt) > h.cfg.OfferTimeout
		end := h.leaseEnd(a, now)
		leaseGone := !local && now.After(end)
		if !offerStale && !leaseGone {
			if !local && (due.IsZero() || end.Before(due)) {
				due = end
			}
			continue
		}
		if err := h.expire(ctx, a.ID, local); err != nil {
			return due, err
		}
	}
	return due, nil
}

// expire ends one attempt whose offer or lease ran out: an offer goes back
// to the queue; a started attempt becomes unknown and is not run again.
func (h *Hub) expire(ctx context.Context, attemptID string, online bool) error {
	var (
		a       store.Attempt
		changed bool
	)
	err := h.store.Write(ctx, func(tx store.Tx) error {
		changed = false
		var err error
		a, err = tx.Attempt(attemptID)
		if err != nil {
			return err
		}
		j, err := tx.Job(a.JobID)
		if err != nil {
			return err
		}
		now := h.now()
		switch {
		case a.State == job.AttemptOffered:
			if err := h.expireOffer(tx, &a, &j, job.ReasonOfferExpired, job.EvOfferExpired); err != nil {
				return err
			}
			changed = true
			return h.event(tx, j.ID, "offer_expired", "", "attempt %d was not accepted (runner left or too slow); back in the queue", a.Epoch)
		case a.State == job.AttemptRunning && !online && now.After(h.leaseEnd(a, now)):
			// Connected to a hub since the sweep read (its attach extends
			// the lease, but only the holder proves it is online anywhere).
			if online, err := h.onlineIn(tx, a.RunnerID); err != nil || online {
				return err
			}
			changed = true
			return h.loseAttempt(tx, a, j, job.ReasonRunnerLost, "")
		}
		return nil
	})
	if err != nil || !changed {
		return err
	}
	h.reg.removeActive(a.RunnerID, a.ID)
	h.pushOrder(a.RunnerID, func(r protocol.Runner) {
		r.Drop(protocol.DropOrder{AttemptRef: protocol.AttemptRef{Job: a.JobID, Attempt: a.ID, Epoch: a.Epoch}, Reason: "offer expired"})
	})
	h.log.Info("attempt expired", "job", a.JobID, "attempt", a.ID, "now", a.State)
	h.notify(a.JobID)
	h.kick()
	return nil
}
