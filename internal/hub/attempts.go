package hub

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"

	"drover/internal/eval"
	"drover/internal/fsutil"
	"drover/internal/hub/call"
	"drover/internal/job"
	"drover/internal/pipeline"
	"drover/internal/protocol"
	"drover/internal/publish"
	"drover/internal/rules"
	"drover/internal/store"
)

// logSlack lets the runner's truncation marker pass the cap.
const logSlack = 4096

// ledgered applies fn once per (runner, request id): a resent id gets the
// reply stored with the first application. Refusals are not stored (they
// changed nothing, so applying the request again is harmless).
//
// fn runs first and the ledger is read only when its entry cannot be
// added, or fn refused: a resent id (rare) is found there, fn's writes
// undone and the stored reply given; a first one (every request) costs no
// read of the ledger.
func ledgered[T any](ctx context.Context, h *Hub, runnerID, reqID string, fn func(tx store.Tx) (T, error)) (T, bool, error) {
	var out T
	var replay bool
	err := h.store.Write(ctx, func(tx store.Tx) error {
		var zero T
		out, replay = zero, false
		v, refused := fn(tx)
		if refused == nil {
			b, err := json.Marshal(v)
			if err != nil {
				return err
			}
			err = tx.PutRequest(runnerID, reqID, b, h.now())
			if err == nil {
				out = v
				return nil
			}
			if !errors.Is(err, store.ErrConflict) {
				return err
			}
		}
		resp, found, err := tx.Request(runnerID, reqID)
		switch {
		case err != nil:
			return cmp.Or(refused, err)
		case !found:
			// fn refused (an entry that could not be added is found).
			return cmp.Or(refused, fmt.Errorf("request %s of runner %s: the ledger's entry is neither new nor there", reqID, runnerID))
		}
		replay = true
		if len(resp) > 0 {
			if err := json.Unmarshal(resp, &out); err != nil {
				return fmt.Errorf("decode the ledger's reply: %w", err)
			}
		}
		return errReplayed // undoes what fn wrote again
	})
	if errors.Is(err, errReplayed) {
		return out, true, nil
	}
	return out, replay, err
}

// errReplayed ends the transaction of a request already in the ledger.
var errReplayed = errors.New("request applied already")

// loadFenced loads the attempt a runner names, with its job, and checks it
// is that runner's, under that epoch.
func loadFenced(tx store.Tx, runnerID string, ref protocol.AttemptRef) (store.Attempt, store.Job, error) {
	a, j, err := tx.AttemptWithJob(ref.Attempt)
	if errors.Is(err, store.ErrNotFound) {
		return a, store.Job{}, call.NotFound("no attempt %s", ref.Attempt)
	} else if err != nil {
		return a, store.Job{}, err
	}
	if a.JobID != ref.Job {
		return a, store.Job{}, call.BadRequest("attempt %s belongs to job %s, not %s", a.ID, a.JobID, ref.Job)
	}
	if a.RunnerID != runnerID {
		return a, store.Job{}, call.Fenced("attempt %s belongs to another runner", a.ID)
	}
	if a.Epoch != ref.Epoch {
		return a, store.Job{}, call.Fenced("stale epoch %d for attempt %s (its epoch is %d)", ref.Epoch, a.ID, a.Epoch)
	}
	return a, j, nil
}

// lateResultAllowed: a runner whose lease ran out may still bring a durable
// result while nobody has retried the job; then the outcome is known.
func lateResultAllowed(a store.Attempt, j store.Job) bool {
	return a.State == job.AttemptUnknown && j.State == job.Unknown && j.Epoch == a.Epoch
}

func (h *Hub) event(tx store.Tx, jobID, kind, actor, format string, args ...any) error {
	_, err := tx.AddEvent(h.newEvent(jobID, kind, actor, format, args...))
	return err
}

// newEvent is the event h.event adds, for a write that adds it with others
// (OfferAttempt, UpdateAttemptAndJob).
func (h *Hub) newEvent(jobID, kind, actor, format string, args ...any) store.Event {
	return store.Event{JobID: jobID, At: h.now(), Kind: kind, Actor: actor, Message: fmt.Sprintf(format, args...)}
}

func (h *Hub) accept(ctx context.Context, c *runnerSession, reqID string, ref protocol.AttemptRef) error {
	_, replay, err := ledgered(ctx, h, c.runnerID, reqID, func(tx store.Tx) (struct{}, error) {
		a, j, err := loadFenced(tx, c.runnerID, ref)
		if err != nil {
			return struct{}{}, err
		}
		if a.State == job.AttemptRunning {
			return struct{}{}, nil
		}
		if a.State != job.AttemptOffered || j.Epoch != a.Epoch {
			return struct{}{}, call.Fenced("attempt %s is %s and can no longer be accepted", a.ID, a.State)
		}
		next, err := job.Next(j.State, job.EvAccept)
		if err != nil {
			return struct{}{}, call.Fenced("%v", err)
		}
		now := h.now()
		a.State, a.AcceptedAt, a.LeaseUntil = job.AttemptRunning, &now, now.Add(h.cfg.Lease)
		j.State, j.UpdatedAt = next, now
		return struct{}{}, tx.UpdateAttemptAndJob(a, j, h.newEvent(j.ID, "started", c.name, "attempt %d started on %s", a.Epoch, c.name))
	})
	if err == nil && !replay {
		h.notify(ref.Job)
	}
	return err
}

func (h *Hub) decline(ctx context.Context, c *runnerSession, reqID string, d protocol.Decline) error {
	var freed bool
	_, replay, err := ledgered(ctx, h, c.runnerID, reqID, func(tx store.Tx) (struct{}, error) {
		freed = false
		a, j, err := loadFenced(tx, c.runnerID, d.AttemptRef)
		if err != nil {
			return struct{}{}, err
		}
		if a.State == job.AttemptExpired {
			return struct{}{}, nil
		}
		if a.State != job.AttemptOffered {
			return struct{}{}, call.Conflict("attempt %s is %s; only an offer can be declined", a.ID, a.State)
		}
		if err := h.expireOffer(tx, &a, &j, job.ReasonDeclined, job.EvDecline); err != nil {
			return struct{}{}, err
		}
		freed = true
		return struct{}{}, h.event(tx, j.ID, "declined", c.name, "%s declined the offer: %s", c.name, call.Truncate(d.Reason, 200))
	})
	if err == nil && !replay && freed {
		h.reg.removeActive(c.runnerID, d.Attempt)
		// The runner said it is full: leave it alone until its next status.
		h.reg.mu.Lock()
		c.cooldownUntil = h.now().Add(cooldown)
		h.reg.mu.Unlock()
		h.notify(d.Job)
		h.kick()
	}
	return err
}

// expireOffer ends an offered attempt and puts its job back in the queue.
func (h *Hub) expireOffer(tx store.Tx, a *store.Attempt, j *store.Job, reason job.Reason, ev job.Event) error {
	now := h.now()
	a.State, a.Reason, a.FinishedAt = job.AttemptExpired, reason, &now
	if err := tx.UpdateAttempt(*a); err != nil {
		return err
	}
	if j.AttemptID == a.ID && j.State == job.Offered {
		next, err := job.Next(j.State, ev)
		if err != nil {
			return err
		}
		j.State, j.UpdatedAt = next, now
		if err := tx.UpdateJob(*j); err != nil {
			return err
		}
	}
	return nil
}

func (h *Hub) appendLog(ctx context.Context, c *runnerSession, l protocol.Log) (protocol.LogAck, error) {
	if len(l.Data) > protocol.MaxLogChunk {
		return protocol.LogAck{}, call.Errf(http.StatusRequestEntityTooLarge, rules.ErrTooLarge, "log chunk of %d bytes is over %d", len(l.Data), protocol.MaxLogChunk)
	}
	if l.Offset < 0 {
		return protocol.LogAck{}, call.BadRequest("negative log offset")
	}
	if l.Offset > math.MaxInt64-int64(len(l.Data)) {
		// The end would wrap around and pass for a chunk already held.
		return protocol.LogAck{}, call.BadRequest("log offset %d plus %d bytes is past the largest offset", l.Offset, len(l.Data))
	}
	var ack protocol.LogAck
	var grew bool
	st, stalled := h.logStall(l.Attempt)
	err := h.store.Write(ctx, func(tx store.Tx) error {
		grew = false
		a, j, err := loadFenced(tx, c.runnerID, l.AttemptRef)
		if err != nil {
			return err
		}
		ack.Size = a.LogSize
		end := l.Offset + int64(len(l.Data))
		if end <= a.LogSize {
			return nil // a resent chunk the hub already holds: bytes at an offset never change
		}
		if l.Offset != a.LogSize {
			size := a.LogSize
			return &call.Refusal{Status: http.StatusConflict, Code: rules.ErrOffset, Msg: fmt.Sprintf("log chunk at offset %d, the hub holds %d bytes", l.Offset, size), Size: &size}
		}
		if a.State != job.AttemptRunning && !lateResultAllowed(a, j) {
			return call.Fenced("attempt %s is %s and takes no more output", a.ID, a.State)
		}
		if end > j.LogCap+logSlack {
			return call.Errf(http.StatusRequestEntityTooLarge, rules.ErrTooLarge, "log would exceed the cap of %d bytes", j.LogCap)
		}
		if err := tx.AppendLog(a.ID, l.Offset, l.Data); err != nil {
			return err
		}
		a.LogSize = end
		ack.Size = end
		grew = true
		if stalled {
			if err := h.logResumed(tx, j.ID, st); err != nil {
				return err
			}
		}
		return tx.UpdateAttempt(a)
	})
	if fsutil.IsNoSpace(err) {
		h.stallLog(ctx, l)
	}
	if err == nil && grew {
		if stalled {
			h.clearStall(l.Attempt)
		}
		h.metrics.logBytes.Add(float64(len(l.Data)))
		h.notify(l.Job)
	}
	return ack, err
}

// logDigest hashes what the hub holds of an attempt's log, outside any write
// transaction (the log is append-only, so the first n bytes are stable).
func (h *Hub) logDigest(ctx context.Context, attemptID string, n int64) (string, error) {
	sum := sha256.New()
	var off int64
	for off < n {
		var chunk []byte
		err := h.store.Read(ctx, func(tx store.Tx) error {
			var err error
			chunk, err = tx.ReadLog(attemptID, off, int(min(n-off, 4<<20)))
			return err
		})
		if err != nil {
			return "", fmt.Errorf("read log of %s: %w", attemptID, err)
		}
		if len(chunk) == 0 {
			break
		}
		sum.Write(chunk)
		off += int64(len(chunk))
	}
	if off != n {
		return "", fmt.Errorf("log of %s is %d bytes, expected %d", attemptID, off, n)
	}
	return hex.EncodeToString(sum.Sum(nil)), nil
}

func (h *Hub) finish(ctx context.Context, c *runnerSession, reqID string, fin protocol.Finish) (protocol.FinishAck, error) {
	// Check the log first, outside the write transaction; the transaction
	// checks everything again.
	digest, err := h.finishDigest(ctx, c, fin)
	if err != nil {
		return protocol.FinishAck{}, err
	}
	intended := false // a publication recorded with the completion, for JobCompleted
	var ended func(context.Context)
	ack, replay, err := ledgered(ctx, h, c.runnerID, reqID, func(tx store.Tx) (protocol.FinishAck, error) {
		intended, ended = false, nil
		a, j, err := loadFenced(tx, c.runnerID, fin.AttemptRef)
		if err != nil {
			return protocol.FinishAck{}, err
		}
		if done, err := finishable(a, j); err != nil {
			return protocol.FinishAck{}, err
		} else if done {
			return protocol.FinishAck{AlreadyFinished: true}, nil
		}
		if fin.LogSize != a.LogSize || digest == "" {
			size := a.LogSize
			return protocol.FinishAck{}, &call.Refusal{Status: http.StatusConflict, Code: rules.ErrLogIncomplete,
				Msg: fmt.Sprintf("finish says %d log bytes, the hub holds %d", fin.LogSize, size), Size: &size}
		}
		if fin.Isolation != nil {
			if err := checkDenials(fin.Isolation.Denials); err != nil {
				return protocol.FinishAck{}, err
			}
			b, err := json.Marshal(fin.Isolation)
			if err != nil {
				return protocol.FinishAck{}, err
			}
			a.Isolation = string(b)
			if err := denialEvents(tx, j.ID, c.name, fin.Isolation, h.now()); err != nil {
				return protocol.FinishAck{}, err
			}
			for _, d := range fin.Isolation.Denials { // counted once, as the attempts are below
				h.metrics.egressDenials.WithLabelValues(d.Phase).Add(float64(d.Count))
			}
		}
		if fin.Session != "" {
			a.Session = fin.Session
		}
		if fin.Usage != nil {
			b, err := json.Marshal(fin.Usage)
			if err != nil {
				return protocol.FinishAck{}, err
			}
			a.Usage = string(b)
		}
		if err := h.applyFinish(tx, c.name, &a, &j, fin.Outcome, digest); err != nil {
			return protocol.FinishAck{}, err
		}
		// The project's default publication is recorded with the
		// completion: a hub that dies now still publishes it at its start.
		// A pipeline's step publishes nothing on its own: its publish
		// step does; nor does an evaluation's job.
		if !pipeline.OwnsKey(j.Key) && !eval.OwnsKey(j.Key) {
			if intended, err = publish.Intent(tx, j, h.now()); err != nil {
				return protocol.FinishAck{}, err
			}
		}
		ended, err = h.jobEnded(ctx, tx, j, a)
		return protocol.FinishAck{}, err
	})
	if err != nil {
		return protocol.FinishAck{}, err
	}
	h.clearStall(fin.Attempt) // a finished attempt's log takes no more bytes
	if fin.Outcome.State == job.AttemptReleased && fin.Outcome.Reason != job.ReasonLimited {
		// A stopping runner releases work: offer it nothing more. (A
		// limited account's runner says in its status what it can still run.)
		h.reg.mu.Lock()
		c.slots = 0
		h.reg.mu.Unlock()
	}
	if !replay {
		h.reg.removeActive(c.runnerID, fin.Attempt)
		if ended != nil {
			ended(ctx)
		}
		h.notify(fin.Job)
		h.kick()
		if intended {
			// Only a publication recorded with the completion waits
			// for it (a publish request needs a completed job): any
			// other finish would read for none.
			h.publisher.JobCompleted(ctx, fin.Job)
		}
	}
	return ack, nil
}

// emptyLogSHA256 is the digest of an attempt that wrote no log.
var emptyLogSHA256 = func() string { s := sha256.Sum256(nil); return hex.EncodeToString(s[:]) }()

// finishDigest is the digest of the log the hub holds of a finishing
// attempt, read outside the write transaction that checks everything
// again ("" when that check should refuse the finish: the sizes differ, or
// the attempt ended already); the refusal that asks for the log again
// when the hub's copy differs.
func (h *Hub) finishDigest(ctx context.Context, c *runnerSession, fin protocol.Finish) (string, error) {
	if fin.LogSize == 0 && fin.LogSHA256 == emptyLogSHA256 {
		// An empty log's digest is known: the transaction's check of the
		// size held is the whole check (a trivial job's finish costs no
		// read before it).
		return emptyLogSHA256, nil
	}
	var (
		held int64
		done bool
	)
	if err := h.store.Read(ctx, func(tx store.Tx) error {
		a, j, err := loadFenced(tx, c.runnerID, fin.AttemptRef)
		if err != nil {
			return err
		}
		held = a.LogSize
		done, err = finishable(a, j)
		return err
	}); err != nil {
		return "", err
	}
	if done || fin.LogSize != held {
		return "", nil
	}
	digest, err := h.logDigest(ctx, fin.Attempt, held)
	if err != nil {
		return "", err
	}
	if digest != fin.LogSHA256 {
		// Same length, other bytes: the hub's copy cannot be trusted.
		// Drop it and ask for the whole log again.
		return "", h.resetLog(ctx, c, fin.AttemptRef)
	}
	return digest, nil
}

// finishable says whether an attempt can take a finish: done when it already
// ended (a finish is then acknowledged as already finished), an error when
// it is not the runner's to finish.
func finishable(a store.Attempt, j store.Job) (done bool, err error) {
	switch a.State {
	case job.AttemptCompleted, job.AttemptFailed, job.AttemptCancelled, job.AttemptReleased, job.AttemptAsked:
		return true, nil
	case job.AttemptRunning:
		return false, nil
	case job.AttemptUnknown:
		if lateResultAllowed(a, j) {
			return false, nil
		}
		return false, call.Fenced("attempt %s was given up as unknown and the job has moved on", a.ID)
	}
	return false, call.Fenced("attempt %s is %s and was never started", a.ID, a.State)
}

// applyFinish records a runner's outcome on the attempt and moves the job.
func (h *Hub) applyFinish(tx store.Tx, actor string, a *store.Attempt, j *store.Job, o job.Outcome, digest string) error {
	var q *store.Question
	if toolFinish(*j, o) {
		var err error
		if q, err = questionOf(tx, j.ID, a.ID); err != nil {
			return err
		}
	}
	o = toolOutcome(q, *a, *j, o)
	now := h.now()
	wasUnknown := a.State == job.AttemptUnknown
	a.State, a.Reason, a.ExitCode, a.Message, a.FinishedAt, a.LogSHA256 = o.State, o.Reason, o.ExitCode, call.Truncate(o.Message, 4096), &now, digest
	if err := tx.UpdateAttempt(*a); err != nil {
		return err
	}
	// Counted in the transaction: the store runs a Write's function once
	// unless it fails, and then the finish is reported again anyway.
	h.metrics.attempts.WithLabelValues(string(o.State)).Inc()
	ev, err := job.FinishEvent(o.State)
	if err != nil {
		return call.BadRequest("%v", err)
	}
	next := j.State
	switch {
	case wasUnknown && o.State == job.AttemptUnknown:
		// still unknown: nothing learned
	case (o.State == job.AttemptReleased || o.State == job.AttemptAsked) && j.Cancelling:
		next = job.Cancelled
	default:
		if next, err = job.Next(j.State, ev); err != nil {
			return call.Conflict("%v", err)
		}
	}
	j.State, j.UpdatedAt = next, now
	switch {
	case next.Terminal():
		j.FinishedAt, j.ExitCode, j.Reason, j.Cancelling = &now, o.ExitCode, o.Reason, false
		if next == job.Cancelled {
			j.Reason = job.ReasonCancelled
		}
	case next == job.Queued:
		j.Reason, j.ExitCode = o.Reason, nil
		if o.State == job.AttemptReleased && a.Session != "" {
			// Interrupted (runner stopping, account limited): the next
			// attempt continues this session where it can.
			j.ResumeAttempt = a.ID
		}
	case next == job.Waiting:
		// No slot is held from here; an approved answer resumes this attempt.
		j.Reason, j.ExitCode, j.FinishedAt, j.ResumeAttempt = job.ReasonNone, nil, nil, a.ID
	}
	if err := tx.UpdateJob(*j); err != nil {
		return err
	}
	msg := fmt.Sprintf("attempt %d %s (%s)", a.Epoch, o.State, o.Reason)
	if o.ExitCode != nil {
		msg += fmt.Sprintf(", exit code %d", *o.ExitCode)
	}
	if wasUnknown {
		msg = "late result: " + msg
	}
	switch next {
	case job.Queued:
		msg += "; back in the queue"
	case job.Waiting:
		msg += fmt.Sprintf("; waiting for an answer to %s", q.ID)
	}
	return h.event(tx, j.ID, "finished", actor, "%s", msg)
}

// resetLog drops the hub's copy of an attempt's log so the runner sends it
// again from the start.
func (h *Hub) resetLog(ctx context.Context, c *runnerSession, ref protocol.AttemptRef) error {
	err := h.store.Write(ctx, func(tx store.Tx) error {
		a, _, err := loadFenced(tx, c.runnerID, ref)
		if err != nil {
			return err
		}
		if err := tx.DeleteLog(a.ID); err != nil {
			return err
		}
		a.LogSize = 0
		return tx.UpdateAttempt(a)
	})
	if err != nil {
		return err
	}
	h.log.Warn("log checksum mismatch; asked the runner to send the log again", "runner", c.name, "attempt", ref.Attempt)
	zero := int64(0)
	return &call.Refusal{Status: http.StatusConflict, Code: rules.ErrLogIncomplete, Msg: "log checksum mismatch: send the log again from offset 0", Size: &zero}
}
