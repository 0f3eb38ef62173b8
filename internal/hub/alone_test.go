package hub

import (
	"context"
	"slices"
	"sync"
	"testing"
	"time"

	"drover/internal/store"
	"drover/internal/testkit"
)

// keptHints records what a hub publishes and hears nothing: a hub alone
// on a shared database.
type keptHints struct {
	mu   sync.Mutex
	keys []string
}

func (k *keptHints) Publish(keys ...string) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.keys = append(k.keys, keys...)
}

func (k *keptHints) Listen(ctx context.Context, _ func([]string)) error {
	<-ctx.Done()
	return nil
}

func (k *keptHints) published(key string) bool {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Contains(k.keys, key)
}

// TestAloneHubCrossSweepsAtTheNetsOnly: a hub alone on a shared database
// cross sweeps only when a safety net's full read is due (every
// crossFullEvery ticks), not at every tick; it says it started; once
// another live hub appears (its hint heard), it sweeps at every tick
// again. Every tick swept before: an alone Postgres hub read three
// transactions every 5 s for changes only another hub could make.
func TestAloneHubCrossSweepsAtTheNetsOnly(t *testing.T) {
	t.Parallel()
	var reads readCounts
	hints := &keptHints{}
	th := startHubOn(t, Config{Hints: hints, CrossSweep: 20 * time.Millisecond, Sweep: time.Hour},
		func(st store.Store) store.Store { return readCountStore{st, &reads} })
	if !hints.published(hintHub) {
		t.Fatalf("the hub did not say it started; it published %q", hints.keys)
	}
	// Every token is read once every crossFullEvery ticks, swept or not.
	nets := func(n int64) int64 {
		t.Helper()
		testkit.WaitFor(t, time.Minute, "the nets' full reads", func() bool { return reads.tokens.Load() >= n })
		return reads.active.Load()
	}
	from := nets(reads.tokens.Load() + 1)
	if n := nets(reads.tokens.Load()+2) - from; n > 3 {
		t.Fatalf("an alone hub cross swept %d times in %d ticks; want one a net (2)", n, 2*crossFullEvery)
	}

	ctx := t.Context()
	if err := th.h.store.Write(ctx, func(tx store.Tx) error {
		return tx.PutHub(store.Hub{ID: "another", StartedAt: time.Now(), LastSeen: time.Now().Add(time.Hour)})
	}); err != nil {
		t.Fatal(err)
	}
	th.h.heard(ctx, []string{hintHub})
	from = nets(reads.tokens.Load() + 1)
	if n := nets(reads.tokens.Load()+1) - from; n < crossFullEvery/2 {
		t.Fatalf("beside another hub, %d cross sweeps from one net's full read to the next; want one a tick (%d)", n, crossFullEvery)
	}
}
