package hub

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/auth"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/store"
	"drover/internal/testkit"
)

// releasesStore counts the write transactions that release a runner's
// connection (ReleaseRunner or RunnersLeft): a detach's record.
type releasesStore struct {
	store.Store
	n *atomic.Int64
}

func (s releasesStore) Write(ctx context.Context, fn func(store.Tx) error) error {
	var released bool
	err := s.Store.Write(ctx, func(tx store.Tx) error { return fn(releasesTx{tx, &released}) })
	if released {
		s.n.Add(1)
	}
	return err
}

type releasesTx struct {
	store.Tx
	released *bool
}

func (t releasesTx) ReleaseRunner(runnerID, hubID string) error {
	*t.released = true
	return t.Tx.ReleaseRunner(runnerID, hubID)
}

func (t releasesTx) RunnersLeft(ids []string, hubID string, at time.Time) error {
	*t.released = true
	return t.Tx.RunnersLeft(ids, hubID, at)
}

// TestStopDetachesInBatches: a hub that stops with many runners connected
// closes every connection and records their departures in a few write
// transactions, not one per runner (which took a hub with 10,000 runners
// longer to stop than a supervisor waits), each a few statements for
// hundreds of runners (three per runner made 10,000 runners' departures
// 9 s of a stop). What a detach promises holds
// for each: its last contact and release are recorded, an offer it had
// not accepted goes back to the queue, and an accepted attempt keeps its
// lease (the runner may bring it to the next hub).
func TestStopDetachesInBatches(t *testing.T) {
	t.Parallel()
	n := detachBatch + 100 // two batches
	if testing.Short() {
		n = 300
	}
	var writes atomic.Int64
	// Heartbeats and leases longer than connecting the fleet takes under
	// -race on a busy machine: the fleet's light clients do not heartbeat.
	var stmts statementsByText
	th := startHubOn(t, Config{Heartbeat: 2 * time.Minute, Lease: 10 * time.Minute}, func(st store.Store) store.Store {
		stmts, _ = st.(statementsByText)
		return releasesStore{st, &writes}
	})
	if stmts == nil {
		t.Fatal("the test hub's store counts no statements")
	}
	ctx := t.Context()

	// Two scripted runners: one holds an offer it has not accepted, the
	// other an attempt it accepted.
	offered, _ := th.dial(th.registerRunner("offered"), protocol.Hello{Slots: 1, Labels: map[string]string{"r": "offered"}})
	running, _ := th.dial(th.registerRunner("running"), protocol.Hello{Slots: 1, Labels: map[string]string{"r": "running"}})
	submit := func(label string) apitypes.JobView {
		var v apitypes.JobView
		if code, e := th.call(th.admin, "POST", "/jobs", apitypes.SubmitRequest{Agent: "exec", Args: []string{"true"}, Labels: map[string]string{"r": label}}, &v); code != http.StatusCreated {
			t.Fatalf("submit: %d %v", code, e)
		}
		return v
	}
	jOffered, jRunning := submit("offered"), submit("running")
	if o := offered.offer(); o.Job != jOffered.ID {
		t.Fatalf("offer of %s, want %s", o.Job, jOffered.ID)
	}
	o := running.offer()
	wantOK(t, running.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))

	rs, ids := idleFleet(t, th, "idle", n)
	fl := newBenchFleet()
	defer fl.close()
	fl.connect(t, rs)
	if got := th.h.reg.count(); got != n+2 {
		t.Fatalf("%d runners connected, want %d", got, n+2)
	}

	before, stmts0 := writes.Load(), stmts.Statements()
	th.h.detachAll("hub shutting down")
	// Whatever else the hub runs meanwhile, far fewer than one per runner.
	if got := stmts.Statements() - stmts0; got > int64(n/4) {
		t.Errorf("the stop's detach of %d runners ran %d statements; want at most %d", n+2, got, n/4)
	}
	if got := th.h.reg.count(); got != 0 {
		t.Fatalf("%d runners still registered after the stop's detach", got)
	}
	// Every departure recorded: nobody held by this hub, each last seen.
	testkit.WaitFor(t, 2*time.Minute, "every runner's departure recorded", func() bool {
		var held map[string]string
		var seen int
		if err := th.h.store.Read(ctx, func(tx store.Tx) error {
			var err error
			if held, err = tx.HeldRunners(time.Time{}); err != nil {
				return err
			}
			all, err := tx.Runners()
			for _, rn := range all {
				if ids[rn.ID] && rn.LastSeen != nil && !rn.LastSeen.Before(th.h.started) {
					seen++
				}
			}
			return err
		}); err != nil {
			t.Fatal(err)
		}
		return len(held) == 0 && seen == n
	})
	// A transaction per thousand runners.
	if got, want := writes.Load()-before, int64((n+2+detachBatch-1)/detachBatch); got != want {
		t.Errorf("the stop's detach of %d runners took %d write transactions; want at most %d", n+2, got, want)
	}
	testkit.WaitFor(t, 2*time.Minute, "every idle runner's connection closed", func() bool { return fl.lost.Load() == int64(n) })
	if c := offered.waitClosed(); c != 1001 {
		t.Errorf("closed with %d, want 1001 (going away)", c)
	}
	if v := th.job(jOffered.ID); v.State != job.Queued {
		t.Errorf("the job offered to a runner of the stopped hub is %s, want queued again", v.State)
	}
	if v := th.job(jRunning.ID); v.State != job.Running {
		t.Errorf("the job accepted by a runner of the stopped hub is %s, want still running (its lease holds)", v.State)
	}
}

// TestStoppingHubTakesNoHello: the runners a stopping hub closed dial
// again at once; it tells each to come back (503 before the upgrade)
// rather than attach a runner it would have to detach again, while its
// server waited for those hellos before it stopped.
func TestStoppingHubTakesNoHello(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	tok := th.registerRunner("late")
	th.h.stopping.Store(true)
	if code := th.dialStatus(tok); code != http.StatusServiceUnavailable {
		t.Fatalf("a dial to a stopping hub: status %d, want 503", code)
	}
	if n := th.h.reg.count(); n != 0 {
		t.Fatalf("%d runners attached to a stopping hub", n)
	}
}

// gatedReleases is releasesStore whose first release waits for the gate
// (after its commit), as a slow store would.
type gatedReleases struct {
	releasesStore
	gate chan struct{}
	once atomic.Bool
}

func (s *gatedReleases) Write(ctx context.Context, fn func(store.Tx) error) error {
	before := s.n.Load()
	err := s.releasesStore.Write(ctx, fn)
	if s.n.Load() > before && s.once.CompareAndSwap(false, true) {
		<-s.gate
	}
	return err
}

// TestFleetDroppingAtOnceDepartsInBatches: runners whose connections end
// on their own while a departure is being recorded are recorded together
// in the next transaction, not one write (and a read) each: 300 runners
// dropping at once took 300 write transactions, and a hub whose fleet of
// 10,000 dropped before it stopped was still writing them when its
// supervisor gave up. Every departure is recorded all the same.
func TestFleetDroppingAtOnceDepartsInBatches(t *testing.T) {
	t.Parallel()
	const n = 300
	var writes atomic.Int64
	gate := make(chan struct{})
	var gs *gatedReleases
	th := startHubOn(t, Config{Heartbeat: 2 * time.Minute, Lease: 10 * time.Minute}, func(st store.Store) store.Store {
		gs = &gatedReleases{releasesStore: releasesStore{st, &writes}, gate: gate}
		return gs
	})
	ctx := t.Context()
	rs, ids := idleFleet(t, th, "drop", n)
	fl := newBenchFleet()
	fl.connect(t, rs)
	before := writes.Load()
	fl.close()
	testkit.WaitFor(t, 2*time.Minute, "every connection gone from the registry", func() bool { return th.h.reg.count() == 0 })
	close(gate)
	testkit.WaitFor(t, 2*time.Minute, "every runner's departure recorded", func() bool {
		var held map[string]string
		if err := th.h.store.Read(ctx, func(tx store.Tx) error {
			var err error
			held, err = tx.HeldRunners(time.Time{})
			return err
		}); err != nil {
			t.Fatal(err)
		}
		for id := range held {
			if ids[id] {
				return false
			}
		}
		return true
	})
	// The first departure alone, the rest (written meanwhile) together.
	if got := writes.Load() - before; got > 2 {
		t.Errorf("%d runners dropping at once took %d write transactions to record; want 2", n, got)
	}
}

// idleFleet registers n runners named prefix0000... in one transaction:
// light clients to connect with a benchFleet, and their ids.
func idleFleet(t *testing.T, th *testHub, prefix string, n int) ([]benchRunner, map[string]bool) {
	t.Helper()
	rs := make([]benchRunner, n)
	ids := map[string]bool{}
	if err := th.h.store.Write(t.Context(), func(tx store.Tx) error {
		admin, err := tx.Meta(metaAdmin)
		if err != nil {
			return err
		}
		for i := range rs {
			tok := auth.NewToken(auth.PrefixRunner)
			rn, _, err := bindRunner(tx, th.h.now(), admin, fmt.Sprintf("%s%04d", prefix, i), auth.Hash(tok), false)
			if err != nil {
				return err
			}
			ids[rn.ID] = true
			rs[i] = benchRunner{url: th.srv.URL, token: tok, labels: map[string]string{"r": "idle"}}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return rs, ids
}
