package forge

import (
	"encoding/json"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"drover/internal/retry"
	"drover/internal/rules"
)

// Error codes: what a caller decides on. unauthorized, not_found, conflict and refused are
// not worth another try as they are; rate_limited and unavailable are, after RetryAfter when
// it is set, and not_ready is, soon.
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

// statusError is the Error of a non-2xx answer with body, whose message is serverMessage's.
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
		e.RetryAfter = retryAfter(resp.Header, now)
	}
	e.Msg = message(serverMessage(body))
	return e
}

// serverMessage is an error answer's message: {"message": ...} (Gitea's a string, GitLab's
// also a list, or an object of a list per field: "source_branch does not exist"), else
// {"error": ...}, else the body itself.
func serverMessage(body []byte) string {
	var m struct {
		Message json.RawMessage `json:"message"`
		Error   string          `json:"error"`
	}
	if json.Unmarshal(body, &m) == nil {
		if s := flatMessage(m.Message); s != "" {
			return s
		}
		if m.Error != "" {
			return m.Error
		}
	}
	return string(body)
}

// flatMessage is a JSON message as one line: a string, a list's items joined by "; ", an
// object's fields (sorted) each as "NAME ITEMS"; "" for anything else.
func flatMessage(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []string
	var list []json.RawMessage
	var fields map[string]json.RawMessage
	switch {
	case json.Unmarshal(raw, &list) == nil:
		for _, v := range list {
			if s := flatMessage(v); s != "" {
				parts = append(parts, s)
			}
		}
	case json.Unmarshal(raw, &fields) == nil:
		for _, k := range slices.Sorted(maps.Keys(fields)) {
			if s := flatMessage(fields[k]); s != "" {
				parts = append(parts, k+" "+s)
			}
		}
	}
	return strings.Join(parts, "; ")
}

// retryAfter is the wait a 429 or 503 asked for: its Retry-After (seconds or an HTTP date),
// else GitLab's RateLimit-Reset (the Unix second its window ends), bounded to
// [0, maxRetryAfter]; 0 when neither is there and readable.
func retryAfter(h http.Header, now time.Time) time.Duration {
	at, ok := retry.AtHeader(h.Get("Retry-After"), now)
	if !ok {
		at, ok = unixHeader(h.Get("RateLimit-Reset"))
	}
	if !ok {
		return 0
	}
	return min(max(at.Sub(now), 0), maxRetryAfter)
}

// unixHeader reads a header of Unix seconds.
func unixHeader(v string) (time.Time, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}, false
	}
	return time.Unix(n, 0), true
}

// redact takes the token out of s, should a server or a proxy echo it.
func redact(s, token string) string { return strings.ReplaceAll(s, token, "[redacted]") }

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
