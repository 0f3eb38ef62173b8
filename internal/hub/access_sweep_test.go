package hub

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	dto "github.com/prometheus/client_model/go"

	"drover/internal/apitypes"
	"drover/internal/protocol"
	"drover/internal/sandbox/sandboxtest"
	"drover/internal/store"
)

// accessLoads is how many runners' access th read for the runners it
// holds so far (connects, changes, hints, cross sweeps).
func accessLoads(th *testHub) int {
	var m dto.Metric
	if err := th.h.metrics.accessLoads.Write(&m); err != nil {
		th.t.Fatal(err)
	}
	return int(m.GetCounter().GetValue())
}

// connectedLoads waits until th read the access of its n runners that
// just connected (each connect reads it once more once attached).
func connectedLoads(t *testing.T, th *testHub, n int) {
	t.Helper()
	sandboxtest.WaitFor(t, "the connects to read the runners' access", func() bool { return accessLoads(th) >= n })
}

// mayRunHere: may the runner held by th run a job of the user, by the
// access th keeps in memory?
func mayRunHere(th *testHub, runnerID, userID string) bool {
	th.h.reg.mu.Lock()
	defer th.h.reg.mu.Unlock()
	c := th.h.reg.conns[runnerID]
	return c != nil && c.access.mayRun(userID, "", false)
}

func userID(t *testing.T, th *testHub, name string) string {
	t.Helper()
	var id string
	if err := th.h.store.Read(t.Context(), func(tx store.Tx) error {
		u, err := tx.UserByName(name)
		id = u.ID
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return id
}

// TestCrossHubAccessChangeWithHintsLost: with every hint lost, a share
// and an unshare made on hub A reach hub B, which holds the runner, in
// one cross sweep, which reloads that runner's access only; a listener
// reconnect still reloads every runner's.
func TestCrossHubAccessChangeWithHintsLost(t *testing.T) {
	t.Parallel()
	hs := startHubs(t, 2, Config{CrossSweep: noSweep}, true)
	a, b := hs[0], hs[1]
	ctx := t.Context()
	alice, bob := a.addUser("alice"), a.addUser("bob")
	aliceID := userID(t, a, "alice")
	box, w := b.dial(a.registerRunnerOf(bob, "b-box"), protocol.Hello{Slots: 2})
	b.dial(a.registerRunnerOf(bob, "b-other"), protocol.Hello{}) // held by B too, never changed
	connectedLoads(t, b, 2)
	j := a.submitAs(alice, apitypes.SubmitRequest{})
	b.h.crossSweep(ctx, false) // B's first look reloads both
	b.waitQueued(j.ID, waitNotYours)

	loads := accessLoads(b)
	a.share(bob, "b-box", true, apitypes.ShareRequest{User: "alice"})
	a.accept(alice, "b-box", "")
	if mayRunHere(b, w.RunnerID, aliceID) {
		t.Fatal("B knew of the share before its cross sweep: the hints were not lost")
	}
	b.h.crossSweep(ctx, false)
	if !mayRunHere(b, w.RunnerID, aliceID) {
		t.Fatal("B's cross sweep did not pick up the share made on A")
	}
	runToEnd(t, box, box.offerFor(j.ID), "one\n", 0)

	a.share(bob, "b-box", false, apitypes.ShareRequest{User: "alice"})
	if !mayRunHere(b, w.RunnerID, aliceID) {
		t.Fatal("B knew of the unshare before its cross sweep: the hints were not lost")
	}
	b.h.crossSweep(ctx, false)
	if mayRunHere(b, w.RunnerID, aliceID) {
		t.Fatal("B's cross sweep did not pick up the unshare made on A")
	}
	if got := accessLoads(b) - loads; got != 2 {
		t.Fatalf("B's two sweeps after a change each read %d runners' access in all, want 1 each (b-box only)", got)
	}
	loads = accessLoads(b)
	b.h.heard(ctx, nil) // the listener reconnected: hints may have been lost
	if got := accessLoads(b) - loads; got != 2 {
		t.Fatalf("after a listener reconnect B read %d runners' access, want both", got)
	}
}

// TestIdleCrossSweepReadsNoAccess: cross sweeps with nothing changed read
// no runner's access, where a full reload (what every sweep did before)
// reads each runner's; the safety net does so every accessFullEvery sweeps.
func TestIdleCrossSweepReadsNoAccess(t *testing.T) {
	t.Parallel()
	hs := startHubs(t, 2, Config{CrossSweep: noSweep}, true)
	a, b := hs[0], hs[1]
	ctx := t.Context()
	const runners = 3
	for i := range runners {
		b.dial(a.registerRunner(fmt.Sprintf("r%d", i)), protocol.Hello{})
	}
	connectedLoads(t, b, runners)
	b.h.crossSweep(ctx, false) // the first look reloads every one
	loads := accessLoads(b)
	for range accessFullEvery - 1 {
		b.h.crossSweep(ctx, false)
	}
	if got := accessLoads(b) - loads; got != 0 {
		t.Fatalf("%d idle cross sweeps read %d runners' access, want none", accessFullEvery-1, got)
	}
	b.h.crossSweep(ctx, false)
	if got := accessLoads(b) - loads; got != runners {
		t.Fatalf("the safety net's sweep read %d runners' access, want all %d", got, runners)
	}
	loads = accessLoads(b)
	b.h.crossSweep(ctx, true)
	if got := accessLoads(b) - loads; got != runners {
		t.Fatalf("a full sweep read %d runners' access, want all %d", got, runners)
	}
	// A full reload that failed (the database away just after the
	// listener reconnected) is owed: the next sweep does it.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if err := b.h.refreshChangedAccess(gone, true); err == nil {
		t.Fatal("a reload without a database succeeded")
	}
	loads = accessLoads(b)
	b.h.crossSweep(ctx, false)
	if got := accessLoads(b) - loads; got != runners {
		t.Fatalf("the sweep after a failed full reload read %d runners' access, want all %d", got, runners)
	}
}

// TestRunnerAccessesFromTables: the access of many runners read from
// whole tables (a full reload) is what reading each one gives.
func TestRunnerAccessesFromTables(t *testing.T) {
	t.Parallel()
	th, _, bob := startTenants(t)
	for i := range accessTablesFrom + 2 {
		name := fmt.Sprintf("r-%d", i)
		switch {
		case i%3 == 0:
			th.registerRunnerOf(th.admin, name)
			if i%2 == 0 {
				th.share(th.admin, name, true, apitypes.ShareRequest{Hub: true})
			}
		default:
			th.registerRunnerOf(bob, name)
			if i%2 == 1 {
				th.share(bob, name, true, apitypes.ShareRequest{User: "alice"})
			}
		}
	}
	if err := th.h.store.Read(t.Context(), func(tx store.Tx) error {
		rns, err := tx.Runners()
		if err != nil {
			return err
		}
		var ids []string
		var want []*runnerAccess
		for _, rn := range rns {
			ra, err := loadRunnerAccess(tx, rn.ID)
			if err != nil {
				return err
			}
			ids, want = append(ids, rn.ID), append(want, ra)
		}
		if len(ids) < accessTablesFrom {
			t.Fatalf("%d runners: the tables are not read", len(ids))
		}
		got, err := loadRunnerAccesses(tx, ids)
		if err != nil {
			return err
		}
		for i := range ids {
			if !reflect.DeepEqual(got[i], want[i]) {
				t.Errorf("access of runner %s read from the tables: %+v, want %+v", ids[i], *got[i], *want[i])
			}
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
}
