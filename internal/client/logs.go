package client

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"drover/internal/apitypes"
	"drover/internal/job"
	"drover/internal/retry"
)

// LogWait is how long one followed log request lets the hub hold it for new bytes.
const LogWait = 25 * time.Second

// LogRequest names a part of an attempt's log.
type LogRequest struct {
	Attempt int64         // attempt number (≥ 1)
	Offset  int64         // first byte wanted
	Wait    time.Duration // how long the hub may wait for bytes past Offset (0: answer at once)
}

// LogChunk describes what one ReadLog wrote.
type LogChunk struct {
	Attempt  int64     // attempt the bytes belong to
	Offset   int64     // offset of the first byte the hub returned
	Next     int64     // offset after the last byte written: where to continue
	Size     int64     // bytes the hub held for the attempt when it answered
	Complete bool      // the attempt ended and every byte up to Size was written
	JobState job.State // the job's state when the hub answered ("" from a hub that does not say)
}

// ReadLog writes one answer of the log endpoint to w (at most
// protocol.MaxLogChunk bytes). A connection dropped mid-answer is resumed
// from the last byte written, so w never sees a byte twice.
func (c *Client) ReadLog(ctx context.Context, jobID string, r LogRequest, w io.Writer) (LogChunk, error) {
	return c.readLog(ctx, jobID, r, w, false)
}

func (c *Client) readLog(ctx context.Context, jobID string, r LogRequest, w io.Writer, follow bool) (LogChunk, error) {
	ch := LogChunk{Attempt: r.Attempt, Offset: r.Offset, Next: r.Offset}
	answered := false
	rc := call{method: http.MethodGet, path: "/jobs/" + seg(jobID) + "/log", follow: follow, timeout: r.Wait + c.timeout}
	err := c.retry(ctx, rc, func() error {
		rc.query = url.Values{"attempt": {itoa(r.Attempt)}, "offset": {itoa(ch.Next)}, "wait": {itoa(r.Wait.Milliseconds())}}
		return c.send(ctx, rc, nil, func(resp *http.Response) error {
			h, err := parseLogHeaders(resp.Header, r.Attempt, ch.Next)
			if err != nil {
				return err
			}
			if !answered {
				ch.Offset, answered = h.offset, true
			}
			ch.Attempt, ch.Size, ch.JobState = h.attempt, h.size, h.jobState
			body := io.Reader(resp.Body)
			if h.offset < ch.Next {
				// The hub went back before what w already has; skip, never repeat.
				if _, err := io.CopyN(io.Discard, body, ch.Next-h.offset); err != nil {
					return &connError{fmt.Errorf("read log: %w", err)}
				}
			} else {
				ch.Next = h.offset
			}
			cw := &countingWriter{w: w}
			_, err = io.Copy(cw, body)
			ch.Next += cw.n
			if cw.err != nil {
				return fmt.Errorf("write log: %w", cw.err)
			}
			if err != nil {
				return &connError{fmt.Errorf("read log: %w", err)}
			}
			ch.Complete = h.complete
			return nil
		})
	})
	if err != nil {
		return ch, fmt.Errorf("read log of job %s attempt %d: %w", jobID, r.Attempt, err)
	}
	return ch, nil
}

type logHeaders struct {
	attempt, offset, size int64
	complete              bool
	jobState              job.State
}

// parseLogHeaders reads the protocol.HeaderLog* headers; a missing one takes
// what was asked for.
func parseLogHeaders(h http.Header, attempt, offset int64) (logHeaders, error) {
	lh := logHeaders{attempt: attempt, offset: offset, size: -1, complete: h.Get(apitypes.HeaderLogComplete) == "true",
		jobState: job.State(h.Get(apitypes.HeaderJobState))}
	for _, f := range []struct {
		name string
		dst  *int64
	}{{apitypes.HeaderLogAttempt, &lh.attempt}, {apitypes.HeaderLogOffset, &lh.offset}, {apitypes.HeaderLogSize, &lh.size}} {
		v := h.Get(f.name)
		if v == "" {
			continue
		}
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil || n < 0 {
			return lh, fmt.Errorf("log answer has a malformed %s header %q", f.name, v)
		}
		*f.dst = n
	}
	return lh, nil
}

// countingWriter tells the writer's errors apart from the body's: only the
// latter are worth a retry.
type countingWriter struct {
	w   io.Writer
	n   int64
	err error
}

func (cw *countingWriter) Write(p []byte) (int, error) {
	n, err := cw.w.Write(p)
	cw.n += int64(n)
	cw.err = err
	return n, err
}

// FollowOption changes what FollowLog does.
type FollowOption func(*followOptions)

type followOptions struct {
	onAttempt func(apitypes.AttemptView)
	only      bool
	onEvent   func(apitypes.EventView)
	waiting   bool
}

// OnAttempt has FollowLog call fn before it writes the log of an attempt,
// the first one included, so a caller can print a separator where it likes.
func OnAttempt(fn func(apitypes.AttemptView)) FollowOption {
	return func(o *followOptions) { o.onAttempt = fn }
}

// OnlyAttempt stops FollowLog at the end of the attempt it started with
// instead of moving on to the job's later attempts.
func OnlyAttempt() FollowOption { return func(o *followOptions) { o.only = true } }

// UntilWaiting also ends FollowLog, with nil, when the job waits for an
// answer after an attempt: a person has to act before there is more to follow.
func UntilWaiting() FollowOption { return func(o *followOptions) { o.waiting = true } }

// OnEvent has FollowLog pass fn the job's events (questions, answers,
// deliveries, state changes) that happen while it follows, each once and in
// order. They are read whenever the log or the job answers: within a log
// long poll while an attempt runs, within a couple of seconds otherwise.
func OnEvent(fn func(apitypes.EventView)) FollowOption {
	return func(o *followOptions) { o.onEvent = fn }
}

// eventFeed reports a job's new events to fn; nil reports nothing.
type eventFeed struct {
	c     *Client
	job   string
	after int64
	fn    func(apitypes.EventView)
}

func (c *Client) newEventFeed(ctx context.Context, jobID string, fn func(apitypes.EventView)) (*eventFeed, error) {
	if fn == nil {
		return nil, nil
	}
	// Start after what already happened: following shows what comes next.
	f := &eventFeed{c: c, job: jobID, fn: func(apitypes.EventView) {}}
	if err := f.poll(ctx); err != nil {
		return nil, err
	}
	f.fn = fn
	return f, nil
}

func (f *eventFeed) poll(ctx context.Context) error {
	if f == nil {
		return nil
	}
	for {
		q := url.Values{"after": {itoa(f.after)}}
		l, err := decode[apitypes.EventList](ctx, f.c, call{method: http.MethodGet, path: "/jobs/" + seg(f.job) + "/events",
			query: q, follow: true}, "get events of job "+f.job)
		if err != nil || len(l.Events) == 0 {
			return err
		}
		for _, e := range l.Events {
			f.fn(e)
			f.after = e.Seq
		}
	}
}

// FollowLog writes a job's log to w as it grows, starting at offset in the
// given attempt (0: the latest attempt, waiting for the first one if the job
// has none yet). When an attempt ends and the job moved on to a newer one,
// it continues with that attempt from its start; it returns nil once the job
// ended and every byte was written. A dropped connection or a hub restart is
// waited out and the log resumed from the last byte written; only ctx ends
// the wait.
func (c *Client) FollowLog(ctx context.Context, jobID string, attempt, offset int64, w io.Writer, opts ...FollowOption) error {
	var o followOptions
	for _, opt := range opts {
		opt(&o)
	}
	events, err := c.newEventFeed(ctx, jobID, o.onEvent)
	if err != nil {
		return err
	}
	cur, ok, err := c.startAttempt(ctx, jobID, attempt)
	if err != nil || !ok {
		return err
	}
	for {
		if o.onAttempt != nil {
			o.onAttempt(cur)
		}
		if err := c.followAttempt(ctx, jobID, cur.Number, offset, w, events); err != nil {
			return err
		}
		if o.only {
			return events.poll(ctx)
		}
		j, err := c.waitAttempt(ctx, jobID, cur.Number, events, o.waiting)
		if err != nil {
			return err
		}
		next, ok := attemptAfter(j, cur.Number)
		if !ok {
			return nil
		}
		cur, offset = next, 0
	}
}

// startAttempt finds the attempt FollowLog starts with; ok is false when the
// job ended without any.
func (c *Client) startAttempt(ctx context.Context, jobID string, n int64) (apitypes.AttemptView, bool, error) {
	var j apitypes.JobView
	var err error
	if n > 0 {
		j, err = c.job(ctx, jobID, true)
	} else {
		j, err = c.waitAttempt(ctx, jobID, 0, nil, false)
	}
	if err != nil {
		return apitypes.AttemptView{}, false, err
	}
	var latest apitypes.AttemptView
	for _, a := range j.Attempts {
		if n > 0 && a.Number == n {
			return a, true, nil
		}
		if a.Number > latest.Number {
			latest = a
		}
	}
	if n > 0 {
		return latest, false, fmt.Errorf("job %s has no attempt %d", jobID, n)
	}
	return latest, latest.Number > 0, nil
}

// followAttempt writes one attempt's log from offset until the hub says it
// is complete, or until the job ended and no more bytes come: an unknown
// attempt's log stays incomplete while a late result may still arrive, but
// its job counts as ended.
func (c *Client) followAttempt(ctx context.Context, jobID string, attempt, offset int64, w io.Writer, events *eventFeed) error {
	wait := LogWait
	for {
		ch, err := c.readLog(ctx, jobID, LogRequest{Attempt: attempt, Offset: offset, Wait: wait}, w, true)
		if err != nil {
			return err
		}
		if err := events.poll(ctx); err != nil {
			return err
		}
		switch {
		case ch.Complete:
			return nil
		case ch.JobState.Terminal():
			if wait == 0 && ch.Next == offset {
				return nil
			}
			wait = 0 // take what is there without waiting for more
		case ch.Next == offset:
			// Nothing new before the wait ran out; a hub that answers at
			// once must not turn this loop into a busy one.
			if err := retry.Sleep(ctx, c.minDelay); err != nil {
				return err
			}
		}
		offset = ch.Next
	}
}

// waitAttempt polls the job until it has an attempt numbered above after or
// has ended (or, with waiting, waits for an answer), reporting events as it
// goes.
func (c *Client) waitAttempt(ctx context.Context, jobID string, after int64, events *eventFeed, waiting bool) (apitypes.JobView, error) {
	var perr error
	j, err := c.pollJob(ctx, jobID, func(j apitypes.JobView) bool {
		if perr = events.poll(ctx); perr != nil {
			return true
		}
		_, ok := attemptAfter(j, after)
		return ok || waiting && j.State == job.Waiting
	})
	if err == nil {
		err = perr
	}
	return j, err
}

// attemptAfter returns the job's lowest-numbered attempt above n.
func attemptAfter(j apitypes.JobView, n int64) (apitypes.AttemptView, bool) {
	var best apitypes.AttemptView
	for _, a := range j.Attempts {
		if a.Number > n && (best.Number == 0 || a.Number < best.Number) {
			best = a
		}
	}
	return best, best.Number > 0
}
