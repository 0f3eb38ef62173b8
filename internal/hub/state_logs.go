package hub

import (
	"context"
	"time"

	"drover/internal/hub/call"
	"drover/internal/store"
)

// The logs' operations of the state layer (docs/architecture.md): the
// HTTP API (httpapi/logs.go) and the dashboard read logs through them.

const maxLogRead = 1 << 20

// readLog reads the log req asks for at once, without waiting.
func (h *Hub) readLog(ctx context.Context, p call.Caller, req call.LogRequest) (call.LogSlice, error) {
	jobID, number, offset := req.ID, req.Attempt, req.Offset
	var s call.LogSlice
	err := h.store.Read(ctx, func(tx store.Tx) error {
		j, err := visibleJob(tx, p, jobID)
		if err != nil {
			return err
		}
		s.State = string(j.State)
		s.Latest = j.Epoch
		atts, err := tx.Attempts(jobID)
		if err != nil {
			return err
		}
		if number == 0 {
			number = j.Epoch
		}
		if number == 0 {
			s.Complete = j.State.Terminal() // e.g. cancelled while queued
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
		s.Attempt, s.Size = a.Epoch, a.LogSize
		if offset > a.LogSize {
			return call.BadRequest("offset %d is past the end of the log (%d bytes)", offset, a.LogSize)
		}
		s.Data, err = tx.ReadLog(a.ID, offset, maxLogRead)
		if err != nil {
			return err
		}
		// An attempt's log is complete once the attempt ended, unless it is
		// unknown while its job still is: a late receipt may bring the rest.
		ended := !a.State.Active() && !lateResultAllowed(*a, j)
		s.Complete = ended && offset+int64(len(s.Data)) == a.LogSize
		return nil
	})
	return s, err
}

// FollowLog reads the log as readLog does; with a Wait it answers once
// there is something new, the log is complete or the wait ended, so
// `drover logs -f` is a cheap long poll that resumes from any offset after
// a disconnect.
func (h *Hub) FollowLog(ctx context.Context, p call.Caller, req call.LogRequest) (call.LogSlice, error) {
	wait := min(req.Wait, call.MaxLogWait)
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		ch, release := h.waitChan(req.ID) // before reading, so no change is missed
		s, err := h.readLog(ctx, p, req)
		if err != nil || len(s.Data) > 0 || s.Complete || wait == 0 {
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
			return call.LogSlice{}, call.ErrCallerGone
		}
	}
}
