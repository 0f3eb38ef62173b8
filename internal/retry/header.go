package retry

import (
	"net/http"
	"strconv"
	"strings"
	"time"
)

// AtHeader is when an HTTP Retry-After value (whole seconds, or an HTTP
// date) says to try again, seen at now; ok is false when v is neither.
// It is the one reading of the header: the model providers, the egress
// proxy and the forges take their waits from it.
func AtHeader(v string, now time.Time) (at time.Time, ok bool) {
	v = strings.TrimSpace(v)
	if v == "" {
		return time.Time{}, false
	}
	if s, err := strconv.ParseInt(v, 10, 64); err == nil {
		if s < 0 {
			return time.Time{}, false
		}
		// Beyond a year is no wait anyone keeps; it also keeps the
		// Duration from overflowing.
		return now.Add(time.Duration(min(s, int64(365*24*time.Hour/time.Second))) * time.Second), true
	}
	if t, err := http.ParseTime(v); err == nil {
		return t, true
	}
	return time.Time{}, false
}
