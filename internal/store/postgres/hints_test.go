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
	"drover/internal/testkit"
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

// TestHintsAreCoalesced: a burst of hints from many writers reaches the
// other Store whole, in far fewer NOTIFYs than hints, and a Store never
// hears its own.
func TestHintsAreCoalesced(t *testing.T) {
	url := testkit.StartPostgres(t)
	a, b := openTest(t, url), openTest(t, url)
	la, lb := listen(t, a), listen(t, b)
	publishUntilHeard(t, a, lb, "ready")
	before := a.NotifiesSent()
	const writers, each = 8, 250
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
	t.Logf("%d hints in %d NOTIFYs", hints, notifies)
	if notifies <= 0 || notifies*20 > int64(hints) {
		t.Fatalf("%d hints took %d NOTIFYs; want at most a twentieth", hints, notifies)
	}
	la.mu.Lock()
	defer la.mu.Unlock()
	if len(la.keys) != 0 {
		t.Fatalf("a heard its own hints: %v", slices.Collect(maps.Keys(la.keys)))
	}
}

// TestHintListenerReconnects: when the listening connection is cut, Listen
// connects again, says everything may have changed, and hears hints again.
func TestHintListenerReconnects(t *testing.T) {
	url := testkit.StartPostgres(t)
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
	url := testkit.StartPostgres(t)
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
	held, release := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- a.Write(t.Context(), func(tx store.Tx) error {
			if _, err := tx.ClaimQueued("q-1"); err != nil {
				return err
			}
			select {
			case <-held:
			default:
				close(held)
			}
			<-release
			return nil
		})
	}()
	<-held
	err := b.Write(t.Context(), func(tx store.Tx) error { _, err := tx.ClaimQueued("q-1"); return err })
	close(release)
	if !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("claim of a row another transaction holds: %v; want it skipped (not found)", err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
