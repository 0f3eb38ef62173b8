package forge

import (
	"encoding/json"
	"errors"
	"maps"
	"net/http"
	"net/url"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"drover/internal/retry"
	"drover/internal/rules"
)

// Error codes: what a caller decides on. unauthorized, not_found, conflict and refused are
// not worth another try as they are; rate_limited and unavailable are, after RetryAfter when
// it is set, and not_ready is, soon.
const (
	CodeUnauthorized = "unauthorized" // 401 or 403: the token is wrong, expired or lacks the right
	CodeNotFound     = "not_found"    // 404: no such repository or pull request, or not for this token
	// 429, or GitHub's 403 of a rate limit: a primary one (X-RateLimit-Remaining: 0 until
	// X-RateLimit-Reset) or a secondary one (Retry-After, or a message saying so).
	CodeRateLimited = "rate_limited"
	CodeUnavailable = "unavailable" // 5xx, or no answer at all
	// NotReady is a refusal right after a push: the forge does not know the pushed head yet
	// (GitHub's "No commits between" or invalid head, GitLab's source branch that "does not
	// exist").
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

// statusError is the Error of a non-2xx answer with body (redacted), whose message is
// serverMessage's.
func statusError(op string, resp *http.Response, body []byte, now time.Time) *Error {
	msg := serverMessage(body)
	wait, limited := rateLimit(resp.Header, msg, now)
	e := &Error{Op: op, Status: resp.StatusCode, Msg: message(msg)}
	switch s := resp.StatusCode; {
	case s == http.StatusTooManyRequests || s == http.StatusForbidden && limited:
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
	if e.Code == CodeRateLimited || e.Code == CodeUnavailable {
		e.RetryAfter = wait
	}
	return e
}

// rateLimit reads what an answer says of a rate limit. wait is the time to wait, bounded to
// [0, maxRetryAfter]: its Retry-After (seconds or an HTTP date), else the window's end in Unix
// seconds (GitHub's X-RateLimit-Reset once its X-RateLimit-Remaining is 0, GitLab's
// RateLimit-Reset), else GitHub's minute for a secondary rate limit that names no time; 0
// when unsaid. limited tells whether it says a limit was hit: GitHub answers one with a 403,
// which is otherwise a missing right.
func rateLimit(h http.Header, msg string, now time.Time) (wait time.Duration, limited bool) {
	ra, exhausted := h.Get("Retry-After"), h.Get("X-RateLimit-Remaining") == "0"
	msg = strings.ToLower(msg)
	limited = ra != "" || exhausted || strings.Contains(msg, "rate limit")
	at, ok := retry.AtHeader(ra, now)
	if !ok && exhausted {
		at, ok = unixHeader(h.Get("X-RateLimit-Reset"))
	}
	if !ok {
		at, ok = unixHeader(h.Get("RateLimit-Reset"))
	}
	switch {
	case ok:
		wait = min(max(at.Sub(now), 0), maxRetryAfter)
	case strings.Contains(msg, "secondary rate limit"):
		wait = secondaryWait
	}
	return wait, limited
}

// unixHeader reads a header of Unix seconds.
func unixHeader(v string) (time.Time, bool) {
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n <= 0 {
		return time.Time{}, false
	}
	return time.Unix(n, 0), true
}

// serverMessage is an error answer's message: {"message": ...} (Gitea's and GitHub's a
// string, GitLab's also a list, or an object of a list per field: "source_branch does not
// exist") with the messages of GitHub's "errors", else {"error": ...}, else the body itself.
func serverMessage(body []byte) string {
	var m struct {
		Message json.RawMessage `json:"message"`
		Errors  json.RawMessage `json:"errors"`
		Error   json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &m) != nil {
		return string(body)
	}
	if msg := flatMessage(m.Message); msg != "" {
		if parts := errorParts(m.Errors); len(parts) > 0 {
			return msg + ": " + strings.Join(parts, "; ")
		}
		return msg
	}
	var s string
	if json.Unmarshal(m.Error, &s) == nil && s != "" {
		return s
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

// errorParts reads GitHub's "errors": strings, or objects with a message or a resource, field
// and code.
func errorParts(raw json.RawMessage) []string {
	var list []json.RawMessage
	if json.Unmarshal(raw, &list) != nil {
		return nil
	}
	var parts []string
	for _, raw := range list {
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
	return parts
}

// transportError is the Error of a call with no answer, or whose answer failed while read
// (status then set). Only the cause: the URL is ours, and the message is the transport's,
// redacted of token.
func transportError(op string, status int, err error, token string) *Error {
	var ue *url.Error
	if errors.As(err, &ue) {
		err = ue.Err
	}
	return &Error{Op: op, Status: status, Code: CodeUnavailable, Msg: message(redact(err.Error(), token)), err: err}
}

// tokenShaped is what GitHub's tokens and JWTs look like: redacted from every error, whether
// drover holds one (a personal token) or minted it (an App's installation token, its JWT).
var tokenShaped = regexp.MustCompile(`\b(gh[pousr]_[A-Za-z0-9_]{16,}|github_pat_[A-Za-z0-9_]{16,}|eyJ[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)`)

// redact takes token (when drover holds one) and anything token-shaped out of s, should a
// server or a proxy echo them. Before a message is cut, which could leave a part of a token.
func redact(s, token string) string {
	if token != "" {
		s = strings.ReplaceAll(s, token, "[redacted]")
	}
	return tokenShaped.ReplaceAllString(s, "[redacted]")
}

// message is a server's text as an Error carries it: one line, control characters escaped,
// at most maxMessage bytes.
func message(s string) string { return cut(escape(strings.TrimSpace(s)), maxMessage) }

// escape writes control characters and invalid UTF-8 as Go escapes.
func escape(s string) string { return rules.Escape(s, false) }

// cut bounds s to n bytes, marking the cut.
func cut(s string, n int) string { return rules.Clip(s, n) }
