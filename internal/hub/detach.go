package hub

import (
	"context"
	"slices"
	"sync"
	"time"

	"drover/internal/hub/call"
	"drover/internal/job"
	"drover/internal/store"
)

// detachBatch is how many runners' departures one transaction records: a
// stopping hub with 10,000 runners commits a handful of transactions, not
// one each (which took it longer to stop than a supervisor waits).
const detachBatch = 1000

// detachAll ends every runner connection of a stopping hub at once and
// records their departures in batches. The connections are closed first
// and without waiting for the peers' close handshakes (each runs on its
// own, call.Link.Close), so runners start redialing the next hub while
// this one writes. Their attempts keep their leases, as with any detach:
// the next hub (or the leader) finds them held or expires them.
func (h *Hub) detachAll(reason string) {
	cs := h.reg.takeAll()
	if len(cs) == 0 {
		return
	}
	for _, c := range cs {
		c.close(call.CloseGoingAway, reason)
	}
	start := time.Now()
	h.departed(cs)
	h.log.Info("runners disconnected", "count", len(cs), "reason", reason, "recorded in", time.Since(start).Round(time.Millisecond))
}

// departures holds the runners that left on their own (their connection
// ended) until departuresLoop records them: one at once, and those that
// leave while it writes together, set-based, in the next transaction. A
// fleet that drops at once (a network cut, the runners' own restart) cost
// a write and a read per runner, thousands queued on the store's
// connections, and a hub stopping meanwhile waited on them.
type departures struct {
	mu      sync.Mutex
	pending []*runnerSession
	wake    chan struct{} // buffered 1
}

// departLater queues c's departure for departuresLoop.
func (h *Hub) departLater(c *runnerSession) {
	h.gone.mu.Lock()
	h.gone.pending = append(h.gone.pending, c)
	h.gone.mu.Unlock()
	select {
	case h.gone.wake <- struct{}{}:
	default:
	}
}

// departuresLoop records the queued departures until ctx ends, and those
// still queued then, before the store closes.
func (h *Hub) departuresLoop(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
		case <-h.gone.wake:
		}
		h.gone.mu.Lock()
		cs := h.gone.pending
		h.gone.pending = nil
		h.gone.mu.Unlock()
		// A runner back here since is held here again: its departure,
		// recorded now, would release it.
		cs = slices.DeleteFunc(cs, func(c *runnerSession) bool { return h.reg.get(c.runnerID) != nil })
		if len(cs) > 0 {
			h.departed(cs)
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// departed records that the runners of cs (closed, and out of the
// registry) left this hub: their last contact, their connection no longer
// held here, and the offers they had not accepted back to the queue (the
// hub confirms an accept before an attempt may start, so a returning
// runner's late accept is fenced).
func (h *Hub) departed(cs []*runnerSession) {
	ctx := context.Background()
	defer h.notify(anyChange)
	now := h.now()
	for batch := range slices.Chunk(cs, detachBatch) {
		ids := make([]string, len(batch))
		for i, c := range batch {
			ids[i] = c.runnerID
		}
		// Set-based: a runner removed meanwhile matches nothing, and one
		// that connected to another hub since is that hub's.
		if err := h.store.Write(ctx, func(tx store.Tx) error { return tx.RunnersLeft(ids, h.id, now) }); err != nil {
			h.logFailed("record runners' departure", err, "runners", len(batch))
		}
	}
	h.hint(hintLeft)
	h.requeueOffers(ctx, cs)
	time.AfterFunc(h.cfg.Lease+100*time.Millisecond, h.kickSweep)
}

// requeueOffers expires the offers the runners of cs had not accepted, so
// their jobs are queued again now rather than after the offer's timeout.
func (h *Hub) requeueOffers(ctx context.Context, cs []*runnerSession) {
	var offered []string
	_ = h.store.Read(ctx, func(tx store.Tx) error {
		var active []store.Attempt
		var err error
		if len(cs) == 1 {
			active, err = tx.RunnerActiveAttempts(cs[0].runnerID)
		} else {
			// One read of every active attempt (a few per busy runner),
			// not a query per runner.
			active, err = tx.ActiveAttempts()
		}
		left := make(map[string]bool, len(cs))
		for _, c := range cs {
			left[c.runnerID] = true
		}
		for _, a := range active {
			if a.State == job.AttemptOffered && left[a.RunnerID] {
				offered = append(offered, a.ID)
			}
		}
		return err
	})
	for _, id := range offered {
		if err := h.expire(ctx, id, false); err != nil {
			h.logFailed("requeue offer of a disconnected runner", err, "attempt", id)
		}
	}
}
