package hub

import (
	"context"
	"fmt"
	"net/http"
	"sync"
	"time"

	"drover/internal/buildinfo"
	"drover/internal/store"
)

// Several hubs may share one database (Postgres). Each records itself in
// the hubs table and heartbeats it; each records which runners it holds.
// One of them, the leader, runs the hub-wide duties (the sweeps that are
// no connection's: lease expiry of runners offline everywhere, question
// expiry, pruning). It holds the leader term, renewed with every heartbeat,
// and trusts itself only until the term's expiry less a margin, counted
// from before the renewing write: it stops leading before another hub can
// take the term. On SQLite the hub is alone, and leads.

// sharedStore is a store several hubs may use at once (Postgres); any
// other has one hub only, so a hub starting on it knows every hub row and
// term it finds is a dead predecessor's.
type sharedStore interface{ Shared() bool }

// schemaStore can tell whether its database's schema is still this
// drover's (another, newer hub may have migrated it since).
type schemaStore interface {
	CheckSchema(ctx context.Context) error
}

// leadership is what this hub knows of its leader term.
type leadership struct {
	mu    sync.Mutex
	term  int64     // of the last term this hub held (0: none yet)
	trust time.Time // leads until then
}

// leading reports whether this hub may run the hub-wide duties now.
func (h *Hub) leading() bool {
	h.lead.mu.Lock()
	defer h.lead.mu.Unlock()
	return h.now().Before(h.lead.trust)
}

// trustMargin is how long before its term's expiry a leader stops
// trusting itself: room for the clocks of hubs to differ.
func (c *Config) trustMargin() time.Duration { return c.HubTTL / 4 }

// liveSince is the oldest heartbeat of a live hub at now.
func (h *Hub) liveSince(now time.Time) time.Time { return now.Add(-h.cfg.HubTTL) }

// beat records this hub (its heartbeat) and renews or tries for the
// leader term, in one transaction. A hub that takes a new term after a
// gap, when no leader kept the leases, restarts the leases of runners no
// live hub holds (hub downtime does not count against runners:
// docs/reliability.md). first is the beat at start.
func (h *Hub) beat(ctx context.Context, first bool) error {
	start := h.now()
	conns := h.reg.count()
	h.lead.mu.Lock()
	had := h.lead.term
	h.lead.mu.Unlock()
	_, shared := h.store.(sharedStore)
	row := store.Hub{ID: h.id, URL: h.cfg.PublicURL, Version: buildinfo.Version(), StartedAt: h.started, LastSeen: start, Conns: conns}
	var (
		l      store.Leader
		extend bool
	)
	err := h.store.Write(ctx, func(tx store.Tx) error {
		extend = false
		if first && !shared {
			// Alone on this database: whatever hub rows and term it holds
			// are a dead predecessor's.
			if err := tx.PruneHubs(start.Add(time.Millisecond)); err != nil {
				return err
			}
			if err := tx.ReleaseLeader("", start); err != nil {
				return err
			}
		}
		if err := tx.PutHub(row); err != nil {
			return err
		}
		var err error
		if l, err = tx.TakeLeader(h.id, start, start.Add(h.cfg.HubTTL)); err != nil {
			return err
		}
		if l.Holder != h.id || l.Term == had {
			return nil
		}
		extend = true
		return tx.ExtendOfflineLeases(start.Add(h.cfg.Lease), h.liveSince(start))
	})
	if err != nil {
		return fmt.Errorf("record hub %s: %w", h.id, err)
	}
	h.lead.mu.Lock()
	was := h.now().Before(h.lead.trust)
	if l.Holder == h.id {
		h.lead.term = l.Term
		h.lead.trust = start.Add(h.cfg.HubTTL - h.cfg.trustMargin())
	} else {
		h.lead.trust = time.Time{}
	}
	h.lead.mu.Unlock()
	switch {
	case extend:
		h.log.Info("this hub leads", "hub", h.id, "term", l.Term)
		h.kickSweep()
	case was && l.Holder != h.id:
		h.log.Warn("this hub no longer leads", "hub", h.id, "leader", l.Holder)
	}
	return nil
}

// beatLoop heartbeats until ctx ends. A failed beat is logged; the
// leader's trust then lapses on its own.
// Its beats are not on whole seconds (internal/tick) as the hub's other
// periodic work is: every hub's would then fall in the same millisecond,
// where a term that lapsed at a beat's instant meets a row last seen a
// TTL before it, still live (TestOnlyANewLeaderAfterAGapExtendsLeases).
func (h *Hub) beatLoop(ctx context.Context) {
	t := time.NewTicker(h.cfg.HubHeartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := h.beat(ctx, false); err != nil && ctx.Err() == nil {
			h.logFailed("hub heartbeat", err)
		}
	}
}

// leave removes this hub's row, with the runners it held, and releases
// its term, so that another hub leads at once and its runners count as
// offline (at Close, after the heartbeats stopped).
func (h *Hub) leave() {
	h.lead.mu.Lock()
	h.lead.trust = time.Time{}
	h.lead.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	now := h.now()
	err := h.store.Write(ctx, func(tx store.Tx) error {
		if err := tx.DeleteHub(h.id); err != nil {
			return err
		}
		return tx.ReleaseLeader(h.id, now)
	})
	if err != nil {
		h.logFailed("remove the hub's record", err)
	}
	h.hint(hintHub)
}

// holdRunner records, in an attach's transaction, that this hub holds the
// runner's connection, with what it reported in its hello.
func (h *Hub) holdRunner(tx store.Tx, c *runnerSession, now time.Time) error {
	if err := tx.HoldRunner(c.runnerID, h.id, now); err != nil {
		return err
	}
	return tx.SetRunnerStatus(c.runnerID, h.id, c.shown().status())
}

// onlineIn reports whether a runner is connected to this hub or to any
// live hub, as tx sees it.
func (h *Hub) onlineIn(tx store.Tx, runnerID string) (bool, error) {
	if h.connected(runnerID) {
		return true, nil
	}
	holder, err := tx.RunnerHolder(runnerID, h.liveSince(h.now()))
	return holder != "", err
}

// opsRoutes are the load balancer's probes.
func (h *Hub) opsRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	})
	mux.HandleFunc("GET /readyz", h.serveReady)
}

// serveReady answers 200 when this hub can serve: its database answers,
// at this drover's schema, and it is not shutting down; else 503 saying
// which (never the database's error, which may name hosts or users: that
// goes to the log).
func (h *Hub) serveReady(w http.ResponseWriter, r *http.Request) {
	why := h.notReady(r.Context())
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	if why != "" {
		w.WriteHeader(http.StatusServiceUnavailable)
		_, _ = w.Write([]byte("not ready: " + why + "\n"))
		return
	}
	_, _ = w.Write([]byte("ready\n"))
}

func (h *Hub) notReady(ctx context.Context) string {
	if h.stopping.Load() {
		return "shutting down"
	}
	ctx, cancel := context.WithTimeout(ctx, 3*time.Second)
	defer cancel()
	if err := h.store.Read(ctx, func(tx store.Tx) error { _, err := tx.Hubs(); return err }); err != nil {
		h.log.Warn("readiness: the database cannot be read", "err", err)
		return "the database cannot be read"
	}
	if s, ok := h.store.(schemaStore); ok {
		if err := s.CheckSchema(ctx); err != nil {
			h.log.Warn("readiness: schema", "err", err)
			return "the database schema is not this hub's (see the hub's log)"
		}
	}
	return ""
}
