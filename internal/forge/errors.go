package forge

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"drover/internal/retry"
	"drover/internal/rules"
)

// Error codes: what a caller decides on. unauthorized, not_found, conflict and refused are
// not worth another try as they are; rate_limited and unavailable are, after RetryAfter when
// it is set, and not_ready is, briefly.
const (
	CodeUnauthorized = "unauthorized" // 401 or 403: the token is wrong, expired or lacks the right
	CodeNotFound     = "not_found"    // 404: no such repository or pull request, or not for this token
	// 429, or GitHub's 403 of a rate limit: a primary one (X-RateLimit-Remaining: 0 until
	// X-RateLimit-Reset) or a secondary one (Retry-After, or a message saying so).
	CodeRateLimited = "rate_limited"
	CodeUnavailable = "unavailable" // 5xx, or no answer at all
	// NotReady is a 422 right after a push: the forge does not know the pushed head yet
	// (GitHub's "No commits between" or an invalid head while it indexes the push).
	CodeNotReady = "not_ready"
	CodeBadReply = "bad_reply" // an answer drover cannot read
	CodeConflict = "conflict"  // 409 or 422: the pull request cannot be made as asked
	CodeRefused  = "refused"   // another 4xx
)

// Bounds on what an Error carries of the server's answer.
const (
	maxMessage    = 200
	maxRetryAfter = 10 * time.Minute
	// secondaryWait is GitHub's advice for a secondary rate limit that names no time: wait
	// at least a minute.
	secondaryWait = time.Minute
)

// Error is a forge call that failed. Msg is at most 200 bytes of the server's message (or of
// the cause, with no answer), its control characters escaped; it never holds the token.
type Error struct {
	Op         string // what drover was doing: "create pull request", ...
	Status     int    // the HTTP status; 0 with no answer
	Code       string
	RetryAfter time.Duration // what a rate limit or a 503 asked for, at most 10 minutes; 0 when unsaid
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

// statusError is the Error of a non-2xx answer with body, whose message is the forge's
// {"message": ..., "errors": [...]} (GitHub adds the errors) when it is one, else the body.
func statusError(op string, resp *http.Response, body []byte, now time.Time) *Error {
	msg := replyMessage(body)
	e := &Error{Op: op, Status: resp.StatusCode, Msg: message(msg)}
	switch s := resp.StatusCode; {
	case s == http.StatusTooManyRequests || s == http.StatusForbidden && rateLimited(resp.Header, msg):
		e.Code = CodeRateLimited
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		e.Code = CodeUnauthorized
	case s == http.StatusNotFound:
		e.Code = CodeNotFound
	case s == http.StatusConflict || s == http.StatusUnprocessableEntity:
		e.Code = CodeConflict
	case s >= 500:
		e.Code = CodeUnavailable
	case s >= 400:
		e.Code = CodeRefused
	default: // 1xx or 3xx: a redirect not followed, or nothing drover asked for
		e.Code = CodeBadReply
	}
	switch e.Code {
	case CodeUnavailable:
		e.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), now)
	case CodeRateLimited:
		e.RetryAfter = retryAfter(resp.Header.Get("Retry-After"), now)
		if e.RetryAfter == 0 && resp.Header.Get("X-RateLimit-Remaining") == "0" {
			e.RetryAfter = rateLimitReset(resp.Header.Get("X-RateLimit-Reset"), now)
		}
		if e.RetryAfter == 0 && strings.Contains(strings.ToLower(msg), "secondary rate limit") {
			e.RetryAfter = secondaryWait
		}
	}
	return e
}

// rateLimited tells GitHub's 403 of a rate limit from one of a missing right.
func rateLimited(h http.Header, msg string) bool {
	return h.Get("Retry-After") != "" || h.Get("X-RateLimit-Remaining") == "0" ||
		strings.Contains(strings.ToLower(msg), "rate limit")
}

// replyMessage is the message of an error answer: {"message": ...} with the messages of its
// "errors" (strings, or objects with a message or a resource, field and code), else the body.
func replyMessage(body []byte) string {
	var m struct {
		Message string            `json:"message"`
		Errors  []json.RawMessage `json:"errors"`
	}
	if json.Unmarshal(body, &m) != nil || m.Message == "" {
		return string(body)
	}
	var parts []string
	for _, raw := range m.Errors {
		var s string
		var o struct{ Message, Resource, Field, Code string }
		switch {
		case json.Unmarshal(raw, &s) == nil && s != "":
			parts = append(parts, s)
		case json.Unmarshal(raw, &o) == nil && o.Message != "":
			parts = append(parts, o.Message)
		case o.Code != "":
			parts = append(parts, strings.TrimSpace(o.Resource+" "+o.Field+" "+o.Code))
		}
	}
	if len(parts) == 0 {
		return m.Message
	}
	return m.Message + ": " + strings.Join(parts, "; ")
}

// transportError is the Error of a call with no answer. Only the cause: the URL is ours, and
// the message is the transport's, redacted.
func transportError(op string, err error, redact func(string) string) *Error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return &Error{Op: op, Code: CodeUnavailable, Msg: message(redact(err.Error())), err: err}
}

// retryAfter reads a Retry-After header (seconds or an HTTP date), bounded to
// [0, maxRetryAfter]; 0 when it is absent or unreadable.
func retryAfter(v string, now time.Time) time.Duration {
	at, ok := retry.AtHeader(v, now)
	if !ok {
		return 0
	}
	return waitUntil(at, now)
}

// rateLimitReset reads GitHub's X-RateLimit-Reset (epoch seconds) as a wait, bounded like
// retryAfter's; 0 when it is absent or unreadable.
func rateLimitReset(v string, now time.Time) time.Duration {
	sec, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || sec <= 0 {
		return 0
	}
	return waitUntil(time.Unix(sec, 0), now)
}

// waitUntil is the wait until at, within [0, maxRetryAfter].
func waitUntil(at, now time.Time) time.Duration { return min(max(at.Sub(now), 0), maxRetryAfter) }

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
