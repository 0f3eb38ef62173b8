package hub

import (
	"errors"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"drover/internal/hub/call"
	"drover/internal/protocol"
)

// followLog returns log bytes from an offset, holding the request with
// wait=MS until there is something new (Hub.followLog).
func (a httpAPI) followLog(w http.ResponseWriter, r *http.Request, p call.Caller) error {
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
	wait := time.Duration(min(waitMS, call.MaxLogWait.Milliseconds())) * time.Millisecond
	s, err := a.h.FollowLog(r.Context(), p, call.LogRequest{ID: r.PathValue("id"), Attempt: num, Offset: offset, Wait: wait})
	if errors.Is(err, call.ErrCallerGone) {
		return nil
	}
	if err != nil {
		return err
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/octet-stream")
	hd.Set(protocol.HeaderLogAttempt, strconv.FormatInt(s.Attempt, 10))
	hd.Set(protocol.HeaderLogOffset, strconv.FormatInt(offset, 10))
	hd.Set(protocol.HeaderLogSize, strconv.FormatInt(s.Size, 10))
	hd.Set(protocol.HeaderLogComplete, strconv.FormatBool(s.Complete))
	hd.Set(protocol.HeaderJobState, s.State)
	hd.Set(protocol.HeaderLatest, strconv.FormatInt(s.Latest, 10))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(s.Data)
	return nil
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
		return 0, call.BadRequest("%s must be a whole number from %d to %d, not %q", name, lo, hi, call.Truncate(s, 40))
	}
	return n, nil
}
