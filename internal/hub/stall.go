package hub

import (
	"context"
	"sync"
	"time"

	"drover/internal/store"
	"drover/internal/tick"
)

// A hub's own process can stop while its runners go on: SIGSTOP, a frozen
// VM, a host swapping hard. Runners cannot reach it meanwhile (their pings
// time out and they reconnect), so a lease that ran out during the stop
// says nothing of them: hub downtime does not count against runners
// (docs/reliability.md), whether the hub restarted or only stopped. The
// hub looks at its own clock often; a gap between looks is a stall, and
// from its end every runner has a full lease to come back, as it has from
// a restarted hub's start.

// The hub looks once a second, on whole seconds (internal/tick), in the
// wakeup the runners' heartbeats cause: it looked twice, and the look on
// the half second was a wakeup of its own every second, for an idle hub
// the costliest periodic work it had. A stall is still any gap over 2 s;
// a look late by more than a second (not only by 1.5 s) now reads as a
// stall too, which gives runners more time, never less.
const (
	stallTick = time.Second     // how often the hub looks
	stallGap  = 2 * time.Second // a longer gap between looks is a stall
)

// stallWatch is what the hub knows of its own stalls.
type stallWatch struct {
	mu   sync.Mutex
	last time.Time // the last look
	end  time.Time // when the last stall seen ended (zero: none)
}

// look records that the hub runs at now and returns when its last stall
// ended. Whoever looks first after a stall (the ticker, a sweep) sees it.
func (s *stallWatch) look(now time.Time) time.Time {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.last.IsZero() && now.Sub(s.last) > stallGap {
		s.end = now
	}
	if now.After(s.last) {
		s.last = now
	}
	return s.end
}

// stallLoop looks every stallTick until ctx ends.
func (h *Hub) stallLoop(ctx context.Context) {
	tick.Every(ctx, stallTick, func() bool { h.stall.look(h.now()); return true })
}

// leaseEnd is when an attempt's lease runs out as this hub may judge it at
// now: its recorded end, or a full lease after this hub's last stall.
func (h *Hub) leaseEnd(a store.Attempt, now time.Time) time.Time {
	end := a.LeaseUntil
	if woke := h.stall.look(now); !woke.IsZero() {
		end = later(end, woke.Add(h.cfg.Lease))
	}
	return end
}

func later(a, b time.Time) time.Time {
	if b.After(a) {
		return b
	}
	return a
}
