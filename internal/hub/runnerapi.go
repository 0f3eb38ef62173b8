package hub

import (
	"context"
	"fmt"
	"slices"
	"time"

	"drover/internal/hub/call"
	"drover/internal/hub/gateway"
	"drover/internal/protocol"
	"drover/internal/rules"
)

// runnerAPI is the hub's side of the runner protocol for one connection:
// the state transitions a runner's requests make, whatever carried them.
// Every method acts as c's runner, and the fencing checks (loadFenced)
// compare each attempt against it. The gateway (package gateway) only decodes
// frames into these calls and encodes their replies.
type runnerAPI struct {
	h *Hub
	c *runnerSession
}

var _ gateway.Session = runnerAPI{}

// Detach forgets the connection once it ended.
func (s runnerAPI) Detach(reason string) { s.h.detach(s.c, reason) }

func (s runnerAPI) Heartbeat(ctx context.Context) error {
	s.h.heartbeat(ctx, s.c)
	return nil
}

func (s runnerAPI) Status(ctx context.Context, st protocol.Status) error {
	h, c := s.h, s.c
	if len(st.Attempts) > protocol.MaxHeldReports || st.Slots < 0 || st.Slots > protocol.MaxSlots {
		return fmt.Errorf("status out of bounds (slots 0-%d, attempts at most %d)", protocol.MaxSlots, protocol.MaxHeldReports)
	}
	if err := checkAgents(st.Agents, st.Accounts); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	if err := checkNotReady(st.NotReady); err != nil {
		return fmt.Errorf("status: %w", err)
	}
	// Slots 0 means draining (the runner is shutting down): no offers
	// (runnerSession.draining).
	h.reg.mu.Lock()
	grew := st.Slots > c.slots || c.cooldownUntil.After(h.now()) || c.notReady != st.NotReady // readiness changed: offer, or say why jobs wait
	c.slots, c.cooldownUntil, c.notReady = st.Slots, time.Time{}, st.NotReady
	changed := false
	if st.Agents != nil {
		for _, a := range st.Agents {
			grew = grew || !slices.Contains(c.agents, a) // an account came back from its limit
		}
		changed = !slices.Equal(c.accounts, st.Accounts)
		c.agents, c.accounts = st.Agents, st.Accounts
	}
	cur := c.shown()
	h.reg.mu.Unlock()
	if shownChanged := !cur.equal(c.recorded); changed || shownChanged {
		if err := h.recordStatus(ctx, c, cur, changed, shownChanged); err != nil {
			h.logFailed("record runner status", err, "runner", c.name)
		}
	}
	if grew {
		h.kick()
	}
	h.heartbeat(ctx, c)
	h.notify(anyChange)
	return nil
}

func (s runnerAPI) Accept(ctx context.Context, id string, m protocol.Accept) error {
	return done(s, m.AttemptRef, func() error { return s.h.accept(ctx, s.c, id, m.AttemptRef) })
}

func (s runnerAPI) Decline(ctx context.Context, id string, m protocol.Decline) error {
	return done(s, m.AttemptRef, func() error { return s.h.decline(ctx, s.c, id, m) })
}

func (s runnerAPI) Log(ctx context.Context, _ string, m protocol.Log) (protocol.LogAck, error) {
	return do(s, m.AttemptRef, func() (protocol.LogAck, error) { return s.h.appendLog(ctx, s.c, m) })
}

func (s runnerAPI) Finish(ctx context.Context, id string, m protocol.Finish) (protocol.FinishAck, error) {
	return do(s, m.AttemptRef, func() (protocol.FinishAck, error) {
		if err := checkFinish(m); err != nil {
			return protocol.FinishAck{}, err
		}
		return s.h.finish(ctx, s.c, id, m)
	})
}

func (s runnerAPI) Ask(ctx context.Context, id string, m protocol.Ask) (protocol.AskAck, error) {
	return do(s, m.AttemptRef, func() (protocol.AskAck, error) { return s.h.ask(ctx, s.c, id, m) })
}

func (s runnerAPI) Deliver(ctx context.Context, id string, m protocol.Deliver) error {
	return done(s, m.AttemptRef, func() error { return s.h.deliver(ctx, s.c, id, m) })
}

func (s runnerAPI) Context(ctx context.Context, _ string, m protocol.GetContext) (protocol.JobContext, error) {
	return do(s, m.AttemptRef, func() (protocol.JobContext, error) { return s.h.jobContext(ctx, s.c, m.AttemptRef) })
}

func (s runnerAPI) Turns(ctx context.Context, id string, m protocol.Turns) error {
	return done(s, m.AttemptRef, func() error { return s.h.recordTurns(ctx, s.c, id, m) })
}

func (s runnerAPI) Transcript(ctx context.Context, _ string, m protocol.GetTranscript) (protocol.TranscriptPage, error) {
	return do(s, m.AttemptRef, func() (protocol.TranscriptPage, error) { return s.h.transcript(ctx, s.c, m) })
}

// do checks a request's attempt reference, applies it with fn and turns
// its error into the protocol's refusal.
func do[Rep any](s runnerAPI, ref protocol.AttemptRef, fn func() (Rep, error)) (Rep, error) {
	var zero Rep
	err := ref.Validate()
	if err != nil {
		return zero, s.refused(call.BadRequest("%v", err))
	}
	rep, err := fn()
	if err != nil {
		return zero, s.refused(err)
	}
	return rep, nil
}

// done is do for a request with no reply body.
func done(s runnerAPI, ref protocol.AttemptRef, fn func() error) error {
	_, err := do(s, ref, func() (struct{}, error) { return struct{}{}, fn() })
	return err
}

// refused turns the error of a runner request into the protocol's refusal
// (nil stays nil); the gateway logs it.
func (s runnerAPI) refused(err error) error {
	if err == nil {
		return nil
	}
	ae := s.h.AsRefusal(err)
	return &rules.Error{Code: ae.Code, Message: ae.Msg, Size: ae.Size}
}

// checkFinish bounds what a finish reports before anything is read.
func checkFinish(m protocol.Finish) error {
	if err := m.Outcome.Validate(); err != nil {
		return call.BadRequest("%v", err)
	}
	if len(m.Session) > protocol.MaxSession {
		return argError("finish", &rules.LimitError{What: "session", Size: len(m.Session), Limit: protocol.MaxSession})
	}
	if err := rules.CheckPlainText("session", m.Session, false); err != nil {
		return argError("finish", err)
	}
	if m.Usage != nil {
		if err := m.Usage.Check(); err != nil {
			return call.BadRequest("%v", err)
		}
	}
	return nil
}
