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
)

// Hints between the hubs of one database, by LISTEN/NOTIFY. A hint is a
// short key ("job j-1 changed"); a hub publishes them after its commits and
// every other hub on the database receives them. They are only hints: a
// lost one costs the receiver latency until its slow sweep, never
// correctness, so delivery is best effort.
//
// NOTIFY serializes the commits of every notifying session on the server,
// so hints are never sent one per write: Publish buffers them and one
// NOTIFY per hintWindow carries all of them (several when they exceed a
// payload).
const (
	hintChannel = "drover_hints"
	// hintWindow bounds how long a hint waits for others to share its
	// NOTIFY.
	hintWindow = 20 * time.Millisecond
	// hintPayload stays under the server's 8000-byte payload limit.
	hintPayload = 7800
	// hintSendTimeout bounds one NOTIFY on a struggling server.
	hintSendTimeout = 5 * time.Second
	// listenBackoff is the first and the longest wait before the listening
	// connection is made again.
	listenBackoffMin = 100 * time.Millisecond
	listenBackoffMax = 5 * time.Second
)

// hints is a Store's side of the channel: what it has yet to send, and who
// it is, so that its own hints are not handed back to it.
type hints struct {
	origin  string
	mu      sync.Mutex
	pending map[string]bool
	order   []string // pending, in the order first published
	timer   *time.Timer
	closed  bool
	sent    atomic.Int64 // NOTIFY statements sent
}

func newHints() *hints {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return &hints{origin: hex.EncodeToString(b), pending: map[string]bool{}}
}

// Publish queues hints for the other hubs on the database. It never
// blocks on the server: they go out within hintWindow, coalesced.
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
	if h.timer == nil && len(h.order) > 0 {
		h.timer = time.AfterFunc(hintWindow, s.flushHints)
	}
}

// flushHints sends what is pending, in as few NOTIFYs as fit the payload.
func (s *Store) flushHints() {
	h := s.hints
	h.mu.Lock()
	keys := h.order
	h.order, h.pending, h.timer = nil, map[string]bool{}, nil
	h.mu.Unlock()
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

// closeHints sends what is pending and stops publishing.
func (s *Store) closeHints() {
	h := s.hints
	h.mu.Lock()
	h.closed = true
	t := h.timer
	h.mu.Unlock()
	if t != nil && t.Stop() {
		s.flushHints()
	}
}

// NotifiesSent is how many NOTIFY statements this Store has sent (tests
// and metrics see the coalescing by it).
func (s *Store) NotifiesSent() int64 { return s.hints.sent.Load() }

// Listen hands fn every batch of hints the other Stores on the database
// publish, until ctx ends. It listens on a connection of its own, made
// again with backoff when lost; after each such gap, in which hints may
// have been missed, fn gets nil: everything may have changed.
func (s *Store) Listen(ctx context.Context, fn func(keys []string)) error {
	backoff := listenBackoffMin
	missed := false // hints may have been lost since the last connection
	for {
		err := s.listenOnce(ctx, func() {
			backoff = listenBackoffMin
			if missed {
				fn(nil)
			}
			missed = true // from now on, a lost connection loses hints
		}, fn)
		if ctx.Err() != nil {
			return nil
		}
		_ = err // the connection is made again; hubs log nothing per retry
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, listenBackoffMax)
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
