package runner

import (
	"drover/internal/protocol"
)

// pushes is the runner's side of what the hub pushes (protocol.Runner);
// the connection's reader makes these calls, so none of them blocks.
type pushes struct{ r *Runner }

var _ protocol.Runner = pushes{}

// Offer holds a new attempt and asks the hub to confirm it; the agent
// starts only after the hub's ok. A repeated offer is the same attempt.
func (p pushes) Offer(o protocol.Offer) {
	r := p.r
	if err := o.Validate(); err != nil || !ValidName(o.Attempt) {
		r.log.Warn("ignoring offer with a malformed attempt reference", "attempt", o.Attempt)
		return
	}
	r.mu.Lock()
	if _, held := r.attempts[o.Attempt]; held {
		r.markDirtyLocked() // the next status lists it again
		r.mu.Unlock()
		r.log.Debug("repeated offer", "attempt", o.AttemptRef.String())
		return
	}
	reason, notReady := "", r.notReadyLocked()
	switch {
	case r.stopping:
		reason = "runner is stopping"
	case r.lc.ending != "":
		reason = r.lc.ending
	case r.busyLocked() >= r.cfg.Slots:
		reason = "no free slot"
	case notReady != "":
		reason = notReady
	}
	if reason == "" {
		a := newAttempt(o.AttemptRef, o.Spec, protocol.PhaseOffered)
		a.account = o.Account
		r.takeLocked()
		r.holdLocked(a, r.runOffered)
		r.mu.Unlock()
		return
	}
	r.mu.Unlock()
	r.log.Info("declining offer", "attempt", o.AttemptRef.String(), "reason", reason)
	// Nobody waits on a decline: its reply only says whether the hub took
	// it. It is queued before the reader goes on, in the order of frames.
	queued, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		hub := protocol.Client{Caller: caller{r: r, queued: queued}}
		if e, _ := refusal(hub.Decline(r.life, newRequestID(), protocol.Decline{AttemptRef: o.AttemptRef, Reason: reason})); e != nil {
			r.log.Warn("hub refused a decline", "attempt", o.Attempt, "err", e)
		}
	}()
	select {
	case <-queued:
	case <-done:
	}
}

// Cancel stops an attempt on the hub's request; it then finishes as
// cancelled. An attempt already finishing keeps its outcome.
func (p pushes) Cancel(c protocol.CancelOrder) {
	r := p.r
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.attempts[c.Attempt]
	if a == nil || a.phase == protocol.PhaseFinishing {
		return
	}
	r.log.Info("hub cancelled attempt", "attempt", a.ref.String(), "reason", c.Reason)
	a.cancel(errCancelled)
}

// Drop forgets an attempt the hub says is not ours any more.
func (p pushes) Drop(d protocol.DropOrder) {
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	p.r.dropLocked(d)
}

// Queue records whether a job this runner may run waits (a draining
// runner ends on it).
func (p pushes) Queue(q protocol.Queue) {
	p.r.mu.Lock()
	defer p.r.mu.Unlock()
	p.r.setQueueLocked(map[bool]int{true: queueWaiting, false: queueEmpty}[q.Waiting])
}
