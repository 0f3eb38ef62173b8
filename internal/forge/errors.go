package forge

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"drover/internal/retry"
	"drover/internal/rules"
)

// Error codes: what a caller decides on. unauthorized, not_found, conflict and refused are
// not worth another try as they are; rate_limited and unavailable are, after RetryAfter when
// it is set.
const (
	CodeUnauthorized = "unauthorized" // 401 or 403: the token is wrong, expired or lacks the right
	CodeNotFound     = "not_found"    // 404: no such repository or pull request, or not for this token
	CodeRateLimited  = "rate_limited" // 429
	CodeUnavailable  = "unavailable"  // 5xx, or no answer at all
	CodeBadReply     = "bad_reply"    // an answer drover cannot read
	CodeConflict     = "conflict"     // 409 or 422: the pull request cannot be made as asked
	CodeRefused      = "refused"      // another 4xx
	CodeNotReady     = "not_ready"    // a reply that the forge has not caught up with a push yet; retry soon
)

// Bounds on what an Error carries of the server's answer.
const (
	maxMessage    = 200
	maxRetryAfter = 10 * time.Minute
)

// Error is a forge call that failed. Msg is at most 200 bytes of the server's message (or of
// the cause, with no answer), its control characters escaped; it never holds the token.
type Error struct {
	Op         string // what drover was doing: "create pull request", ...
	Status     int    // the HTTP status; 0 with no answer
	Code       string
	RetryAfter time.Duration // what a 429 or 503 asked for, at most 10 minutes; 0 when unsaid
	Msg        string
	err        error // the transport's cause, for errors.Is (context.Canceled, ...)
}

func (e *Error) Error() string {
	s := "forge: " + e.Op + ": " + e.Code
	if e.Status != 0 {
		s += " (HTTP " + strconv.Itoa(e.Status) + ")"
	}
	if e.RetryAfter > 0 {
		s += ", retry after " + e.RetryAfter.String()
	}
	if e.Msg != "" {
		s += ": " + e.Msg
	}
	return s
}

func (e *Error) Unwrap() error { return e.err }

// statusError is the Error of a non-2xx answer with body, whose message is Gitea's
// {"message": ...} when it is one, else the body itself.
func statusError(op string, resp *http.Response, body []byte, now time.Time) *Error {
	e := &Error{Op: op, Status: resp.StatusCode}
	switch s := resp.StatusCode; {
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		e.Code = CodeUnauthorized
	case s == http.StatusNotFound:
		e.Code = CodeNotFound
	case s == http.StatusTooManyRequests:
		e.Code = CodeRateLimited
	case s == http.StatusConflict || s == http.StatusUnprocessableEntity:
		e.Code = CodeConflict
	case s >= 500:
		e.Code = CodeUnavailable
	case s >= 400:
		e.Code = CodeRefused
	default: // 1xx or 3xx: a redirect not followed, or nothing drover asked for
		e.Code = CodeBadReply
	}
	if e.Code == CodeRateLimited || e.Code == CodeUnavailable {
		e.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), now)
	}
	var m struct {
		Message string `json:"message"`
	}
	msg := string(body)
	if json.Unmarshal(body, &m) == nil && m.Message != "" {
		msg = m.Message
	}
	e.Msg = message(msg)
	return e
}

// retryAfter reads a Retry-After header (seconds or an HTTP date), bounded to
// [0, maxRetryAfter]; 0 when it is absent or unreadable.
func retryAfter(v string, now time.Time) time.Duration {
	at, ok := retry.AtHeader(v, now)
	if !ok {
		return 0
	}
	return min(max(at.Sub(now), 0), maxRetryAfter)
}

// message is a server's text as an Error carries it: one line, control characters escaped,
// at most maxMessage bytes.
func message(s string) string { return cut(escape(strings.TrimSpace(s)), maxMessage) }

// escape writes control characters and invalid UTF-8 as Go escapes.
func escape(s string) string {
	var b strings.Builder
	for i, r := range s {
		switch {
		case r == utf8.RuneError && !strings.HasPrefix(s[i:], "\uFFFD"):
			fmt.Fprintf(&b, `\x%02x`, s[i])
		case rules.IsControl(r):
			b.WriteString(strings.Trim(strconv.QuoteRune(r), "'"))
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// cut bounds s to n bytes, cutting on a rune boundary and marking the cut.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	n -= len("…")
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
