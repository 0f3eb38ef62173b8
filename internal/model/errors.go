package model

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"drover/internal/retry"
	"drover/internal/rules"
)

// Kind says what went wrong with a model call, which decides what the
// loop and the runner do about it.
type Kind string

const (
	// KindTransport: no usable answer arrived (connection refused or cut,
	// a garbled or cut-off stream, a call past its timeout). Retried.
	KindTransport Kind = "transport"
	// KindAuth: the provider refused the key (401/403).
	KindAuth Kind = "auth"
	// KindLimited: a rate or usage limit (429); RetryAt is the reset the
	// provider stated, zero when it stated none.
	KindLimited Kind = "limited"
	// KindUnavailable: the provider is overloaded or failing (5xx, 529).
	KindUnavailable Kind = "unavailable"
	// KindRefused: the provider refused the request itself (another 4xx:
	// a prompt too long, an endpoint it does not serve).
	KindRefused Kind = "refused"
	// KindNoModel: the server does not serve the model (404 naming it).
	KindNoModel Kind = "no_model"
	// KindNoTools: the server refused the request's tools (400 "does not
	// support tools", Ollama's for a model whose template has none): the
	// model may still answer in text.
	KindNoTools Kind = "no_tools"
	// KindCancelled: the caller's context ended.
	KindCancelled Kind = "cancelled"
)

// Error is a failed model call. Its text names the provider, the host and
// what the provider said (its error message, clipped), never the key, the
// prompt or the rest of a response body.
type Error struct {
	Kind    Kind
	Status  int // HTTP status; 0 when none arrived
	RetryAt time.Time
	Message string
}

func (e *Error) Error() string { return e.Message }

// AccountFault says whether the refusal is the account's configuration's
// (a model or endpoint the server does not serve), not the request's: the
// same call would fail for every job. A request too long for the model is
// the job's.
func (e *Error) AccountFault() bool {
	switch e.Kind {
	case KindNoModel, KindNoTools:
		return true
	case KindRefused:
		m := strings.ToLower(e.Message)
		return e.Status != http.StatusRequestEntityTooLarge && !strings.Contains(m, "too long") && !strings.Contains(m, "context")
	}
	return false
}

// statusError is what a caller makes of its SDK's HTTP error.
type statusError struct {
	status int
	header http.Header
	body   string
}

func (s *statusError) Error() string { return "HTTP " + strconv.Itoa(s.status) }

// httpErr is a statusError from an SDK's error: its status, the headers of
// resp and the body of dump (the SDK's dump of the response).
func httpErr(status int, resp *http.Response, dump []byte) error {
	se := &statusError{status: status}
	if resp != nil {
		se.header = resp.Header
	}
	if i := bytes.Index(dump, []byte("\r\n\r\n")); i >= 0 {
		se.body = string(dump[i+4:])
	}
	return se
}

// messageRE finds a provider's error message in its error body.
var messageRE = regexp.MustCompile(`"message"\s*:\s*"((?:[^"\\]|\\.){0,400})`)

// maxMessage bounds the provider's words quoted in an error.
const maxMessage = 200

func (p *provider) classify(ctx context.Context, err error) *Error {
	where := p.cfg.Provider + " at " + p.host()
	var se *statusError
	var e *Error
	switch {
	case errors.As(err, &e):
		return e
	case ctx.Err() != nil:
		return &Error{Kind: KindCancelled, Message: where + ": call cancelled"}
	case errors.As(err, &se):
		e = &Error{Status: se.status}
		said := ""
		if m := messageRE.FindStringSubmatch(se.body); m != nil {
			if s, err := strconv.Unquote(`"` + m[1] + `"`); err == nil {
				said = s
			} else {
				said = m[1]
			}
		}
		switch {
		case se.status == http.StatusUnauthorized || se.status == http.StatusForbidden:
			e.Kind = KindAuth
		case se.status == http.StatusTooManyRequests:
			e.Kind = KindLimited
			e.RetryAt = statedReset(se.header, time.Now())
		case se.status >= 500:
			e.Kind = KindUnavailable
		case se.status == http.StatusNotFound && strings.Contains(strings.ToLower(said), "model"):
			e.Kind = KindNoModel
		case se.status == http.StatusBadRequest && strings.Contains(strings.ToLower(said), "does not support tools"):
			e.Kind = KindNoTools
		default:
			e.Kind = KindRefused
		}
		e.Message = fmt.Sprintf("%s: HTTP %d %s", where, se.status, http.StatusText(se.status))
		if said = p.redact(rules.Clip(said, maxMessage)); said != "" {
			e.Message += ": " + said
		}
		return e
	case errors.Is(err, context.DeadlineExceeded):
		return &Error{Kind: KindTransport, Message: fmt.Sprintf("%s: no answer within %s", where, p.cfg.Timeout)}
	case errors.Is(err, errGarbled):
		return &Error{Kind: KindTransport, Message: where + ": " + err.Error()}
	}
	var ue *url.Error
	if errors.As(err, &ue) {
		// Its URL is ours and holds no secret, but say only the cause.
		err = ue.Err
	}
	return &Error{Kind: KindTransport, Message: where + ": " + p.redact(rules.Clip(err.Error(), maxMessage))}
}

func (p *provider) host() string {
	if p.cfg.BaseURL == "" {
		return "the vendor's API"
	}
	u, err := url.Parse(p.cfg.BaseURL)
	if err != nil {
		return "its base URL"
	}
	return u.Host
}

// redact takes the key out of s, should a provider or a proxy echo it.
func (p *provider) redact(s string) string {
	if k := p.cfg.Key; len(k) >= 4 {
		s = strings.ReplaceAll(s, k, "[redacted]")
	}
	return s
}

// statedReset is the reset a 429's headers state (retry-after in seconds
// or as a date, or Anthropic's unified reset in Unix seconds); zero when
// they state none.
func statedReset(h http.Header, now time.Time) time.Time {
	if at, ok := retry.AtHeader(h.Get("Retry-After"), now); ok {
		return at
	}
	if v := h.Get("anthropic-ratelimit-unified-reset"); v != "" {
		if s, err := strconv.ParseInt(v, 10, 64); err == nil {
			return time.Unix(s, 0)
		}
	}
	return time.Time{}
}
