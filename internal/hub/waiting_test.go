package hub

import (
	"errors"
	"net/http"
	"testing"

	"drover/internal/apitypes"
	"drover/internal/job"
	"drover/internal/protocol"
)

// nextOfInterest returns the next offer or queue frame sr receives.
func (sr *scriptRunner) nextOfInterest() protocol.Frame {
	sr.t.Helper()
	for {
		f := sr.read()
		if f.Type == protocol.TypeOffer || f.Type == protocol.TypeQueue {
			return f
		}
	}
}

func wantQueue(t *testing.T, f protocol.Frame, waiting bool) {
	t.Helper()
	var q protocol.Queue
	if f.Type != protocol.TypeQueue || f.Decode(&q) != nil || q.Waiting != waiting {
		t.Fatalf("got %s %s, want queue waiting=%v", f.Type, f.Body, waiting)
	}
}

func wantOffer(t *testing.T, f protocol.Frame, jobID string) protocol.Offer {
	t.Helper()
	var o protocol.Offer
	if f.Type != protocol.TypeOffer || f.Decode(&o) != nil || o.Job != jobID {
		t.Fatalf("got %s %s, want the offer of %s", f.Type, f.Body, jobID)
	}
	return o
}

// The hub tells a runner whether a queued job it may run is waiting (what
// `drover runner --drain` exits on): a job it cannot run does not count, one
// it could run once free does, and the word changes as the queue does.
func TestQueueFrameSaysWhatWaitsForTheRunner(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	sr, _ := th.dial(th.registerRunner("r1"), protocol.Hello{Slots: 1, WantQueue: true})
	sr.keepAlive(th.h.cfg.Heartbeat / 2)
	wantQueue(t, sr.nextOfInterest(), false)

	// A job only a gpu runner may run: r1 hears nothing.
	var gpu apitypes.JobView
	if code, e := th.call(th.admin, "POST", "/jobs", apitypes.SubmitRequest{Agent: "exec", Args: []string{"true"}, Labels: map[string]string{"gpu": "1"}}, &gpu); code != http.StatusCreated {
		t.Fatalf("submit: %d %v", code, e)
	}
	j1 := th.submit("echo", "one")
	o1 := wantOffer(t, sr.nextOfInterest(), j1.ID) // no "waiting" for the gpu job before it
	j2 := th.submit("echo", "two")
	wantQueue(t, sr.nextOfInterest(), true) // r1 is busy, but j2 waits for it

	runToEnd(t, sr, o1, "one\n", 0)
	o2 := wantOffer(t, sr.nextOfInterest(), j2.ID)
	wantQueue(t, sr.nextOfInterest(), false)
	runToEnd(t, sr, o2, "two\n", 0)

	// A queued job cancelled is no longer waiting.
	sr.send(protocol.TypeStatus, "", protocol.Status{Slots: 0, Attempts: []protocol.Held{}})
	// The status is read on the runner's connection, apart from the
	// submission: wait until the hub took it (a busy machine offered j3
	// first).
	waitFor(t, "the runner's slots to be 0", func() bool {
		th.h.reg.mu.Lock()
		defer th.h.reg.mu.Unlock()
		for _, c := range th.h.reg.conns {
			if c.slots == 0 {
				return true
			}
		}
		return false
	})
	j3 := th.submit("echo", "three")
	wantQueue(t, sr.nextOfInterest(), true)
	if code, e := th.call(th.admin, "POST", "/jobs/"+j3.ID+"/cancel", nil, nil); code != http.StatusOK {
		t.Fatalf("cancel: %d %v", code, e)
	}
	wantQueue(t, sr.nextOfInterest(), false)
}

// A dispatch pass reads the runners' free slots when it begins: an offer it
// makes after a runner said it has none (draining) is not made, and the job
// stays queued. (On a busy machine a pass begun before the status offered a
// job submitted after it.)
func TestNoOfferToARunnerThatTookItsSlotsBack(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	sr, _ := th.dial(th.registerRunner("r1"), protocol.Hello{Slots: 1, WantQueue: true})
	sr.keepAlive(th.h.cfg.Heartbeat / 2)
	wantQueue(t, sr.nextOfInterest(), false)
	sr.send(protocol.TypeStatus, "", protocol.Status{Slots: 0, Attempts: []protocol.Held{}})
	var c *runnerSession
	waitFor(t, "the runner's slots to be 0", func() bool {
		th.h.reg.mu.Lock()
		defer th.h.reg.mu.Unlock()
		for _, rc := range th.h.reg.conns {
			if rc.slots == 0 {
				c = rc
				return true
			}
		}
		return false
	})
	j := th.submit("echo", "late")
	ok, err := th.h.offer(t.Context(), j.ID, c, "", "")
	if ok || !errors.Is(err, errNoRoom) {
		t.Fatalf("offer to a runner without slots: ok %v, err %v", ok, err)
	}
	var v apitypes.JobView
	if code, e := th.call(th.admin, "GET", "/jobs/"+j.ID, nil, &v); code != http.StatusOK || v.State != job.Queued {
		t.Fatalf("the job: %d %v %s", code, e, v.State)
	}
}
