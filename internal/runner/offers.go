package runner

import (
	"drover/internal/protocol"
)

// handleOffer holds a new attempt and asks the hub to confirm it; the agent
// starts only after the hub's ok. A repeated offer is the same attempt.
func (r *Runner) handleOffer(f protocol.Frame) {
	var o protocol.Offer
	if err := f.Decode(&o); err != nil {
		r.log.Warn("ignoring malformed offer", "err", err)
		return
	}
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
	if _, err := r.send(nil, o.Attempt, protocol.TypeDecline, protocol.Decline{AttemptRef: o.AttemptRef, Reason: reason}); err != nil {
		r.log.Error("decline", "attempt", o.AttemptRef.String(), "err", err)
	}
}

// handleCancel stops an attempt on the hub's request; it then finishes as
// cancelled. An attempt already finishing keeps its outcome.
func (r *Runner) handleCancel(f protocol.Frame) {
	var c protocol.CancelOrder
	if err := f.Decode(&c); err != nil {
		r.log.Warn("ignoring malformed cancel", "err", err)
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	a := r.attempts[c.Attempt]
	if a == nil || a.phase == protocol.PhaseFinishing {
		return
	}
	r.log.Info("hub cancelled attempt", "attempt", a.ref.String(), "reason", c.Reason)
	a.cancel(errCancelled)
}
