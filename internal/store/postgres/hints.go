package postgres

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"

	"drover/internal/retry"
)

// Hints between the hubs of one database, by LISTEN/NOTIFY. A hint is a
// short key ("job j-1 changed"); a hub publishes them after its commits and
// every other hub on the database receives them. They are only hints: a
// lost one costs the receiver latency until its slow sweep, never
// correctness, so delivery is best effort.
//
// NOTIFY serializes the commits of every notifying session on the server,
// so hints are never sent one per write, and a hub sends at most one
// NOTIFY per hintWindow (several when they exceed a payload): a hint
// published when none went out in the last window goes at once, and those
// published while one was just sent wait for the window's end and travel
// together. An idle hub's hint pays no window; a busy hub's are coalesced.
const (
	hintChannel = "drover_hints"
	// hintWindow is the least time between two of a Store's NOTIFYs.
	hintWindow = 20 * time.Millisecond
	// hintPayload stays under the server's 8000-byte payload limit.
	hintPayload = 7800
	// hintSendTimeout bounds one NOTIFY on a struggling server.
	hintSendTimeout = 5 * time.Second
	// listenRetryFirst and listenRetryMax are the first and the longest
	// wait before the listening connection is made again.
	listenRetryFirst = 100 * time.Millisecond
	listenRetryMax   = 5 * time.Second
)

// hints is a Store's side of the channel: what it has yet to send, and who
// it is, so that its own hints are not handed back to it. One sender
// goroutine runs while hints flow (busy) and ends after a window in which
// none came.
type hints struct {
	origin  string
	window  time.Duration // hintWindow; tests make it longer
	mu      sync.Mutex
	pending map[string]bool
	order   []string // pending, in the order first published
	busy    bool     // the sender runs: it sends what is pending
	closed  bool
	stop    chan struct{} // closed by closeHints: the sender cuts its window short
	sender  sync.WaitGroup
	sent    atomic.Int64 // NOTIFY statements sent
}

func newHints() *hints {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return &hints{origin: hex.EncodeToString(b), window: hintWindow, pending: map[string]bool{}, stop: make(chan struct{})}
}

// Publish queues hints for the other hubs on the database. It never
// blocks on the server: they go out at once when the Store is idle, else
// at the end of the window of the NOTIFY just sent, coalesced.
func (s *Store) Publish(keys ...string) {
	h := s.hints
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return
	}
	for _, k := range keys {
		if k == "" || strings.Contains(k, "\n") || len(k) > hintPayload/2 || h.pending[k] {
			continue
		}
		h.pending[k] = true
		h.order = append(h.order, k)
	}
	if !h.busy && len(h.order) > 0 {
		h.busy = true
		h.sender.Add(1)
		go s.sendHints()
	}
}

// sendHints sends what is pending, then waits a window and sends what
// came meanwhile, until a window passes with nothing new.
func (s *Store) sendHints() {
	h := s.hints
	defer h.sender.Done()
	window := time.NewTimer(h.window)
	defer window.Stop()
	for {
		h.mu.Lock()
		keys := h.order
		h.order, h.pending = nil, map[string]bool{}
		if len(keys) == 0 {
			h.busy = false
			h.mu.Unlock()
			return
		}
		h.mu.Unlock()
		s.notify(keys)
		window.Reset(h.window)
		select {
		case <-window.C:
		case <-h.stop:
		}
	}
}

// notify sends keys in as few NOTIFYs as fit the payload.
func (s *Store) notify(keys []string) {
	h := s.hints
	for len(keys) > 0 {
		var b strings.Builder
		b.WriteString(h.origin)
		n := 0
		for n < len(keys) && b.Len()+1+len(keys[n]) <= hintPayload {
			b.WriteByte('\n')
			b.WriteString(keys[n])
			n++
		}
		keys = keys[n:]
		ctx, cancel := context.WithTimeout(context.Background(), hintSendTimeout)
		// Lost on an error: the receivers' sweeps stand behind it.
		if _, err := s.db.ExecContext(ctx, `SELECT pg_notify($1, $2)`, hintChannel, b.String()); err == nil {
			h.sent.Add(1)
		}
		cancel()
	}
}

// closeHints sends what is pending without waiting out the window, and
// stops publishing.
func (s *Store) closeHints() {
	h := s.hints
	h.mu.Lock()
	if !h.closed {
		h.closed = true
		close(h.stop)
	}
	h.mu.Unlock()
	h.sender.Wait()
}

// NotifiesSent is how many NOTIFY statements this Store has sent (tests
// and metrics see the coalescing by it).
func (s *Store) NotifiesSent() int64 { return s.hints.sent.Load() }

// Listen hands fn every batch of hints the other Stores on the database
// publish, until ctx ends. It listens on a connection of its own, made
// again with backoff when lost; after each such gap, in which hints may
// have been missed, fn gets nil: everything may have changed.
func (s *Store) Listen(ctx context.Context, fn func(keys []string)) error {
	pol := retry.Policy{First: listenRetryFirst, Max: listenRetryMax}
	fails := 0      // since the last connection that held
	missed := false // hints may have been lost since the last connection
	for {
		err := s.listenOnce(ctx, func() {
			fails = 0
			if missed {
				fn(nil)
			}
			missed = true // from now on, a lost connection loses hints
		}, fn)
		if ctx.Err() != nil {
			return nil
		}
		_ = err // the connection is made again; hubs log nothing per retry
		if retry.Sleep(ctx, pol.Delay(fails)) != nil {
			return nil
		}
		fails++
		missed = true
	}
}

// listenOnce connects, listens and hands over hints until the connection
// fails; listening calls up once LISTEN holds.
func (s *Store) listenOnce(ctx context.Context, up func(), fn func([]string)) error {
	conn, err := pgx.ConnectConfig(ctx, s.cfg)
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), time.Second)
		defer cancel()
		_ = conn.Close(cctx)
	}()
	if _, err := conn.Exec(ctx, "LISTEN "+hintChannel); err != nil {
		return err
	}
	up()
	for {
		n, err := conn.WaitForNotification(ctx)
		if err != nil {
			return err
		}
		origin, rest, _ := strings.Cut(n.Payload, "\n")
		if origin == s.hints.origin || rest == "" {
			continue
		}
		fn(strings.Split(rest, "\n"))
	}
}
