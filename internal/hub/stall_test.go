package hub

import (
	"context"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/store"
)

// TestHubStallDoesNotCountAgainstRunners: a hub stopped (SIGSTOP) for
// longer than a lease hears no heartbeats meanwhile, so when it runs again
// the leases in its store are over and its runners' connections are gone
// (their pings timed out). It gives them a full lease from then, as a
// restarted hub does: a runner back within it keeps its attempt, one that
// never comes back still ends unknown. Before, the sweep that the
// runner's leaving kicked made every such attempt unknown at once.
func TestHubStallDoesNotCountAgainstRunners(t *testing.T) {
	const lease = 3 * time.Second
	th := startHub(t, Config{Lease: lease, Heartbeat: 300 * time.Millisecond, Sweep: 50 * time.Millisecond})
	back, gone := th.registerRunner("back"), th.registerRunner("gone")
	run := func(tok string) (*scriptRunner, protocol.Offer, string) {
		sr, _ := th.dial(tok, protocol.Hello{Slots: 1})
		v := th.submit("sleep", "100")
		o := sr.offer()
		wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
		return sr, o, v.ID
	}
	srBack, oBack, jobBack := run(back)
	srGone, oGone, jobGone := run(gone)

	// The stop: no look at the clock for 3 s, the stored leases ended
	// during it, both runners' connections dropped.
	th.h.stall.mu.Lock()
	th.h.stall.last = time.Now().Add(-3 * time.Second)
	th.h.stall.mu.Unlock()
	srBack.ws.CloseNow()
	srGone.ws.CloseNow()
	for _, id := range []string{oBack.Attempt, oGone.Attempt} {
		if err := th.h.store.Write(context.Background(), func(tx store.Tx) error {
			a, err := tx.Attempt(id)
			if err != nil {
				return err
			}
			a.LeaseUntil = time.Now().Add(-time.Second)
			return tx.UpdateAttempt(a)
		}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(300 * time.Millisecond) // several sweeps (every 50 ms, and the leaving's kicks)

	sr, w := th.dial(back, protocol.Hello{Slots: 1, Attempts: []protocol.Held{{AttemptRef: oBack.AttemptRef, Phase: protocol.PhaseRunning}}})
	sr.keepAlive(100 * time.Millisecond)
	if len(w.Drop) != 0 {
		t.Fatalf("the runner back within a lease of the hub's stop was told to drop %+v", w.Drop)
	}
	if v := th.job(jobBack); v.State != job.Running {
		t.Fatalf("job of the runner back within a lease: %s (%s)", v.State, v.Reason)
	}
	v := th.waitJob(jobGone, func(v apitypes.JobView) bool { return v.State == job.Unknown })
	if v.Reason != job.ReasonRunnerLost {
		t.Fatalf("job of the runner that never came back: %+v", v)
	}
	if v := th.job(jobBack); v.State != job.Running {
		t.Fatalf("job of the connected runner after the grace: %s (%s)", v.State, v.Reason)
	}
}

func TestStallWatch(t *testing.T) {
	t.Parallel()
	t0 := time.Now()
	var s stallWatch
	steps := []struct {
		at   time.Duration
		want time.Duration // stall end, from t0 (-1: none)
	}{
		{0, -1},
		{stallTick, -1},
		{stallTick + stallGap, -1}, // exactly the gap is no stall
		{2*stallTick + 2*stallGap, 2*stallTick + 2*stallGap},
		{3*stallTick + 2*stallGap, 2*stallTick + 2*stallGap},
		{stallTick, 2*stallTick + 2*stallGap}, // a look from the past changes nothing
	}
	for i, st := range steps {
		got := s.look(t0.Add(st.at))
		want := time.Time{}
		if st.want >= 0 {
			want = t0.Add(st.want)
		}
		if !got.Equal(want) {
			t.Fatalf("step %d: stall end %v, want %v", i, got.Sub(t0), want.Sub(t0))
		}
	}
}
