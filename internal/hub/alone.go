package hub

import (
	"context"
	"drover/internal/store"
	"sync/atomic"
)

// A hub alone on a shared database (no other live hub) has no hints to
// lose, so its cross sweep would re-read every 5 s, for nothing, what only
// another hub could have changed: three read transactions and a dispatch
// pass (a large part of an idle Postgres hub's CPU beside its heartbeat).
// It sweeps only when a safety net's full read is due (once a minute at
// the default 5 s: a change made around the store, by SQL, is still seen
// within it), and looks then whether it is still alone. A hub says when it
// starts and when it leaves (hintHub); every other hub then looks at once.
// A listener that reconnected may have missed such a hint: the hub then
// looks too. If a starting hub's hint is lost as well, its lost hints wait
// for the next net's sweep (a minute) rather than the next sweep (5 s).

// aloneLook is what the hub knows of the other hubs.
type aloneLook struct {
	alone atomic.Bool // no other live hub when it last looked (false until then)
}

// lookAlone reads whether another hub is live; an error counts as not
// alone (the cross sweep then runs as usual).
func (h *Hub) lookAlone(ctx context.Context) {
	var alone bool
	err := h.store.Read(ctx, func(tx store.Tx) error {
		alone = true
		hubs, err := tx.Hubs()
		since := h.liveSince(h.now())
		for _, o := range hubs {
			if o.ID != h.id && !o.LastSeen.Before(since) {
				alone = false
			}
		}
		return err
	})
	if err != nil {
		alone = false
		if ctx.Err() == nil {
			h.logFailed("look for other hubs", err)
		}
	}
	h.x.others.alone.Store(alone)
}

// crossNetDue reports whether the next cross sweep is one of a safety
// net's full reads (of every token or every runner's access), or the
// first.
func (h *Hub) crossNetDue() bool {
	t := &h.x.tokens
	t.mu.Lock()
	due := !t.known || t.sweeps+1 >= crossFullEvery
	t.mu.Unlock()
	h.accessMu.Lock()
	a := &h.x.access
	due = due || !a.known || a.owed || a.sweeps+1 >= accessFullEvery
	h.accessMu.Unlock()
	return due
}

// skipCrossSweep counts a sweep an alone hub skipped towards the nets, so
// that they come as often as when it sweeps.
func (h *Hub) skipCrossSweep() {
	t := &h.x.tokens
	t.mu.Lock()
	t.sweeps++
	t.mu.Unlock()
	h.accessMu.Lock()
	h.x.access.sweeps++
	h.accessMu.Unlock()
}

// crossTick is the cross sweep's periodic pass: skipped by a hub alone
// unless a net is due; each net's sweep first looks whether it is alone.
func (h *Hub) crossTick(ctx context.Context) {
	due := h.crossNetDue()
	if due {
		h.lookAlone(ctx)
	}
	if !due && h.x.others.alone.Load() {
		h.skipCrossSweep()
		return
	}
	h.crossSweep(ctx, false)
}
