package runner

import (
	"sort"

	"drover/internal/protocol"
)

// Status is coalesced: a change only marks it dirty, and the writer sends
// the state as it is when it gets to it, so a slow link never carries a
// backlog of stale statuses.

func (r *Runner) markDirtyLocked() {
	r.dirty = true
	r.lifeKickLocked()
	if r.sess != nil {
		r.sess.wake()
	}
}

func (r *Runner) markDirty() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.markDirtyLocked()
}

func (r *Runner) setPhase(a *attempt, phase string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if a.phase != phase && !a.forgotten {
		a.phase = phase
		r.markDirtyLocked()
	}
}

// heldLocked lists the attempts held, as hello and status report them.
func (r *Runner) heldLocked() []protocol.Held {
	held := make([]protocol.Held, 0, len(r.attempts)) // never null on the wire
	for _, a := range r.attempts {
		held = append(held, protocol.Held{AttemptRef: a.ref, Phase: a.phase})
	}
	sort.Slice(held, func(i, j int) bool { return held[i].Attempt < held[j].Attempt })
	return held
}

// busyLocked counts the attempts that take a slot, as the hub counts them:
// a finishing attempt has no process any more.
func (r *Runner) busyLocked() int {
	n := 0
	for _, a := range r.attempts {
		if a.phase != protocol.PhaseFinishing {
			n++
		}
	}
	return n
}

// statusLocked is the status as it is now. A stopping runner reports zero
// slots, which the hub reads as draining: no more offers.
func (r *Runner) statusLocked() protocol.Frame {
	st := protocol.Status{Slots: r.cfg.Slots, Attempts: r.heldLocked(), NotReady: r.notReadyLocked()}
	st.Agents, st.Accounts = r.agentsLocked()
	if r.stopping || r.lc.ending != "" {
		st.Slots = 0
	}
	return protocol.StatusFrame(st)
}

// outgoing takes what the writer of s must send: queued frames, then the
// status if it changed.
func (r *Runner) outgoing(s *session) []protocol.Frame {
	r.mu.Lock()
	defer r.mu.Unlock()
	frames := s.outbox
	s.outbox = nil
	if r.dirty && r.sess == s {
		r.dirty = false
		frames = append(frames, r.statusLocked())
	}
	return frames
}
