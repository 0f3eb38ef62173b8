package postgres

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	"drover/internal/job"
	"drover/internal/store"
)

// listener collects what one Store's Listen hands over.
type listener struct {
	mu      sync.Mutex
	keys    map[string]int
	batches int
	resets  int // nil batches: everything may have changed
	ch      chan struct{}
}

func listen(t *testing.T, s *Store) *listener {
	t.Helper()
	l := &listener{keys: map[string]int{}, ch: make(chan struct{}, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		_ = s.Listen(ctx, func(keys []string) {
			l.mu.Lock()
			if keys == nil {
				l.resets++
			}
			l.batches++
			for _, k := range keys {
				l.keys[k]++
			}
			l.mu.Unlock()
			select {
			case l.ch <- struct{}{}:
			default:
			}
		})
	}()
	t.Cleanup(func() { cancel(); <-done })
	return l
}

// waitFor waits until cond holds over what l received.
func (l *listener) waitFor(t *testing.T, what string, cond func(*listener) bool) {
	t.Helper()
	deadline := time.After(20 * time.Second)
	for {
		l.mu.Lock()
		ok := cond(l)
		l.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-l.ch:
		case <-time.After(10 * time.Millisecond):
		case <-deadline:
			t.Fatalf("never got %s", what)
		}
	}
}

// publishUntilHeard publishes key until l hears it: a Listen started just
// now may not hold LISTEN yet.
func publishUntilHeard(t *testing.T, s *Store, l *listener, key string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s.Publish(key)
		l.mu.Lock()
		heard := l.keys[key] > 0
		l.mu.Unlock()
		if heard {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never heard", key)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitSent waits until s has sent n NOTIFYs: a listener may hear one
// before its sender counts it.
func waitSent(t *testing.T, s *Store, n int64) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for s.NotifiesSent() < n {
		if time.Now().After(deadline) {
			t.Fatalf("%d NOTIFYs sent; want %d", s.NotifiesSent(), n)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestALoneHintGoesAtOnce: a hint published on an idle Store goes out
// without waiting for the window (here an hour, so only the leading edge
// can deliver it); one published right after is held behind it until the
// window ends or the Store closes, then both of those travel together.
func TestALoneHintGoesAtOnce(t *testing.T) {
	url := migratedURL(t)
	a, b, c := openTest(t, url), openTest(t, url), openTest(t, url)
	a.hints.window = time.Hour
	lb := listen(t, b)
	publishUntilHeard(t, c, lb, "ready")

	a.Publish("lone")
	lb.waitFor(t, "the lone hint", func(l *listener) bool { return l.keys["lone"] > 0 })
	waitSent(t, a, 1)

	a.Publish("held-1")
	a.Publish("held-2", "held-1")
	// c's hint goes out after a's would have if a sent one per publish.
	c.Publish("marker")
	lb.waitFor(t, "c's marker", func(l *listener) bool { return l.keys["marker"] > 0 })
	lb.mu.Lock()
	early := lb.keys["held-1"] + lb.keys["held-2"]
	batches := lb.batches
	lb.mu.Unlock()
	a.hints.mu.Lock()
	held := slices.Clone(a.hints.order)
	a.hints.mu.Unlock()
	if early > 0 || a.NotifiesSent() != 1 || !slices.Equal(held, []string{"held-1", "held-2"}) {
		t.Fatalf("hints published right after one was sent: %d heard, %d NOTIFYs in all, %q pending; want them held behind the first",
			early, a.NotifiesSent(), held)
	}

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	lb.waitFor(t, "the held hints, sent by Close", func(l *listener) bool { return l.keys["held-1"] > 0 && l.keys["held-2"] > 0 })
	lb.mu.Lock()
	defer lb.mu.Unlock()
	if got := a.NotifiesSent(); got != 2 || lb.batches != batches+1 || lb.keys["held-1"] != 1 {
		t.Fatalf("held hints took %d NOTIFYs (%d in all) and %d batches, held-1 heard %d times; want one NOTIFY, once each",
			got-1, got, lb.batches-batches, lb.keys["held-1"])
	}
}

// TestHintsAreCoalesced: a burst of hints from many writers reaches the
// other Store whole, in a handful of NOTIFYs (at most one per window, split
// by the payload), and a Store never hears its own.
func TestHintsAreCoalesced(t *testing.T) {
	url := migratedURL(t)
	a, b := openTest(t, url), openTest(t, url)
	la, lb := listen(t, a), listen(t, b)
	publishUntilHeard(t, a, lb, "ready")
	waitIdle(t, a)
	before := a.NotifiesSent()
	const writers, each = 8, 250
	start := time.Now()
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				// Repeats of one key within a window travel once.
				a.Publish(fmt.Sprintf("j:%d-%d", w, i), "q")
			}
		}()
	}
	wg.Wait()
	waitIdle(t, a)
	took := time.Since(start)
	lb.waitFor(t, "every hint", func(l *listener) bool {
		for w := range writers {
			for i := range each {
				if l.keys[fmt.Sprintf("j:%d-%d", w, i)] == 0 {
					return false
				}
			}
		}
		return l.keys["q"] > 0
	})
	hints, notifies := writers*each*2, a.NotifiesSent()-before
	// One NOTIFY per window at most (the first at once), each batch split
	// by the payload: a key fits in any NOTIFY's last half.
	windows := int64(took/hintWindow) + 1
	bytes := int64(writers*each*len("j:0-000\n")) + windows*int64(len("q\n"))
	limit := windows + 2*bytes/hintPayload + 1
	t.Logf("%d hints in %d NOTIFYs over %v (at most %d: %d windows)", hints, notifies, took.Round(time.Millisecond), limit, windows)
	if notifies <= 0 || notifies > limit || notifies*20 > int64(hints) {
		t.Fatalf("%d hints took %d NOTIFYs over %v; want at most %d and a twentieth", hints, notifies, took, limit)
	}
	la.mu.Lock()
	defer la.mu.Unlock()
	if len(la.keys) != 0 {
		t.Fatalf("a heard its own hints: %v", slices.Collect(maps.Keys(la.keys)))
	}
}

// waitIdle waits until s's sender has sent everything and ended after a
// window without hints.
func waitIdle(t *testing.T, s *Store) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		s.hints.mu.Lock()
		busy := s.hints.busy
		s.hints.mu.Unlock()
		if !busy {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("the hint sender never went idle")
		}
		time.Sleep(time.Millisecond)
	}
}

// TestHintListenerReconnects: when the listening connection is cut, Listen
// connects again, says everything may have changed, and hears hints again.
func TestHintListenerReconnects(t *testing.T) {
	url := migratedURL(t)
	a, b := openTest(t, url), openTest(t, url)
	lb := listen(t, b)
	publishUntilHeard(t, a, lb, "before")
	// Cut every other session of the database: the listener's among them.
	if _, err := a.db.ExecContext(t.Context(), `SELECT pg_terminate_backend(pid) FROM pg_stat_activity
		WHERE datname = current_database() AND pid <> pg_backend_pid() AND query LIKE 'LISTEN%'`); err != nil {
		t.Fatal(err)
	}
	lb.waitFor(t, "a reset after the reconnect", func(l *listener) bool { return l.resets > 0 })
	publishUntilHeard(t, a, lb, "after")
}

// TestClaimSkipsALockedJob: while one hub's transaction holds a queued
// job's row, another's claim skips it at once instead of queueing behind.
func TestClaimSkipsALockedJob(t *testing.T) {
	url := migratedURL(t)
	a, b := openTest(t, url), openTest(t, url)
	now := time.Now()
	if err := a.Write(t.Context(), func(tx store.Tx) error {
		return errors.Join(
			tx.InsertUser(store.User{ID: "u-1", Name: "alice", CreatedAt: now}),
			tx.InsertJob(store.Job{ID: "q-1", State: job.Queued, Agent: "exec", RequesterID: "u-1", CreatedAt: now, UpdatedAt: now}),
		)
	}); err != nil {
		t.Fatal(err)
	}
	release := holding(t, a, func(tx store.Tx) error { _, err := tx.ClaimQueued("q-1"); return err })
	err := b.Write(t.Context(), func(tx store.Tx) error { _, err := tx.ClaimQueued("q-1"); return err })
	rerr := release()
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("claim of a row another transaction holds: %v; want it skipped (not found)", err)
	}
	if rerr != nil {
		t.Fatal(rerr)
	}
}
