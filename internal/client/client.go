// Package client is a thin HTTP client for the hub's /api/v1 (see
// protocol/api.go): the CLI's calls, and the runner's protocol.Transfers
// (publication and context files). It adds nothing of its own beyond
// decoding errors and one retry policy, so what a command does is what the
// hub does.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"drover/internal/apitypes"
	"drover/internal/protocol"
	"drover/internal/retry"
	"drover/internal/rules"
)

const (
	defaultTimeout  = 30 * time.Second // per try, for everything but long polls
	maxJSONBody     = 32 << 20         // a JobList of many jobs stays well below
	maxErrorBody    = 64 << 10
	boundedTries    = 4 // about two seconds of backoff: a blip, not an outage
	defaultMinDelay = 250 * time.Millisecond
	defaultMaxDelay = 5 * time.Second
)

// Client talks to one hub with one token. It is safe for concurrent use.
type Client struct {
	base     string        // scheme://host[:port][/prefix], no trailing slash
	current  func() string // when set, the hub of each try instead of base
	token    string
	hc       *http.Client
	timeout  time.Duration
	minDelay time.Duration
	maxDelay time.Duration
}

// Option changes a Client.
type Option func(*Client)

// WithHTTPClient makes the client send through hc (tests, proxies, TLS).
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithTimeout bounds each try of an ordinary call (default 30s). Long polls
// get their wait on top.
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// WithRetryDelay sets the backoff between retries (default 250ms doubling to 5s).
func WithRetryDelay(first, most time.Duration) Option {
	return func(c *Client) { c.minDelay, c.maxDelay = first, most }
}

// WithFailover sends each try to the hub current names (a normalized hub
// URL): a runner's hub in use, which moves on failover, so that a retry
// goes where the runner's connection went.
func WithFailover(current func() string) Option { return func(c *Client) { c.current = current } }

// New returns a client for the hub at hubURL ("http://host:port", a bare
// "host:port" means http) authenticating with token.
func New(hubURL, token string, opts ...Option) (*Client, error) {
	base, err := NormalizeURL(hubURL)
	if err != nil {
		return nil, err
	}
	c := &Client{base: base, token: token, hc: &http.Client{}, timeout: defaultTimeout,
		minDelay: defaultMinDelay, maxDelay: defaultMaxDelay}
	for _, o := range opts {
		o(c)
	}
	return c, nil
}

// Hub returns the normalized hub URL.
func (c *Client) Hub() string { return c.base }

// NormalizeURL checks a hub URL and returns it without a trailing slash, so
// that two spellings of one hub compare equal (protocol.HubURL).
func NormalizeURL(s string) (string, error) { return rules.HubURL(s) }

// APIError is an error answer of the hub: the decoded protocol error and the
// HTTP status it came with. errors.As finds the *protocol.Error through it.
type APIError struct {
	Status int
	Err    *rules.Error
}

func (e *APIError) Error() string {
	return fmt.Sprintf("%s (%d %s)", e.Err.Message, e.Status, e.Err.Code)
}

func (e *APIError) Unwrap() error { return e.Err }

// Code returns the protocol error code in err, or "" when err is not an
// answer of the hub.
func Code(err error) string {
	var pe *rules.Error
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// connError is a failure to reach the hub or to read its whole answer:
// nothing says what the hub did, so only a call that is safe to repeat may
// be repeated.
type connError struct{ err error }

func (e *connError) Error() string { return e.err.Error() }
func (e *connError) Unwrap() error { return e.err }

// hub is the hub a try goes to.
func (c *Client) hub() string {
	if c.current != nil {
		return c.current()
	}
	return c.base
}

// call is one API request.
type call struct {
	method      string
	path        string // below APIPrefix, path segments already escaped
	query       url.Values
	body        any    // sent as JSON when non-nil
	contentType string // of a body that is no JSON (send's body)
	keyed       bool   // a POST the hub deduplicates (submit with an idempotency key, publish)
	follow      bool   // part of following a log: wait out hub restarts
	timeout     time.Duration
}

// tries is the retry policy, and the only place it is decided. A call is
// repeated only when repeating it cannot do anything twice: GETs, a submit
// carrying an idempotency key (the hub answers with the same job), and a
// job's publish (the hub keeps one publication per job).
// Only failures to reach the hub are retried (see retryable); an answer is
// the hub's decision. Following a log keeps trying until its context ends,
// because a hub restart is something to wait out, not to report.
// 0 means no limit.
func (r call) tries() int {
	switch {
	case r.method == http.MethodGet && r.follow:
		return 0
	case r.method == http.MethodGet, r.keyed:
		return boundedTries
	}
	return 1
}

// retryable reports whether err means the hub was not reached (or did not
// finish answering). A proxy's 502/503/504 says the same about a hub behind it.
func retryable(err error) bool {
	var ce *connError
	if errors.As(err, &ce) {
		return true
	}
	var ae *APIError
	if errors.As(err, &ae) {
		switch ae.Status {
		case http.StatusBadGateway, http.StatusServiceUnavailable, http.StatusGatewayTimeout:
			return true
		}
	}
	return false
}

// retry runs try as the policy of r allows, with jittered exponential backoff.
func (c *Client) retry(ctx context.Context, r call, try func() error) error {
	p := retry.Policy{First: c.minDelay, Max: c.maxDelay, Jitter: retry.EqualJitter, Tries: r.tries()}
	return retry.Do(ctx, p, func(context.Context) error {
		err := try()
		if !retryable(err) {
			return retry.Permanent(err)
		}
		return err
	})
}

// do sends r (retrying as its policy allows) and decodes a JSON answer into
// out (when non-nil). It returns the HTTP status of the answer.
func (c *Client) do(ctx context.Context, r call, out any) (int, error) {
	var body []byte
	if r.body != nil {
		b, err := json.Marshal(r.body)
		if err != nil {
			return 0, fmt.Errorf("encode request: %w", err)
		}
		body = b
	}
	var status int
	err := c.retry(ctx, r, func() error {
		var rd io.Reader
		if body != nil {
			rd = bytes.NewReader(body)
		}
		return c.send(ctx, r, rd, func(resp *http.Response) error {
			status = resp.StatusCode
			data, err := io.ReadAll(io.LimitReader(resp.Body, maxJSONBody+1))
			if err != nil {
				return &connError{fmt.Errorf("read answer of %s %s: %w", r.method, r.path, err)}
			}
			if len(data) > maxJSONBody {
				return fmt.Errorf("answer of %s %s is larger than %d bytes", r.method, r.path, maxJSONBody)
			}
			if out == nil {
				return nil
			}
			if err := json.Unmarshal(data, out); err != nil {
				return fmt.Errorf("decode answer of %s %s: %w", r.method, r.path, err)
			}
			return nil
		})
	})
	return status, err
}

// decode sends r and returns its JSON answer; what names the call in errors.
func decode[T any](ctx context.Context, c *Client, r call, what string) (T, error) {
	var v T
	if _, err := c.do(ctx, r, &v); err != nil {
		return v, fmt.Errorf("%s: %w", what, err)
	}
	return v, nil
}

// reachTimeout bounds Reach: a hub that is there answers at once.
const reachTimeout = 5 * time.Second

// Reach makes one request to the hub, with or without a token, and returns
// an error only when nothing answered: any HTTP answer, a refusal included,
// says the hub is there.
func (c *Client) Reach(ctx context.Context) error {
	err := c.send(ctx, call{method: http.MethodGet, path: "/whoami", timeout: reachTimeout}, nil,
		func(*http.Response) error { return nil })
	var ce *connError
	if errors.As(err, &ce) {
		return err
	}
	return nil
}

// send makes one try of r with body (nil: none; of r.contentType, else
// JSON). Error answers become *APIError; a 2xx answer goes to handle, which
// may read the body until send returns.
func (c *Client) send(ctx context.Context, r call, body io.Reader, handle func(*http.Response) error) error {
	timeout := r.timeout
	if timeout == 0 {
		timeout = c.timeout
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	hub := c.hub()
	u := hub + apitypes.APIPrefix + r.path
	if len(r.query) > 0 {
		u += "?" + r.query.Encode()
	}
	req, err := http.NewRequestWithContext(ctx, r.method, u, body)
	if err != nil {
		return fmt.Errorf("build request %s %s: %w", r.method, r.path, err)
	}
	if s, ok := body.(*io.SectionReader); ok {
		req.ContentLength = s.Size() // the hub refuses one over its cap before reading it
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "drover-client")
	switch {
	case r.contentType != "":
		req.Header.Set("Content-Type", r.contentType)
	case body != nil:
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		var ue *url.Error // it repeats method and URL; say what failed instead
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return &connError{fmt.Errorf("cannot reach the hub at %s: %w", hub, err)}
	}
	defer resp.Body.Close()
	if resp.StatusCode >= 300 {
		return decodeError(resp)
	}
	return handle(resp)
}

// decodeError turns an error answer into *APIError (a stale head's into a
// *protocol.StaleHeadError around it). A body that is not an ErrorBody (a
// proxy's page, say) still gives a code from the status.
func decodeError(resp *http.Response) error {
	data, _ := io.ReadAll(io.LimitReader(resp.Body, maxErrorBody))
	var eb struct {
		apitypes.ErrorBody
		Head string `json:"head"` // with ErrStaleHead
	}
	if json.Unmarshal(data, &eb) == nil && eb.Error.Code != "" {
		err := &APIError{Status: resp.StatusCode, Err: &eb.Error}
		if eb.Error.Code == rules.ErrStaleHead && eb.Head != "" {
			return &protocol.StaleHeadError{Head: eb.Head, Err: err}
		}
		return err
	}
	msg := strings.TrimSpace(string(data))
	if msg == "" || len(msg) > 200 || strings.HasPrefix(msg, "<") {
		msg = http.StatusText(resp.StatusCode)
	}
	return &APIError{Status: resp.StatusCode, Err: &rules.Error{Code: codeForStatus(resp.StatusCode), Message: msg}}
}

func codeForStatus(status int) string {
	switch status {
	case http.StatusBadRequest:
		return rules.ErrBadRequest
	case http.StatusUnauthorized:
		return rules.ErrUnauthorized
	case http.StatusForbidden:
		return rules.ErrForbidden
	case http.StatusNotFound:
		return rules.ErrNotFound
	case http.StatusConflict:
		return rules.ErrConflict
	case http.StatusRequestEntityTooLarge:
		return rules.ErrTooLarge
	}
	if status < 500 {
		return rules.ErrBadRequest
	}
	return rules.ErrInternal
}

// seg escapes one path segment.
func seg(s string) string { return url.PathEscape(s) }

func itoa(n int64) string { return strconv.FormatInt(n, 10) }
