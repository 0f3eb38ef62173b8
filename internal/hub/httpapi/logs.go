package httpapi

import (
	"errors"
	"math"
	"net/http"
	"strconv"
	"time"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
)

// followLog returns log bytes from an offset, holding the request with
// wait=MS until there is something new (Logs.FollowLog).
func (a *API) followLog(w http.ResponseWriter, r *http.Request, p call.Caller) error {
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
	s, err := a.core.FollowLog(r.Context(), p, call.LogRequest{ID: r.PathValue("id"), Attempt: num, Offset: offset, Wait: wait})
	if errors.Is(err, call.ErrCallerGone) {
		return nil
	}
	if err != nil {
		return err
	}
	hd := w.Header()
	hd.Set("Content-Type", "application/octet-stream")
	hd.Set(apitypes.HeaderLogAttempt, strconv.FormatInt(s.Attempt, 10))
	hd.Set(apitypes.HeaderLogOffset, strconv.FormatInt(offset, 10))
	hd.Set(apitypes.HeaderLogSize, strconv.FormatInt(s.Size, 10))
	hd.Set(apitypes.HeaderLogComplete, strconv.FormatBool(s.Complete))
	hd.Set(apitypes.HeaderJobState, s.State)
	hd.Set(apitypes.HeaderLatest, strconv.FormatInt(s.Latest, 10))
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(s.Data)
	return nil
}
