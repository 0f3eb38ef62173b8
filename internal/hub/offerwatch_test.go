package hub

import (
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/protocol"
	"drover/internal/store"
)

// TestFinishedOfferWakesNoSweep: an offer accepted and finished before
// its timeout wakes no sweep when the timeout passes; one still
// unaccepted does, and is taken back. Every offer woke a sweep an offer
// timeout after it was made: 100 jobs run one after another cost an idle
// hub 100 sweeps (200 read transactions on Postgres) 30 s later.
func TestFinishedOfferWakesNoSweep(t *testing.T) {
	var reads readCounts
	th := startHubOn(t, Config{OfferTimeout: time.Second, Sweep: time.Hour},
		func(st store.Store) store.Store { return readCountStore{st, &reads} })
	sr, _ := th.dial(th.registerRunner("r1"), protocol.Hello{Slots: 1})
	done := th.submit("echo", "done")
	o := sr.offer()
	runToEnd(t, sr, o, "done\n", 0)
	th.waitJob(done.ID, func(v apitypes.JobView) bool { return v.State == "completed" })
	before := reads.active.Load() // a sweep's, here
	// Past the finished offer's timeout (and the whole second after it),
	// so that its wakeup, if any, comes before the left offer's.
	time.Sleep(2500 * time.Millisecond)
	left := th.submit("echo", "left")
	if o := sr.offer(); o.Job != left.ID || o.Epoch != 1 {
		t.Fatalf("offer: %+v", o)
	}
	// Not accepted: its timeout's sweep takes it back, and it is offered
	// again.
	if o := sr.offer(); o.Job != left.ID || o.Epoch != 2 {
		t.Fatalf("offer again: %+v", o)
	}
	if n := reads.active.Load() - before; n != 1 {
		t.Fatalf("%d sweeps by the time the unaccepted offer was taken back; want 1 (none for the finished one)", n)
	}
}
