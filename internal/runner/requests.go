package runner

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"drover/internal/ids"
	"drover/internal/protocol"
	"drover/internal/rules"
)

// A request (accept, decline, log, finish, a tool's) stays pending until
// the hub replies, across any number of connections: after each welcome
// every pending request is resent with its original id, in the original
// order, and the hub applies each id once.
type request struct {
	frame   protocol.Frame
	attempt string
	reply   chan protocol.Reply // buffered: the reader never waits
	dropped chan struct{}       // closed when forgotten without a reply
}

var (
	errGone    = errors.New("attempt no longer held")
	errStopped = errors.New("runner stopped")
)

// hubFor is the hub as the requests of a reach it (a nil: requests nobody's
// attempt waits on, a decline): each call waits for its reply across
// reconnects, and gives up only when a is forgotten (errGone), the runner
// stops (errStopped) or ctx ends.
func (r *Runner) hubFor(a *attempt) protocol.Hub { return protocol.Client{Caller: caller{r: r, a: a}} }

// newRequestID names a request for the hub's ledger.
func newRequestID() string { return ids.New("rq") }

// caller is the runner's transport of requests: the pending list that
// every new connection resends.
type caller struct {
	r      *Runner
	a      *attempt
	queued chan struct{} // closed, when set, once the request is pending
}

func (c caller) Call(ctx context.Context, attempt string, f protocol.Frame) (protocol.Reply, error) {
	r, a := c.r, c.a
	req := &request{frame: f, attempt: attempt, reply: make(chan protocol.Reply, 1), dropped: make(chan struct{})}
	var gone chan struct{} // nil without an attempt: never ready
	r.mu.Lock()
	if a != nil {
		if a.forgotten {
			r.mu.Unlock()
			return protocol.Reply{}, errGone
		}
		gone = a.gone
	}
	r.pending = append(r.pending, req)
	if r.sess != nil {
		r.sess.push(f)
	}
	r.mu.Unlock()
	if c.queued != nil {
		close(c.queued)
	}
	select {
	case rep := <-req.reply:
		return rep, nil
	case <-req.dropped:
		return protocol.Reply{}, errGone
	case <-gone:
		return protocol.Reply{}, errGone
	case <-r.life.Done():
		return protocol.Reply{}, errStopped
	case <-ctx.Done():
		if r.life.Err() != nil {
			return protocol.Reply{}, errStopped
		}
		return protocol.Reply{}, ctx.Err()
	}
}

// Send queues a frame without reply on the current connection, if any (a
// new connection sends a fresh status anyway).
func (c caller) Send(_ context.Context, f protocol.Frame) error {
	c.r.mu.Lock()
	defer c.r.mu.Unlock()
	if c.r.sess != nil {
		c.r.sess.push(f)
	}
	return nil
}

// refusal splits a request's error into the hub's refusal, and any other
// error (no reply came: the attempt or the runner ended).
func refusal(err error) (*rules.Error, error) {
	if e, ok := errors.AsType[*rules.Error](err); ok {
		return e, nil
	}
	return nil, err
}

// toolErr says why a tool's request to the hub failed.
func toolErr(typ string, err error) error {
	e, err := refusal(err)
	if e != nil {
		return fmt.Errorf("the hub refused %s: %w", typ, e)
	}
	if err != nil {
		return fmt.Errorf("the attempt is over: %w", err)
	}
	return nil
}

// handleReply hands a reply to whoever waits on the request.
func (r *Runner) handleReply(f protocol.Frame) {
	var rep protocol.Reply
	if err := f.Decode(&rep); err != nil {
		r.log.Warn("ignoring malformed reply", "reply_to", f.ReplyTo, "err", err)
		return
	}
	r.mu.Lock()
	var req *request
	for i, p := range r.pending {
		if p.frame.ID == f.ReplyTo {
			req = p
			r.pending = slices.Delete(r.pending, i, i+1)
			break
		}
	}
	r.mu.Unlock()
	if req == nil {
		r.log.Debug("reply to no pending request", "reply_to", f.ReplyTo)
		return
	}
	req.reply <- rep
}

// dropRequestsLocked forgets the pending requests of an attempt.
func (r *Runner) dropRequestsLocked(attempt string) {
	r.pending = slices.DeleteFunc(r.pending, func(p *request) bool {
		if p.attempt == attempt {
			close(p.dropped)
			return true
		}
		return false
	})
}

// refused handles a reply error that ends our hold on an attempt: fenced
// and not_found mean it is not ours any more; anything else is a bug on one
// side, which retrying would not fix.
func (r *Runner) refused(a *attempt, what string, e *rules.Error) error {
	if e != nil && (e.Code == rules.ErrFenced || e.Code == rules.ErrNotFound) {
		r.log.Info("attempt is no longer ours; dropping it", "attempt", a.ref.String(), "request", what, "err", e.Error())
		r.forget(a, true)
		return errGone
	}
	return r.abandon(a, fmt.Errorf("hub refused %s: %w", what, e))
}

// abandon drops an attempt the runner cannot carry on with.
func (r *Runner) abandon(a *attempt, err error) error {
	r.log.Error("dropping attempt", "attempt", a.ref.String(), "err", err)
	r.forget(a, true)
	return errGone
}

// maxTries bounds the retries of one request on internal hub errors.
const maxTries = 5

// retryLater reports whether a request refused with e should be sent again,
// after waiting a backoff (the reconnects' policy): an internal error on
// the hub while tries are left, and a full disk on the hub (no_space) for
// as long as the attempt lives. The hub stored nothing and the spool keeps
// every byte, so the runner waits for space until the hub takes the
// attempt away (fenced, dropped: its lease ran out and someone retried it)
// or the runner stops; it never gives up output the hub has not taken.
func (r *Runner) retryLater(a *attempt, e *rules.Error, tries int) (bool, error) {
	switch {
	case e == nil:
		return false, nil
	case e.Code == rules.ErrNoSpace:
		if tries == 1 {
			r.log.Warn("the hub's disk is full; keeping the attempt's output and retrying until it has space",
				"attempt", a.ref.String(), "err", e.Error())
		}
	case e.Code == rules.ErrInternal && tries < maxTries:
		r.log.Warn("hub failed a request; retrying", "attempt", a.ref.String(), "err", e.Error())
	default:
		return false, nil
	}
	return true, r.pause(a, r.jitter(retryCeiling(tries)))
}

// pause waits d unless the attempt goes or the runner stops.
func (r *Runner) pause(a *attempt, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-a.gone:
		return errGone
	case <-r.life.Done():
		return errStopped
	}
}
