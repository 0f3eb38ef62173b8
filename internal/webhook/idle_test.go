package webhook_test

import (
	"context"
	"net/http"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/job"
	"drover/internal/retry"
	"drover/internal/store"
	"drover/internal/store/sqlite"
	"drover/internal/webhook"
)

// countingStore is a store in test code that counts its read transactions.
type countingStore struct {
	store.Store
	reads atomic.Int64
}

func (s *countingStore) Read(ctx context.Context, fn func(store.Tx) error) error {
	s.reads.Add(1)
	return s.Store.Read(ctx, fn)
}

// lookingCore is fakeCore counting how often the sender asked whether it
// leads: once a pass, so the count says how many passes it made.
type lookingCore struct {
	*fakeCore
	looks atomic.Int64
}

func (c *lookingCore) Leading() bool {
	c.looks.Add(1)
	return c.fakeCore.Leading()
}

// fakeClock is a clock in test code that moves only when told.
type fakeClock struct{ off atomic.Int64 }

var clockBase = time.Date(2026, 12, 7, 12, 0, 0, 0, time.UTC)

func (c *fakeClock) now() time.Time          { return clockBase.Add(time.Duration(c.off.Load())) }
func (c *fakeClock) advance(d time.Duration) { c.off.Add(int64(d)) }

// idleEnv is a leading sender over a counting store, ticking every
// millisecond on a fake clock.
func idleEnv(t *testing.T, p retry.Policy, recheck time.Duration) (*env, *countingStore, *lookingCore, *fakeClock) {
	t.Helper()
	st, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "hub.db"))
	if err != nil {
		t.Fatal(err)
	}
	cs := &countingStore{Store: st}
	e := newStoreEnv(t, cs, nil)
	core := &lookingCore{fakeCore: e.core}
	clock := &fakeClock{}
	ctx, cancel := context.WithCancel(context.WithoutCancel(t.Context()))
	e.hooks = webhook.New(ctx, core, webhook.Config{Store: cs, Retry: p, Sweep: time.Millisecond, Recheck: recheck,
		Now: clock.now, AllowPrivate: true})
	t.Cleanup(func() { cancel(); e.hooks.Wait() })
	return e, cs, core, clock
}

// passes waits for n more passes of the sender.
func passes(t *testing.T, core *lookingCore, n int64) {
	t.Helper()
	from := core.looks.Load()
	waitFor(t, "the sender's passes", func() bool { return core.looks.Load() >= from+n })
}

// TestIdleSenderReadsNothing: a leader with nothing to send reads the
// store when it starts leading, then not at all until its recheck is
// due, however many times it ticks (it read the outbox and the due
// deliveries at every tick: two read transactions a second on an idle
// hub).
func TestIdleSenderReadsNothing(t *testing.T) {
	e, st, core, clock := idleEnv(t, fastRetry, webhook.DefaultRecheck)
	e.core.leading.Store(true)
	passes(t, core, 2) // the first pass is done
	first := st.reads.Load()
	if first == 0 {
		t.Fatal("a new leader read nothing")
	}
	passes(t, core, 200)
	if n := st.reads.Load() - first; n != 0 {
		t.Fatalf("%d read transactions over 200 idle ticks, want none", n)
	}
	clock.advance(webhook.DefaultRecheck)
	waitFor(t, "the recheck's reads", func() bool { return st.reads.Load() > first })

	// Leading again after a pause is a new leader's first pass.
	e.core.leading.Store(false)
	passes(t, core, 2)
	before := st.reads.Load()
	e.core.leading.Store(true)
	waitFor(t, "a new leader's reads", func() bool { return st.reads.Load() > before })
}

// TestRetrySentWhenDue: a failed try's retry goes out when the clock
// reaches it, with no change and no recheck to wake the sender, and the
// sender reads nothing while it waits.
func TestRetrySentWhenDue(t *testing.T) {
	e, st, core, clock := idleEnv(t, retry.Policy{First: time.Hour, Max: time.Hour, Tries: 3}, 1000*time.Hour)
	e.core.leading.Store(true)
	rc := newReceiver(t)
	rc.answer = func(_ received, n int) int {
		if n == 0 {
			return http.StatusServiceUnavailable
		}
		return http.StatusOK
	}
	h := e.add(t, alice, apitypes.WebhookRequest{URL: rc.srv.URL, Events: []string{"job.finished"}})
	e.move(t, "j-1", alice.UserID, "", job.Queued)
	e.move(t, "j-1", alice.UserID, "", job.Completed)
	waitFor(t, "the first try recorded", func() bool {
		ds := e.deliveries(t, alice, h.ID)
		return len(ds) == 1 && ds[0].Attempts == 1
	})
	passes(t, core, 5)
	reads := st.reads.Load()
	passes(t, core, 100)
	if n := st.reads.Load() - reads; n != 0 {
		t.Errorf("%d read transactions while the retry was an hour away, want none", n)
	}
	if n := len(rc.requests()); n != 1 {
		t.Fatalf("%d requests before the retry was due, want 1", n)
	}
	clock.advance(2 * time.Hour)
	waitFor(t, "the retry delivered", func() bool {
		ds := e.deliveries(t, alice, h.ID)
		return len(ds) == 1 && ds[0].State == "delivered" && ds[0].Attempts == 2
	})
}
