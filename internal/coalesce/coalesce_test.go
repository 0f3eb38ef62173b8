package coalesce

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
)

// Wakes while a key runs make one more run of it, never two at once; other
// keys run beside it.
func TestWakesWhileRunningMakeOneMoreRun(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var runs, inside, most atomic.Int64
	entered := make(chan string, 10)
	release := map[string]chan struct{}{"a": make(chan struct{}), "b": make(chan struct{})}
	var mu sync.Mutex
	first := map[string]bool{}
	r := New(ctx, func(_ context.Context, key string) {
		if n := inside.Add(1); n > most.Load() {
			most.Store(n)
		}
		defer inside.Add(-1)
		runs.Add(1)
		mu.Lock()
		block := !first[key]
		first[key] = true
		mu.Unlock()
		entered <- key
		if block {
			<-release[key]
		}
	})
	r.Wake("a")
	if k := <-entered; k != "a" {
		t.Fatalf("ran %q first", k)
	}
	r.Wake("b") // another key runs beside a
	if k := <-entered; k != "b" {
		t.Fatalf("ran %q, want b", k)
	}
	for range 5 {
		r.Wake("a") // while a runs: one more run of a, after it
	}
	close(release["a"])
	if k := <-entered; k != "a" {
		t.Fatalf("ran %q, want a once more", k)
	}
	close(release["b"])
	r.Wait()
	if got := runs.Load(); got != 3 {
		t.Errorf("%d runs, want 3 (a twice, b once)", got)
	}
	if most.Load() > 2 {
		t.Errorf("%d runs at once, want at most one per key", most.Load())
	}
	select {
	case k := <-entered:
		t.Errorf("an extra run of %q", k)
	default:
	}
	cancel()
	r.Wake("a")
	r.Wait()
	if got := runs.Load(); got != 3 {
		t.Errorf("a wake after the context ended ran: %d runs", got)
	}
}
