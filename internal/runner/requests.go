package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"time"

	"drover/internal/ids"
	"drover/internal/protocol"
)

// A request (accept, decline, log, finish) stays pending until the hub
// replies, across any number of connections: after each welcome every
// pending request is resent with its original id, in the original order,
// and the hub applies each id once.
type request struct {
	frame   protocol.Frame
	attempt string
	reply   chan protocol.Reply // buffered: the reader never waits
}

var (
	errGone    = errors.New("attempt no longer held")
	errStopped = errors.New("runner stopped")
)

// send queues a request for an attempt. a may be nil for requests nobody
// waits on (decline).
func (r *Runner) send(a *attempt, attemptID, typ string, body any) (*request, error) {
	f, err := protocol.NewFrame(typ, ids.New("rq"), body)
	if err != nil {
		return nil, err
	}
	req := &request{frame: f, attempt: attemptID, reply: make(chan protocol.Reply, 1)}
	r.mu.Lock()
	defer r.mu.Unlock()
	if a != nil && a.forgotten {
		return nil, errGone
	}
	r.pending = append(r.pending, req)
	if r.sess != nil {
		r.sess.push(f)
	}
	return req, nil
}

// call sends a request and waits for its reply. It gives up only when the
// attempt is forgotten or the runner stops: a lost connection just delays
// the reply.
func (r *Runner) call(a *attempt, typ string, body any) (protocol.Reply, error) {
	req, err := r.send(a, a.ref.Attempt, typ, body)
	if err != nil {
		return protocol.Reply{}, err
	}
	select {
	case rep := <-req.reply:
		return rep, nil
	case <-a.gone:
		return protocol.Reply{}, errGone
	case <-r.life.Done():
		return protocol.Reply{}, errStopped
	}
}

// request makes one request of an attempt's (a tool's, the transcript's)
// and decodes its reply into body (nil: none).
func (r *Runner) request(a *attempt, typ string, req, body any) error {
	rep, err := r.call(a, typ, req)
	if err != nil {
		return fmt.Errorf("the attempt is over: %w", err)
	}
	if !rep.OK {
		return fmt.Errorf("the hub refused %s: %w", typ, replyErr(rep.Error))
	}
	if body != nil {
		if err := json.Unmarshal(rep.Body, body); err != nil {
			return fmt.Errorf("the hub's %s reply: %w", typ, err)
		}
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
	if !rep.OK && req.frame.Type == protocol.TypeDecline {
		r.log.Warn("hub refused a decline", "attempt", req.attempt, "err", replyErr(rep.Error))
	}
	req.reply <- rep
}

// dropRequestsLocked forgets the pending requests of an attempt.
func (r *Runner) dropRequestsLocked(attempt string) {
	r.pending = slices.DeleteFunc(r.pending, func(p *request) bool { return p.attempt == attempt })
}

// refused handles a reply error that ends our hold on an attempt: fenced
// and not_found mean it is not ours any more; anything else is a bug on one
// side, which retrying would not fix.
func (r *Runner) refused(a *attempt, what string, e *protocol.Error) error {
	if e != nil && (e.Code == protocol.ErrFenced || e.Code == protocol.ErrNotFound) {
		r.log.Info("attempt is no longer ours; dropping it", "attempt", a.ref.String(), "request", what, "err", e.Error())
		r.forget(a, true)
		return errGone
	}
	return r.abandon(a, fmt.Errorf("hub refused %s: %w", what, replyErr(e)))
}

// abandon drops an attempt the runner cannot carry on with.
func (r *Runner) abandon(a *attempt, err error) error {
	r.log.Error("dropping attempt", "attempt", a.ref.String(), "err", err)
	r.forget(a, true)
	return errGone
}

func replyErr(e *protocol.Error) error {
	if e == nil {
		return errors.New("refused without an error")
	}
	return e
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
func (r *Runner) retryLater(a *attempt, e *protocol.Error, tries int) (bool, error) {
	switch {
	case e == nil:
		return false, nil
	case e.Code == protocol.ErrNoSpace:
		if tries == 1 {
			r.log.Warn("the hub's disk is full; keeping the attempt's output and retrying until it has space",
				"attempt", a.ref.String(), "err", e.Error())
		}
	case e.Code == protocol.ErrInternal && tries < maxTries:
		r.log.Warn("hub failed a request; retrying", "attempt", a.ref.String(), "err", e.Error())
	default:
		return false, nil
	}
	return true, r.pause(a, r.jitter(backoff(tries)))
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
