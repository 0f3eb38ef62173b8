package forgework_test

import (
	"context"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"drover/internal/forgework"
	"drover/internal/store"
	"drover/internal/store/sqlite"
	"drover/internal/testkit"
)

// countingStore is a store in test code that counts its transactions.
type countingStore struct {
	store.Store
	reads, writes atomic.Int64
}

func (s *countingStore) Read(ctx context.Context, fn func(store.Tx) error) error {
	s.reads.Add(1)
	return s.Store.Read(ctx, fn)
}

func (s *countingStore) Write(ctx context.Context, fn func(store.Tx) error) error {
	s.writes.Add(1)
	return s.Store.Write(ctx, fn)
}

// TestIdleLeaderPrunesSeldom: an idle leader's sweeps (one read each)
// prune the finished deliveries once, then again only when the interval
// has passed on its clock (it wrote at every sweep: a write transaction
// every 5 s on an idle hub).
func TestIdleLeaderPrunesSeldom(t *testing.T) {
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "hub.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	cs := &countingStore{Store: st}
	var off atomic.Int64
	base := time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)
	now := func() time.Time { return base.Add(time.Duration(off.Load())) }
	ctx, cancel := context.WithCancel(context.Background())
	svc := forgework.New(ctx, &fakeCore{st: cs}, forgework.Config{Store: cs, Sweep: time.Millisecond, Now: now})
	t.Cleanup(func() { cancel(); svc.Wait() })
	testkit.WaitFor(t, time.Minute, "100 sweeps", func() bool { return cs.reads.Load() >= 100 })
	if w := cs.writes.Load(); w != 1 {
		t.Fatalf("%d prunes over %d idle sweeps, want one", w, cs.reads.Load())
	}
	off.Add(int64(time.Hour))
	testkit.WaitFor(t, time.Minute, "the next prune", func() bool { return cs.writes.Load() == 2 })
}
