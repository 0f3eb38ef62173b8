package hub

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/store"
	"drover/internal/tick"
)

// Hints carries hints between the hubs of one database: a hub publishes
// what it changed after the commit, and every other hub hears it and looks
// at the database. A hint is never the truth and may be lost: each hub
// also re-reads on its slow cross sweep (Config.CrossSweep) what hints
// would have told it, so a lost one costs latency, never correctness.
// The Postgres store implements it (LISTEN/NOTIFY, coalesced); a SQLite
// hub is the only one on its database and needs none (the hub's own
// doorbells, kick and notify, serve it in-process).
type Hints interface {
	// Publish queues keys for the other hubs; it must not block on I/O.
	Publish(keys ...string)
	// Listen calls fn with each batch of keys other hubs published, and
	// with nil when some may have been missed (a reconnect), until ctx
	// ends.
	Listen(ctx context.Context, fn func(keys []string)) error
}

// The keys hubs publish.
const (
	// hintQueued: a job may be offerable (submitted, requeued, a slot
	// freed): dispatch.
	hintQueued = "q"
	// hintJob + job id: the job changed (log followers and live pages
	// wake); with no id, anything changed (the runners page).
	hintJob = "j:"
	// hintRunner + runner id: what the runner must be told may have
	// changed (cancel, drop, revoke): its holding hub reads and sends it.
	hintRunner = "r:"
	// hintAccess + runner id: the runner's owner or shares changed; with
	// no id, anyone's may have.
	hintAccess = "a:"
	// hintLeft: a runner left its hub, so its leases are now the leader's
	// to expire: the leader sweeps to learn their deadlines.
	hintLeft = "l"
	// hintDeadline: a question asked through another hub may have
	// expired: the leader sweeps.
	hintDeadline = "d"
	// hintHub: a hub started or left: the others look whether they are
	// alone (alone.go).
	hintHub = "h"
)

// crossHub is what a hub keeps for the hubs beside it.
type crossHub struct {
	hints  Hints      // nil: the only hub on its database
	access accessLook // (under Hub.accessMu; access_sweep.go)
	tokens tokenLook  // (syncHeld)
	others aloneLook  // (alone.go)
}

// hintsFor is the hints a hub on st uses: cfg's, else the store's own when
// it carries them.
func hintsFor(cfg Config, st store.Store) Hints {
	if cfg.Hints != nil {
		return cfg.Hints
	}
	if hs, ok := st.(Hints); ok {
		return hs
	}
	return nil
}

// hint tells the other hubs, if any.
func (h *Hub) hint(keys ...string) {
	if h.x.hints != nil {
		h.x.hints.Publish(keys...)
	}
}

// crossLoops listens to the other hubs and runs the cross sweep; without
// other hubs it does nothing.
func (h *Hub) crossLoops(ctx context.Context) {
	if h.x.hints == nil {
		return
	}
	h.hint(hintHub)
	h.bg.Add(2)
	go func() {
		defer h.bg.Done()
		if err := h.x.hints.Listen(ctx, func(keys []string) { h.heard(ctx, keys) }); err != nil && ctx.Err() == nil {
			h.logFailed("listen to the other hubs", err)
		}
	}()
	go func() {
		defer h.bg.Done()
		for ctx.Err() == nil {
			select {
			case <-ctx.Done():
			case <-time.After(tick.Next(time.Now(), h.cfg.CrossSweep)):
				h.crossTick(ctx)
			}
		}
	}()
}

// crossSweep reads what hints would have told: it offers what can be
// offered, wakes every follower, and brings every runner held here up to
// date with the database; of their access, only what changed since the
// last sweep, or, with all, everything.
func (h *Hub) crossSweep(ctx context.Context, all bool) {
	h.kickLocal()
	h.wakeAll()
	if err := h.refreshChangedAccess(ctx, all); err != nil && ctx.Err() == nil {
		h.logFailed("reload runners' access", err)
	}
	if err := h.syncHeld(ctx, all); err != nil && ctx.Err() == nil {
		h.logFailed("bring runners up to date", err)
	}
}

// heard acts on hints from other hubs; nil, after a reconnect that may
// have lost some, is everything (crossSweep, the access of every runner
// reloaded).
func (h *Hub) heard(ctx context.Context, keys []string) {
	if keys == nil {
		h.lookAlone(ctx)
		h.crossSweep(ctx, true)
		return
	}
	for _, k := range keys {
		var err error
		switch {
		case k == hintQueued:
			h.kickLocal()
		case k == hintHub:
			h.lookAlone(ctx)
		case k == hintLeft || k == hintDeadline:
			if h.leading() {
				h.kickSweep()
			}
		case strings.HasPrefix(k, hintJob):
			h.notifyLocal(strings.TrimPrefix(k, hintJob))
		case strings.HasPrefix(k, hintRunner):
			if id := strings.TrimPrefix(k, hintRunner); id != "" && h.connected(id) {
				err = h.syncRunners(ctx, id)
			}
		case strings.HasPrefix(k, hintAccess):
			err = h.refreshAccessHere(ctx, strings.TrimPrefix(k, hintAccess))
		}
		if err != nil && ctx.Err() == nil {
			h.logFailed("act on another hub's hint", err, "hint", k)
		}
	}
}

// refreshAccessHere reloads the access of the runner held here (every
// runner held here for "").
func (h *Hub) refreshAccessHere(ctx context.Context, runnerID string) error {
	var ids []string
	for id := range h.connectedRunners() {
		if runnerID == "" || id == runnerID {
			ids = append(ids, id)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	return h.refreshAccessOf(ctx, ids)
}

// wakeAll wakes every follower: each reads again what it follows.
func (h *Hub) wakeAll() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, w := range h.waits {
		close(w.ch)
		delete(h.waits, k)
	}
}

// pushOrder pushes an order to a runner held here, or hints the hub that
// holds it, which reads the same order from the database (syncRunners).
func (h *Hub) pushOrder(runnerID string, push func(protocol.Runner)) {
	if c := h.reg.get(runnerID); c != nil {
		push(c)
		return
	}
	h.hint(hintRunner + runnerID)
}

// crossFullEvery is how many cross sweeps may pass between two checks of
// every connection held here against every runner's token (a minute at
// the default 5 s). Token versions carry every replacement and revocation
// made through the store, and a connect checks its token again once it is
// listed (closeIfTokenStale); this net is for a change made around the
// store (an operator's SQL on the runners table).
const crossFullEvery = 12

// tokenLook is what the cross sweep last learned of the token versions
// (under its mu, which serializes sweeps so that a slower read of an older
// state never moves seen back).
type tokenLook struct {
	mu     sync.Mutex
	seen   int64 // the connections held here were checked up to this version
	known  bool  // seen was read: false until the first sweep
	sweeps int   // sweeps since the last full one
}

// syncHeld is the cross sweep's syncRunners for every runner held here:
// of the tokens, only those changed since its last look (every one with
// full, on the first sweep, every crossFullEvery sweeps, and when the
// version went back: another database behind the same URL); of the
// attempts, those active in the database or in memory. An idle sweep of a
// fleet reads a version and an empty index range, and touches no runner.
func (h *Hub) syncHeld(ctx context.Context, full bool) error {
	look := &h.x.tokens
	look.mu.Lock()
	defer look.mu.Unlock()
	full = full || !look.known || look.sweeps+1 >= crossFullEvery
	var seen int64
	var wasFull bool
	err := h.syncWith(ctx, "", func(tx store.Tx) (map[string]string, []store.Attempt, error) {
		v, err := tx.TokenVersion()
		if err != nil {
			return nil, nil, err
		}
		seen, wasFull = v, full || v < look.seen
		var tokens map[string]string
		switch {
		case wasFull:
			// Two columns a runner, not its row with its holding and
			// attempts (35 % of an idle hub's CPU on Postgres with 10,000
			// runners); a runner missing from them is revoked.
			live, err := tx.RunnerTokens()
			if err != nil {
				return nil, nil, err
			}
			tokens = map[string]string{}
			for id := range h.connectedRunners() {
				tokens[id] = live[id]
			}
		case v > look.seen:
			if tokens, err = tx.TokensChangedSince(look.seen); err != nil {
				return nil, nil, err
			}
		}
		active, err := tx.ActiveAttempts()
		return tokens, active, err
	})
	if err != nil {
		return err
	}
	look.seen, look.known, look.sweeps = seen, true, look.sweeps+1
	if wasFull {
		look.sweeps = 0
	}
	return nil
}

// syncRunners brings the runner held here up to date with the database,
// for what other hubs changed (a hint named it); syncHeld does so for all.
func (h *Hub) syncRunners(ctx context.Context, runnerID string) error {
	return h.syncWith(ctx, runnerID, func(tx store.Tx) (map[string]string, []store.Attempt, error) {
		rn, err := tx.Runner(runnerID)
		if err != nil {
			return nil, nil, err
		}
		hash := rn.TokenHash
		if rn.RevokedAt != nil {
			hash = ""
		}
		active, err := tx.RunnerActiveAttempts(runnerID)
		return map[string]string{runnerID: hash}, active, err
	})
}

// syncWith brings runners held here (runnerID, or all for "") up to date
// with what read, in one read, found: a connection whose token it read
// (tokens: runner → its token's hash, "" when revoked) and is no longer
// the one it was made with is closed; of the attempts it found active, an
// offer another hub made is sent, and a running attempt another hub's
// user cancelled is cancelled; an attempt holding a slot here that is no
// longer active (another hub ended it) is dropped. Only the runners named
// by tokens, by the active attempts or by the slots held here are looked
// at; the slots of each are then the database's.
func (h *Hub) syncWith(ctx context.Context, runnerID string, read func(store.Tx) (map[string]string, []store.Attempt, error)) error {
	type held struct {
		c   *runnerSession
		mem []string // attempt ids holding its slots here
	}
	// What memory held before the read: an attempt in it that the read
	// does not find active ended (one added after may not be in the read).
	h.reg.mu.Lock()
	mem := map[string][]string{}
	for id, as := range h.reg.active {
		if runnerID == "" || id == runnerID {
			for a := range as {
				mem[id] = append(mem[id], a)
			}
		}
	}
	removals := h.reg.removals
	h.reg.mu.Unlock()
	if runnerID != "" && !h.connected(runnerID) {
		return nil
	}
	var (
		local  map[string]held                // the runners looked at
		tokens map[string]string              // runner → its token's hash ("" revoked), of those read
		active = map[string][]store.Attempt{} // runner → its active attempts
		ended  = map[string]store.Attempt{}   // attempt held here → its record, no longer active
		cancel = map[string]bool{}            // running attempts whose job is being cancelled
		resend = map[string]protocol.Offer{}  // offers the database has for it and memory does not
	)
	err := h.store.Read(ctx, func(tx store.Tx) error {
		clear(active)
		clear(ended)
		clear(cancel)
		clear(resend)
		var all []store.Attempt
		var err error
		if tokens, all, err = read(tx); err != nil {
			return err
		}
		// Listed after the read began: a connection listed before a
		// change the read sees is looked at.
		local = map[string]held{}
		h.reg.mu.Lock()
		look := func(id string) {
			if _, ok := local[id]; ok || (runnerID != "" && id != runnerID) {
				return
			}
			if c := h.reg.conns[id]; c != nil {
				local[id] = held{c: c, mem: mem[id]}
			}
		}
		for id := range tokens {
			look(id)
		}
		for _, a := range all {
			look(a.RunnerID)
		}
		for id := range mem {
			look(id)
		}
		h.reg.mu.Unlock()
		for _, a := range all {
			if _, ok := local[a.RunnerID]; ok {
				active[a.RunnerID] = append(active[a.RunnerID], a)
			}
		}
		for id, hd := range local {
			now := map[string]bool{}
			for _, a := range active[id] {
				now[a.ID] = true
				if a.State == job.AttemptOffered && !slices.Contains(hd.mem, a.ID) {
					// Offered by a hub that held it then, or sent to a
					// connection that was closing: send it again (a runner
					// takes a repeated offer as the same attempt).
					j, err := tx.Job(a.JobID)
					if err != nil {
						return err
					}
					if resend[a.ID], err = h.offerFor(tx, hd.c, a, j, a.Account); err != nil {
						return err
					}
				}
				if a.State != job.AttemptRunning {
					continue
				}
				j, err := tx.Job(a.JobID)
				if err != nil {
					return err
				}
				if j.Cancelling && j.AttemptID == a.ID {
					cancel[a.ID] = true
				}
			}
			for _, aid := range hd.mem {
				if now[aid] {
					continue
				}
				a, err := tx.Attempt(aid)
				if err != nil {
					return err
				}
				ended[aid] = a
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	var revoked []*runnerSession
	h.reg.mu.Lock()
	for id, hd := range local {
		c := hd.c
		if h.reg.conns[id] != c {
			continue // gone or replaced meanwhile
		}
		if hash, ok := tokens[id]; ok && hash != c.tokenHash {
			revoked = append(revoked, c)
			continue
		}
		for _, aid := range hd.mem {
			a, ok := ended[aid]
			if !ok || !h.reg.active[id][aid] {
				continue
			}
			delete(h.reg.active[id], aid)
			delete(h.reg.cancelled, aid)
			if a.AcceptedAt == nil {
				// Ended before it started: the runner must not start it.
				c.Drop(protocol.DropOrder{
					AttemptRef: protocol.AttemptRef{Job: a.JobID, Attempt: a.ID, Epoch: a.Epoch}, Reason: "attempt " + string(a.State)})
			}
		}
		for _, a := range active[id] {
			if o, ok := resend[a.ID]; ok && !h.reg.active[id][a.ID] && h.reg.removals == removals {
				c.Offer(o)
			}
			if h.reg.removals == removals {
				h.reg.addActiveLocked(id, a.ID)
			}
			if cancel[a.ID] && !h.reg.cancelled[a.ID] {
				h.reg.cancelled[a.ID] = true
				c.Cancel(protocol.CancelOrder{
					AttemptRef: protocol.AttemptRef{Job: a.JobID, Attempt: a.ID, Epoch: a.Epoch}, Reason: "cancelled by a user"})
			}
		}
		if len(h.reg.active[id]) == 0 {
			delete(h.reg.active, id)
		}
	}
	h.reg.mu.Unlock()
	for _, c := range revoked {
		c.close(protocol.CloseRevoked, "runner token revoked")
	}
	return nil
}
