package runner

import (
	"strings"
	"testing"
	"time"

	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/rules"
	"drover/internal/sandbox/sandboxtest"
)

// returned reports whether Run has returned, without waiting.
func (tr *testRunner) returned() bool {
	select {
	case err := <-tr.done:
		tr.done <- err
		return true
	default:
		return false
	}
}

// waitClosed waits until the runner closed connection c and says how.
func waitClosed(t *testing.T, c *hubConn) {
	t.Helper()
	<-c.closed
	if c.status != 1000 {
		t.Fatalf("connection closed with %d, want a normal closure", c.status)
	}
}

// --max-jobs 1: the runner takes one attempt, declines an offer that comes
// while it runs (and reports zero slots from the take on), and exits 0 once
// the attempt's finish is acknowledged.
func TestMaxJobsTakesNThenExits(t *testing.T) {
	h := newFakeHub(t)
	tr := startRunner(t, h, "", func(c *Config) { c.Slots, c.MaxJobs = 2, 1 })
	h.waitConn(0)
	ref, late := newRef(), newRef()
	h.offer(ref, shSpec("sleep 0.3; echo done"))
	h.waitFrame("accept", func(g got) bool { return g.f.Type == protocol.TypeAccept })
	sandboxtest.WaitFor(t, "zero slots", func() bool { s, ok := h.lastStatus(); return ok && s.Slots == 0 })
	h.offer(late, shSpec("echo late"))
	d := h.waitFrame("decline", func(g got) bool { return g.f.Type == protocol.TypeDecline })
	var dec protocol.Decline
	must(t, d.f.Decode(&dec))
	if dec.Attempt != late.Attempt || !strings.Contains(dec.Reason, "max-jobs") {
		t.Fatalf("decline %+v, want the late offer declined for --max-jobs", dec)
	}
	if err := tr.wait(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	wantOutcome(t, h.waitFinish(ref.Attempt), job.AttemptCompleted, job.ReasonExited, intp(0))
	if n := len(h.received(protocol.TypeAccept)); n != 1 {
		t.Fatalf("%d accepts, want 1", n)
	}
	waitClosed(t, h.current())
}

// An accept the hub refuses gives the take back: the runner runs its one
// job after all.
func TestMaxJobsRefusedAcceptIsNotCounted(t *testing.T) {
	h := newFakeHub(t)
	h.once(protocol.TypeAccept, func(c *hubConn, f protocol.Frame) {
		c.writeReply(f.ID, protocol.Reply{Error: &rules.Error{Code: rules.ErrFenced, Message: "stale"}})
	})
	tr := startRunner(t, h, "", func(c *Config) { c.MaxJobs = 1 })
	h.waitConn(0)
	stale, ref := newRef(), newRef()
	h.offer(stale, shSpec("echo stale"))
	sandboxtest.WaitFor(t, "the refused attempt forgotten", func() bool { return len(h.received(protocol.TypeAccept)) == 1 && tr.holds() == 0 })
	if tr.returned() {
		t.Fatal("runner ended on a take the hub refused")
	}
	h.offer(ref, shSpec("echo ran"))
	if err := tr.wait(t); err != nil {
		t.Fatal(err)
	}
	wantOutcome(t, h.waitFinish(ref.Attempt), job.AttemptCompleted, job.ReasonExited, intp(0))
}

// --idle-timeout: a running attempt longer than the timeout keeps the
// runner; it exits 0 once it has had none for the timeout.
func TestIdleTimeoutWaitsForAttempts(t *testing.T) {
	h := newFakeHub(t)
	const idle = time.Second
	tr := startRunner(t, h, "", func(c *Config) { c.IdleTimeout = idle })
	h.waitConn(0)
	ref := newRef()
	h.offer(ref, shSpec("sleep 2; echo done")) // twice the timeout
	if err := tr.wait(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	// Ended after the attempt, not during it (which would release it).
	wantOutcome(t, h.waitFinish(ref.Attempt), job.AttemptCompleted, job.ReasonExited, intp(0))
	waitClosed(t, h.current())
}

// --drain: the runner stays while the hub says something it may run
// waits, and exits 0 once the hub says nothing does and the grace passed.
func TestDrainExitsWhenNothingWaits(t *testing.T) {
	h := newFakeHub(t)
	const grace = 200 * time.Millisecond
	tr := startRunner(t, h, "", func(c *Config) { c.Drain, c.DrainGrace = true, grace })
	c := h.waitConn(0)
	c.send(protocol.TypeQueue, protocol.Queue{Waiting: true})
	ref := newRef()
	h.offer(ref, shSpec("echo one"))
	h.waitFinish(ref.Attempt)
	time.Sleep(5 * grace) // told something waits: it stays however long
	if tr.returned() {
		t.Fatal("draining runner exited while the hub said a job waits for it")
	}
	c.send(protocol.TypeQueue, protocol.Queue{Waiting: false})
	if err := tr.wait(t); err != nil {
		t.Fatalf("Run = %v, want nil", err)
	}
	waitClosed(t, c)
}

// A draining runner whose hub never says (an older hub) does not exit on
// its own: nothing told it the queue is empty.
func TestDrainNeedsTheHubsWord(t *testing.T) {
	h := newFakeHub(t)
	const grace = 100 * time.Millisecond
	tr := startRunner(t, h, "", func(c *Config) { c.Drain, c.DrainGrace = true, grace })
	h.waitConn(0)
	time.Sleep(10 * grace)
	if tr.returned() {
		t.Fatal("draining runner exited without the hub saying the queue is empty")
	}
}
