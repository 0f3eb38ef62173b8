package hub

import (
	"context"
	"time"

	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/store"
)

// ledgerKeep is how long applied request ids are remembered. A runner
// resends within its reconnect backoff (about a minute), so a day is ample.
const ledgerKeep = 24 * time.Hour

// sweepLoop expires leases, offers and questions. It runs when kicked (a
// runner left, an offer was made, a question with an expiry was asked: each
// schedules a kick for when its deadline passes) and on a slow safety timer.
func (h *Hub) sweepLoop(ctx context.Context) {
	t := time.NewTicker(h.cfg.Sweep)
	defer t.Stop()
	var lastPrune time.Time
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-h.sweepWake:
		}
		if err := h.sweep(ctx); err != nil && ctx.Err() == nil {
			h.logFailed("sweep", err)
		}
		if err := h.expireQuestions(ctx); err != nil && ctx.Err() == nil {
			h.logFailed("expire questions", err)
		}
		if now := h.now(); now.Sub(lastPrune) > time.Hour {
			lastPrune = now
			if err := h.store.Write(ctx, func(tx store.Tx) error { return tx.PruneRequests(now.Add(-ledgerKeep)) }); err != nil && ctx.Err() == nil {
				h.logFailed("prune request ledger", err)
			}
		}
	}
}

func (h *Hub) kickSweep() {
	select {
	case h.sweepWake <- struct{}{}:
	default:
	}
}

func (h *Hub) connected(runnerID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	_, ok := h.conns[runnerID]
	return ok
}

func (h *Hub) sweep(ctx context.Context) error {
	var active []store.Attempt
	if err := h.store.Read(ctx, func(tx store.Tx) error {
		var err error
		active, err = tx.ActiveAttempts()
		return err
	}); err != nil {
		return err
	}
	now := h.now()
	for _, a := range active {
		online := h.connected(a.RunnerID)
		offerStale := a.State == job.AttemptOffered && now.Sub(a.OfferedAt) > h.cfg.OfferTimeout
		leaseGone := !online && now.After(a.LeaseUntil)
		if !offerStale && !leaseGone {
			continue
		}
		if err := h.expire(ctx, a.ID, online); err != nil {
			return err
		}
	}
	return nil
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
		case a.State == job.AttemptRunning && !online && now.After(a.LeaseUntil):
			changed = true
			return h.loseAttempt(tx, a, j, job.ReasonRunnerLost, "")
		}
		return nil
	})
	if err != nil || !changed {
		return err
	}
	h.removeActive(a.RunnerID, a.ID)
	if f, err := protocol.NewFrame(protocol.TypeDrop, "", protocol.DropOrder{
		AttemptRef: protocol.AttemptRef{Job: a.JobID, Attempt: a.ID, Epoch: a.Epoch}, Reason: "offer expired",
	}); err == nil {
		h.pushOrder(a.RunnerID, f)
	}
	h.log.Info("attempt expired", "job", a.JobID, "attempt", a.ID, "now", a.State)
	h.notify(a.JobID)
	h.kick()
	return nil
}
