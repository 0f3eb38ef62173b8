// Package protocoltest holds the one fake of the runner protocol: Hub, an
// in-memory protocol.Hub and protocol.Transfers that keeps the rules a
// correct hub keeps (each request id applied once, log offsets, fencing by
// runner and epoch, finishes checked against the log, publications checked
// against their digest and applied once per commit), and Contract, the
// scenario the fake and the real hub must both pass.
package protocoltest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"sync"

	"drover/internal/protocol"
	"drover/internal/rules"
)

// Attempt states as the fake tracks them.
const (
	offered  = "offered"
	running  = "running"
	finished = "finished"
	expired  = "expired"
)

// Hub is a fake hub for one connected runner. The zero value is not
// ready: use NewHub. Attempts exist once Offered or Held names them.
type Hub struct {
	mu        sync.Mutex
	attempts  map[string]*fakeAttempt
	applied   map[string]any // request id → its first successful reply
	statuses  []protocol.Status
	beats     int
	questions int
	jobs      map[string]*fakeJob
}

// fakeJob is what the fake holds of a job beyond its attempts.
type fakeJob struct {
	head        string
	checkpoints int
	context     map[string][]byte
}

type fakeAttempt struct {
	ref      protocol.AttemptRef
	state    string
	log      []byte
	finish   *protocol.Finish
	asked    string
	summary  string
	sessions map[string][]protocol.TurnRecord
}

var (
	_ protocol.Hub       = (*Hub)(nil)
	_ protocol.Transfers = (*Hub)(nil)
)

// NewHub returns a fake hub that knows no attempt.
func NewHub() *Hub {
	return &Hub{attempts: map[string]*fakeAttempt{}, applied: map[string]any{}, jobs: map[string]*fakeJob{}}
}

// job is what the fake holds of job, made on first use; h.mu is held.
func (h *Hub) job(id string) *fakeJob {
	j := h.jobs[id]
	if j == nil {
		j = &fakeJob{context: map[string][]byte{}}
		h.jobs[id] = j
	}
	return j
}

// SetContext gives a job its context files.
func (h *Hub) SetContext(job string, files map[string][]byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.job(job).context = maps.Clone(files)
}

// HeadOf returns the head a job's publications moved it to ("": none).
func (h *Hub) HeadOf(job string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.job(job).head
}

// Offered records that the hub offered ref to the runner (a repeated
// offer of a known attempt changes nothing).
func (h *Hub) Offered(ref protocol.AttemptRef) { h.add(ref, offered) }

// Held records an attempt the runner already runs (one it reports after
// a restart), as the real hub holds it.
func (h *Hub) Held(ref protocol.AttemptRef) { h.add(ref, running) }

func (h *Hub) add(ref protocol.AttemptRef, state string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if _, ok := h.attempts[ref.Attempt]; !ok {
		h.attempts[ref.Attempt] = &fakeAttempt{ref: ref, state: state, sessions: map[string][]protocol.TurnRecord{}}
	}
}

// LogOf returns the log the hub holds of an attempt.
func (h *Hub) LogOf(attempt string) []byte {
	h.mu.Lock()
	defer h.mu.Unlock()
	if a := h.attempts[attempt]; a != nil {
		return bytes.Clone(a.log)
	}
	return nil
}

// SetLog replaces the log the hub holds of a known attempt (a test's
// "the hub kept part of it before the crash", or lost its tail).
func (h *Hub) SetLog(attempt string, data []byte) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if a := h.attempts[attempt]; a != nil {
		a.log = bytes.Clone(data)
	}
}

// FinishOf returns the finish the hub took for an attempt, if any.
func (h *Hub) FinishOf(attempt string) (protocol.Finish, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if a := h.attempts[attempt]; a != nil && a.finish != nil {
		return *a.finish, true
	}
	return protocol.Finish{}, false
}

// Statuses returns the statuses received so far.
func (h *Hub) Statuses() []protocol.Status {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.statuses)
}

// Beats is how many heartbeats h received.
func (h *Hub) Beats() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.beats
}

func (h *Hub) Heartbeat(context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.beats++
	return nil
}

func (h *Hub) Status(_ context.Context, st protocol.Status) error {
	if st.Slots < 0 || st.Slots > protocol.MaxSlots || len(st.Attempts) > protocol.MaxHeldReports {
		return fmt.Errorf("status out of bounds (slots 0-%d, attempts at most %d)", protocol.MaxSlots, protocol.MaxHeldReports)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.statuses = append(h.statuses, st)
	return nil
}

func (h *Hub) Accept(_ context.Context, id string, m protocol.Accept) error {
	_, err := ledgered(h, id, m.AttemptRef, func(a *fakeAttempt) (struct{}, error) {
		switch a.state {
		case running:
			return struct{}{}, nil
		case offered:
			a.state = running
			return struct{}{}, nil
		}
		return struct{}{}, refuse(rules.ErrFenced, "attempt %s is %s and can no longer be accepted", a.ref.Attempt, a.state)
	})
	return err
}

func (h *Hub) Decline(_ context.Context, id string, m protocol.Decline) error {
	_, err := ledgered(h, id, m.AttemptRef, func(a *fakeAttempt) (struct{}, error) {
		switch a.state {
		case expired:
			return struct{}{}, nil
		case offered:
			a.state = expired
			return struct{}{}, nil
		}
		return struct{}{}, refuse(rules.ErrConflict, "attempt %s is %s; only an offer can be declined", a.ref.Attempt, a.state)
	})
	return err
}

// Log is applied by offset, not by id, as the real hub does: bytes at an
// offset never change, so a resent chunk is simply acknowledged.
func (h *Hub) Log(_ context.Context, _ string, m protocol.Log) (protocol.LogAck, error) {
	if len(m.Data) > protocol.MaxLogChunk {
		return protocol.LogAck{}, refuse(rules.ErrTooLarge, "log chunk of %d bytes is over %d", len(m.Data), protocol.MaxLogChunk)
	}
	if m.Offset < 0 {
		return protocol.LogAck{}, refuse(rules.ErrBadRequest, "negative log offset")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	a, err := h.fenced(m.AttemptRef)
	if err != nil {
		return protocol.LogAck{}, err
	}
	held := int64(len(a.log))
	end := m.Offset + int64(len(m.Data))
	if end <= held {
		return protocol.LogAck{Size: held}, nil
	}
	if m.Offset != held {
		return protocol.LogAck{}, refuseSize(rules.ErrOffset, held, "log chunk at offset %d, the hub holds %d bytes", m.Offset, held)
	}
	if a.state != running {
		return protocol.LogAck{}, refuse(rules.ErrFenced, "attempt %s is %s and takes no more output", a.ref.Attempt, a.state)
	}
	a.log = append(a.log, m.Data...)
	return protocol.LogAck{Size: end}, nil
}

func (h *Hub) Finish(_ context.Context, id string, m protocol.Finish) (protocol.FinishAck, error) {
	if err := m.Outcome.Validate(); err != nil {
		return protocol.FinishAck{}, refuse(rules.ErrBadRequest, "%v", err)
	}
	return ledgered(h, id, m.AttemptRef, func(a *fakeAttempt) (protocol.FinishAck, error) {
		switch a.state {
		case finished:
			return protocol.FinishAck{AlreadyFinished: true}, nil
		case running:
		default:
			return protocol.FinishAck{}, refuse(rules.ErrFenced, "attempt %s is %s and was never started", a.ref.Attempt, a.state)
		}
		held := int64(len(a.log))
		if m.LogSize != held {
			return protocol.FinishAck{}, refuseSize(rules.ErrLogIncomplete, held, "finish says %d log bytes, the hub holds %d", m.LogSize, held)
		}
		if sum := sha256.Sum256(a.log); hex.EncodeToString(sum[:]) != m.LogSHA256 {
			a.log = nil // the hub's copy cannot be trusted: send it all again
			return protocol.FinishAck{}, refuseSize(rules.ErrLogIncomplete, 0, "log checksum mismatch: send the log again from offset 0")
		}
		a.state, a.finish = finished, &m
		return protocol.FinishAck{}, nil
	})
}

func (h *Hub) Ask(_ context.Context, id string, m protocol.Ask) (protocol.AskAck, error) {
	if err := m.Validate(); err != nil {
		return protocol.AskAck{}, refuse(rules.ErrBadRequest, "ask: %v", err)
	}
	return ledgered(h, id, m.AttemptRef, func(a *fakeAttempt) (protocol.AskAck, error) {
		if err := inTurn(a, "ask"); err != nil {
			return protocol.AskAck{}, err
		}
		if a.asked != "" {
			return protocol.AskAck{}, refuse(rules.ErrConflict, "attempt %d already asked question %s", a.ref.Epoch, a.asked)
		}
		h.questions++
		a.asked = fmt.Sprintf("q-%d", h.questions)
		return protocol.AskAck{QuestionID: a.asked}, nil
	})
}

func (h *Hub) Deliver(_ context.Context, id string, m protocol.Deliver) error {
	_, err := ledgered(h, id, m.AttemptRef, func(a *fakeAttempt) (struct{}, error) {
		if err := inTurn(a, "deliver"); err != nil {
			return struct{}{}, err
		}
		switch a.summary {
		case m.Summary:
			return struct{}{}, nil
		case "":
			a.summary = m.Summary
			return struct{}{}, nil
		}
		return struct{}{}, refuse(rules.ErrConflict, "attempt %d already delivered", a.ref.Epoch)
	})
	return err
}

func (h *Hub) Context(_ context.Context, _ string, m protocol.GetContext) (protocol.JobContext, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	a, err := h.fenced(m.AttemptRef)
	if err != nil {
		return protocol.JobContext{}, err
	}
	if err := inTurn(a, "read its context"); err != nil {
		return protocol.JobContext{}, err
	}
	return protocol.JobContext{Job: a.ref.Job, Attempt: a.ref.Epoch}, nil
}

func (h *Hub) Turns(_ context.Context, id string, m protocol.Turns) error {
	if err := m.Check(); err != nil {
		return refuse(rules.ErrBadRequest, "turns: %v", err)
	}
	_, err := ledgered(h, id, m.AttemptRef, func(a *fakeAttempt) (struct{}, error) {
		if err := inTurn(a, "record its turns"); err != nil {
			return struct{}{}, err
		}
		a.sessions[m.Session] = append(a.sessions[m.Session], m.Records...)
		return struct{}{}, nil
	})
	return err
}

// Transcript answers in one page; Next counts records.
func (h *Hub) Transcript(_ context.Context, _ string, m protocol.GetTranscript) (protocol.TranscriptPage, error) {
	if err := m.Check(); err != nil {
		return protocol.TranscriptPage{}, refuse(rules.ErrBadRequest, "transcript: %v", err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	a, err := h.fenced(m.AttemptRef)
	if err != nil {
		return protocol.TranscriptPage{}, err
	}
	if err := inTurn(a, "read its transcript"); err != nil {
		return protocol.TranscriptPage{}, err
	}
	recs := a.sessions[m.Session]
	from := min(int(max(m.After, 0)), len(recs))
	return protocol.TranscriptPage{Records: slices.Clone(recs[from:]), Next: int64(len(recs))}, nil
}

// Publish checks what the hub checks before it would look into a bundle
// (ids, fencing, the digest) and takes the commit as the job's head; it
// knows no git, so it never answers a stale head.
func (h *Hub) Publish(_ context.Context, ref protocol.AttemptRef, p protocol.Publication) (protocol.PublishResult, error) {
	if !commitID.MatchString(p.Commit) || !digest.MatchString(p.SHA256) {
		return protocol.PublishResult{}, refuse(rules.ErrBadRequest, "commit must be 40 and sha256 64 lower-case hex digits")
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	a, err := h.fenced(ref)
	if err != nil {
		return protocol.PublishResult{}, err
	}
	if err := inTurn(a, "publish"); err != nil {
		return protocol.PublishResult{}, err
	}
	sum := sha256.New()
	if _, err := io.Copy(sum, io.NewSectionReader(p.Bundle, 0, p.Size)); err != nil {
		return protocol.PublishResult{}, refuse(rules.ErrBadRequest, "read the publication: %v", err)
	}
	if got := hex.EncodeToString(sum.Sum(nil)); got != p.SHA256 {
		return protocol.PublishResult{}, refuse(rules.ErrBadRequest, "the publication's SHA-256 is %s, not %s: the transfer was damaged", got, p.SHA256)
	}
	j := h.job(ref.Job)
	if j.head == p.Commit {
		return protocol.PublishResult{Head: j.head}, nil // the reply to an earlier one was lost
	}
	j.head = p.Commit
	res := protocol.PublishResult{Head: j.head}
	if p.Checkpoint {
		j.checkpoints++
		res.Checkpoint = j.checkpoints
	}
	return res, nil
}

// ContextFiles hands over the job's context files in name order.
func (h *Hub) ContextFiles(_ context.Context, ref protocol.AttemptRef, file func(string, io.Reader) error) error {
	h.mu.Lock()
	a, err := h.fenced(ref)
	if err == nil {
		err = inTurn(a, "read its context files")
	}
	files := maps.Clone(h.job(ref.Job).context)
	h.mu.Unlock()
	if err != nil {
		return err
	}
	for _, name := range slices.Sorted(maps.Keys(files)) {
		if err := file(name, bytes.NewReader(files[name])); err != nil {
			return err
		}
	}
	return nil
}

var (
	commitID = regexp.MustCompile(`^[0-9a-f]{40}$`)
	digest   = regexp.MustCompile(`^[0-9a-f]{64}$`)
)

// ledgered applies fn to the attempt ref names once per request id: a
// resent id gets the first reply. Refusals are not kept (they changed
// nothing).
func ledgered[Rep any](h *Hub, id string, ref protocol.AttemptRef, fn func(*fakeAttempt) (Rep, error)) (Rep, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if rep, ok := h.applied[id]; ok {
		if r, ok := rep.(Rep); ok {
			return r, nil
		}
	}
	var zero Rep
	a, err := h.fenced(ref)
	if err != nil {
		return zero, err
	}
	rep, err := fn(a)
	if err != nil {
		return zero, err
	}
	h.applied[id] = rep
	return rep, nil
}

// fenced finds the attempt ref names under its epoch; h.mu is held.
func (h *Hub) fenced(ref protocol.AttemptRef) (*fakeAttempt, error) {
	if err := ref.Validate(); err != nil {
		return nil, refuse(rules.ErrBadRequest, "%v", err)
	}
	a := h.attempts[ref.Attempt]
	switch {
	case a == nil:
		return nil, refuse(rules.ErrNotFound, "no attempt %s", ref.Attempt)
	case a.ref.Job != ref.Job:
		return nil, refuse(rules.ErrBadRequest, "attempt %s belongs to job %s, not %s", ref.Attempt, a.ref.Job, ref.Job)
	case a.ref.Epoch != ref.Epoch:
		return nil, refuse(rules.ErrFenced, "stale epoch %d for attempt %s (its epoch is %d)", ref.Epoch, ref.Attempt, a.ref.Epoch)
	}
	return a, nil
}

func inTurn(a *fakeAttempt, tool string) error {
	if a.state != running {
		return refuse(rules.ErrFenced, "attempt %s is %s and can no longer %s", a.ref.Attempt, a.state, tool)
	}
	return nil
}

func refuse(code, format string, args ...any) *rules.Error {
	return &rules.Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

func refuseSize(code string, size int64, format string, args ...any) *rules.Error {
	e := refuse(code, format, args...)
	e.Size = &size
	return e
}
