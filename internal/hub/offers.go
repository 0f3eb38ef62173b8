package hub

import (
	"context"
	"errors"
	"sync"
)

// maxOffersInFlight bounds the offers of one pass that wait for their
// commits at once.
const maxOffersInFlight = 32

// offerBatch is a dispatch pass's offers, made side by side rather than
// one after another. Each offer is a durable write of its own; made in
// turn, a pass of n offers waited for n commits, so a burst was dispatched
// at one offer per fsync. Side by side, the store commits them together
// (SQLite's group commit, Postgres's pool), and each offer is still its own
// transaction, claimed against the epoch it read: no job is offered twice.
// One runner's offers stay in the pass's order.
type offerBatch struct {
	h        *Hub
	runners  []*runnerSession
	byRunner map[*runnerSession][]plannedOffer
}

type plannedOffer struct{ jobID, account, requester string }

func (h *Hub) newOfferBatch() *offerBatch {
	return &offerBatch{h: h, byRunner: map[*runnerSession][]plannedOffer{}}
}

// add plans an offer of jobID to c naming account and requester (its
// requester's name).
func (b *offerBatch) add(jobID string, c *runnerSession, account, requester string) {
	if _, ok := b.byRunner[c]; !ok {
		b.runners = append(b.runners, c)
	}
	b.byRunner[c] = append(b.byRunner[c], plannedOffer{jobID, account, requester})
}

// send makes the planned offers and says how many were made, and the first
// error (a job no longer queued, or a runner with no room left, is none:
// the job waits for the next pass, which a runner with no room left asks
// for at once: made one after another, its job went to another runner in
// the same pass).
func (b *offerBatch) send(ctx context.Context) (int, error) {
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		made   int
		errs   error
		noRoom bool
	)
	sem := make(chan struct{}, maxOffersInFlight)
	for _, c := range b.runners {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			for _, p := range b.byRunner[c] {
				ok, err := b.h.offer(ctx, p.jobID, c, p.account, p.requester)
				mu.Lock()
				switch {
				case ok:
					made++
				case errors.Is(err, errNoRoom):
					noRoom = true
				case err != nil && errs == nil:
					errs = err
				}
				mu.Unlock()
				if err != nil {
					return
				}
			}
		})
	}
	wg.Wait()
	if noRoom {
		b.h.kickLocal()
	}
	return made, errs
}
