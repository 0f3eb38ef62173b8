package hub

import (
	"time"

	"drover/internal/tick"
)

// watchOffer wakes the sweep when the offer of attempt to runner goes
// stale, if it still holds the runner's slot then: an offer accepted and
// finished, declined or taken back meanwhile wakes nothing (a sweep is a
// read transaction or two, and a burst of 100 jobs woke 100 of them an
// offer timeout later, in an idle hub). It wakes on the whole second after
// (internal/tick), in the wakeup the runners' heartbeats cause, so offers
// made within a second share one sweep. An attempt still holding the slot
// may have been accepted: its sweep finds nothing stale, as before. The
// safety sweep (Config.Sweep) stands behind it.
func (h *Hub) watchOffer(runnerID, attemptID string) {
	d := h.cfg.OfferTimeout + 50*time.Millisecond
	d += tick.Next(time.Now().Add(d), time.Second)
	time.AfterFunc(d, func() {
		if h.reg.holds(runnerID, attemptID) {
			h.kickSweep()
		}
	})
}

// holds reports whether attempt holds one of the runner's slots here.
func (r *registry) holds(runnerID, attemptID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.active[runnerID][attemptID]
}
