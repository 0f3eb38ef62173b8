package hub

import (
	"context"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"drover/internal/protocol"
	"drover/internal/store"
)

const (
	maxLogRead = 1 << 20
	maxLogWait = 30 * time.Second
)

// logSlice is one answer to a log read.
type logSlice struct {
	data     []byte
	attempt  int64 // 0 when the job has no attempt yet
	latest   int64
	size     int64
	complete bool
	state    string
}

func (h *Hub) readLog(ctx context.Context, p principal, jobID string, number, offset int64) (logSlice, error) {
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
			return notFound("job %s has no attempt %d", jobID, number)
		}
		s.attempt, s.size = a.Epoch, a.LogSize
		if offset > a.LogSize {
			return badRequest("offset %d is past the end of the log (%d bytes)", offset, a.LogSize)
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

// apiLog returns log bytes from an offset. With wait=MS it holds the request
// until there is something new (or the wait ends), so `drover logs -f` is a
// cheap long poll that resumes from any offset after a disconnect.
func (h *Hub) apiLog(w http.ResponseWriter, r *http.Request, p principal) error {
	id := r.PathValue("id")
	q := r.URL.Query()
	num, err := queryInt(q, "attempt", 0, math.MaxInt64)
	if err != nil {
		return err
	}
	offset, err := queryInt(q, "offset", 0, math.MaxInt64)
	if err != nil {
		return err
	}
	waitMS, err := queryInt(q, "wait", 0, math.MaxInt64)
	if err != nil {
		return err
	}
	// Capped before the multiplication, which would overflow.
	wait := maxLogWait
	if waitMS < maxLogWait.Milliseconds() {
		wait = time.Duration(waitMS) * time.Millisecond
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	for {
		ch, release := h.waitChan(id) // before reading, so no change is missed
		s, err := h.readLog(r.Context(), p, id, num, offset)
		if err != nil {
			release()
			return err
		}
		if len(s.data) > 0 || s.complete || wait == 0 {
			release()
			hd := w.Header()
			hd.Set("Content-Type", "application/octet-stream")
			hd.Set(protocol.HeaderLogAttempt, strconv.FormatInt(s.attempt, 10))
			hd.Set(protocol.HeaderLogOffset, strconv.FormatInt(offset, 10))
			hd.Set(protocol.HeaderLogSize, strconv.FormatInt(s.size, 10))
			hd.Set(protocol.HeaderLogComplete, strconv.FormatBool(s.complete))
			hd.Set(protocol.HeaderJobState, s.state)
			hd.Set(protocol.HeaderLatest, strconv.FormatInt(s.latest, 10))
			w.WriteHeader(http.StatusOK)
			_, _ = w.Write(s.data)
			return nil
		}
		select {
		case <-ch:
		case <-deadline.C:
			wait = 0
		case <-r.Context().Done():
		}
		release()
		if r.Context().Err() != nil {
			return nil
		}
	}
}

// queryInt reads the whole-number query parameter name: 0 when absent,
// else a number from lo to hi (an overflowing one is out of range too).
func queryInt(q url.Values, name string, lo, hi int64) (int64, error) {
	s := q.Get(name)
	if s == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < lo || n > hi {
		return 0, badRequest("%s must be a whole number from %d to %d, not %q", name, lo, hi, truncate(s, 40))
	}
	return n, nil
}
