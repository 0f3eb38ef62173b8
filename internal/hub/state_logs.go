package hub

import (
	"context"
	"errors"
	"time"

	"drover/internal/hub/call"
	"drover/internal/store"
)

// The logs' operations of the state layer (docs/architecture.md): the
// HTTP API (api_logs.go) and the dashboard read logs through them.

const (
	maxLogRead = 1 << 20
	maxLogWait = 30 * time.Second
)

// errCallerGone ends a wait whose caller went away: nothing is answered.
var errCallerGone = errors.New("the caller went away")

// logSlice is one answer to a log read.
type logSlice struct {
	data     []byte
	attempt  int64 // 0 when the job has no attempt yet
	latest   int64
	size     int64
	complete bool
	state    string
}

// readLog reads the log req asks for at once, without waiting.
func (h *Hub) readLog(ctx context.Context, p call.Caller, req logRequest) (logSlice, error) {
	jobID, number, offset := req.ID, req.Attempt, req.Offset
	var s logSlice
	err := h.store.Read(ctx, func(tx store.Tx) error {
		j, err := visibleJob(tx, p, jobID)
		if err != nil {
			return err
		}
		s.state = string(j.State)
		s.latest = j.Epoch
		atts, err := tx.Attempts(jobID)
		if err != nil {
			return err
		}
		if number == 0 {
			number = j.Epoch
		}
		if number == 0 {
			s.complete = j.State.Terminal() // e.g. cancelled while queued
			return nil
		}
		var a *store.Attempt
		for i := range atts {
			if atts[i].Epoch == number {
				a = &atts[i]
			}
		}
		if a == nil {
			return call.NotFound("job %s has no attempt %d", jobID, number)
		}
		s.attempt, s.size = a.Epoch, a.LogSize
		if offset > a.LogSize {
			return call.BadRequest("offset %d is past the end of the log (%d bytes)", offset, a.LogSize)
		}
		s.data, err = tx.ReadLog(a.ID, offset, maxLogRead)
		if err != nil {
			return err
		}
		// An attempt's log is complete once the attempt ended, unless it is
		// unknown while its job still is: a late receipt may bring the rest.
		ended := !a.State.Active() && !lateResultAllowed(*a, j)
		s.complete = ended && offset+int64(len(s.data)) == a.LogSize
		return nil
	})
	return s, err
}

// logRequest asks for a job's log from Offset on, of its attempt number
// Attempt (0: the latest), waiting up to Wait for bytes to come.
type logRequest struct {
	ID      string
	Attempt int64
	Offset  int64
	Wait    time.Duration
}

// followLog reads the log as readLog does; with a Wait it answers once
// there is something new, the log is complete or the wait ended, so
// `drover logs -f` is a cheap long poll that resumes from any offset after
// a disconnect.
func (h *Hub) followLog(ctx context.Context, p call.Caller, req logRequest) (logSlice, error) {
	wait := min(req.Wait, maxLogWait)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		ch, release := h.waitChan(req.ID) // before reading, so no change is missed
		s, err := h.readLog(ctx, p, req)
		if err != nil || len(s.data) > 0 || s.complete || wait == 0 {
			release()
			return s, err
		}
		select {
		case <-ch:
		case <-deadline.C:
			wait = 0
		case <-ctx.Done():
		}
		release()
		if ctx.Err() != nil {
			return logSlice{}, errCallerGone
		}
	}
}
