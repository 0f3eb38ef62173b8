package hub

import (
	"context"
	"fmt"

	"drover/internal/store"
)

// The cross sweep's share of access (hints.go). A hub keeps the access of
// the runners it holds in memory; a change made on another hub reaches it
// by a hint, which may be lost. The store stamps every access change with
// a new access version in the change's own transaction
// (store.Tx.AccessVersion), so an idle sweep reads one number, and when it
// moved reloads only the runners held here stamped since its last look.

// accessFullEvery is how many cross sweeps may pass between two reloads of
// every runner held here. The versions carry every change made through the
// store; this net is for one made around it (an operator's SQL on shares
// or users), because the dispatcher's account and credential decisions use
// the access in memory (only mayRun is read again in the offer).
const accessFullEvery = 120

// accessLook is what the hub last learned of the access versions (under
// Hub.accessMu).
type accessLook struct {
	seen   int64 // the version the runners held here were brought up to
	known  bool  // seen was read: false until the first look
	owed   bool  // a full reload is due and has not succeeded yet
	sweeps int   // looks since the last full reload
}

// refreshChangedAccess brings the access of the runners held here up to
// the store's: of those whose access changed since the last look, or of
// every one with all (hints may have been lost), on the first look, every
// accessFullEvery looks, and when the version went back (another database
// behind the same URL).
func (h *Hub) refreshChangedAccess(ctx context.Context, all bool) error {
	h.accessMu.Lock()
	defer h.accessMu.Unlock()
	look := &h.x.access
	look.owed = look.owed || all || !look.known || look.sweeps+1 >= accessFullEvery
	var seen int64
	var full bool
	n, _, err := h.loadAccessLocked(ctx, func(tx store.Tx) ([]string, error) {
		v, err := tx.AccessVersion()
		if err != nil {
			return nil, err
		}
		seen, full = v, look.owed || v < look.seen
		var ids []string
		switch {
		case full:
			for id := range h.connectedRunners() {
				ids = append(ids, id)
			}
		case v > look.seen:
			changed, err := tx.AccessChangedSince(look.seen)
			if err != nil {
				return nil, err
			}
			for _, id := range changed {
				if h.connected(id) {
					ids = append(ids, id)
				}
			}
		}
		return ids, nil
	})
	if err != nil {
		return err
	}
	look.seen, look.known, look.sweeps = seen, true, look.sweeps+1
	if full {
		look.owed, look.sweeps = false, 0
	}
	if n > 0 {
		h.kickLocal() // a share may have opened a runner to queued jobs
	}
	return nil
}

// loadAccessLocked reads in one read the access of the runners pick names
// and gives each held here its own; it returns how many it read and those
// not held here. The caller holds accessMu, so a slower read of an older
// state never overwrites a newer one.
func (h *Hub) loadAccessLocked(ctx context.Context, pick func(store.Tx) ([]string, error)) (int, []string, error) {
	var ids []string
	var ras []*runnerAccess
	if err := h.store.Read(ctx, func(tx store.Tx) error {
		var err error
		if ids, err = pick(tx); err != nil {
			return err
		}
		ras, err = loadRunnerAccesses(tx, ids)
		return err
	}); err != nil {
		return 0, nil, err
	}
	h.metrics.accessLoads.Add(float64(len(ids)))
	var elsewhere []string
	h.reg.mu.Lock()
	for i, id := range ids {
		if c := h.reg.conns[id]; c != nil {
			c.access = ras[i]
		} else {
			elsewhere = append(elsewhere, id)
		}
	}
	h.reg.mu.Unlock()
	return len(ids), elsewhere, nil
}

// accessTablesFrom is how many runners' access loadRunnerAccesses reads
// from whole tables rather than one by one (three statements each).
const accessTablesFrom = 8

// loadRunnerAccesses reads the access of the runners ids: of a few one by
// one, of more (a full reload) from the runners, shares and users tables,
// three statements however many.
func loadRunnerAccesses(tx store.Tx, ids []string) ([]*runnerAccess, error) {
	ras := make([]*runnerAccess, len(ids))
	if len(ids) < accessTablesFrom {
		for i, id := range ids {
			var err error
			if ras[i], err = loadRunnerAccess(tx, id); err != nil {
				return nil, err
			}
		}
		return ras, nil
	}
	rns, err := tx.Runners()
	if err != nil {
		return nil, err
	}
	shares, err := tx.AllShares()
	if err != nil {
		return nil, err
	}
	users, err := tx.Users()
	if err != nil {
		return nil, err
	}
	runnerBy := make(map[string]store.Runner, len(rns))
	for _, rn := range rns {
		runnerBy[rn.ID] = rn
	}
	sharesOf := map[string][]store.Share{}
	for _, sh := range shares {
		sharesOf[sh.RunnerID] = append(sharesOf[sh.RunnerID], sh)
	}
	userBy := make(map[string]store.User, len(users))
	for _, u := range users {
		userBy[u.ID] = u
	}
	for i, id := range ids {
		rn, ok := runnerBy[id]
		if !ok {
			return nil, fmt.Errorf("read runner %s: %w", id, store.ErrNotFound)
		}
		owner, ok := userBy[rn.OwnerID]
		if !ok {
			return nil, fmt.Errorf("read owner of runner %s: %w", rn.Name, store.ErrNotFound)
		}
		ras[i] = runnerAccessOf(rn, sharesOf[id], owner)
	}
	return ras, nil
}
