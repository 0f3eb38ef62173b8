// Package egress is the only way out of a sandbox whose network is off: an
// HTTP proxy (CONNECT and plain HTTP) served on unix sockets outside the
// sandbox, which lets through only listed host:port pairs, answers anything
// else with a structured refusal, and records every connection. It also
// holds provider keys: a credential endpoint forwards requests that carry
// the attempt's placeholder key to the real upstream with the real key, so
// the key never enters the sandbox.
package egress

import (
	"context"
	"crypto/subtle"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"drover/internal/netpolicy"
	"drover/internal/protocol"
	"drover/internal/retry"
)

// Credential maps a provider to the real key the proxy adds for it. Keys
// come from the runner operator's configuration or environment, never from
// a job.
type Credential struct {
	Name       string // names the rule in refusals and evidence, e.g. "anthropic"
	Upstream   string // base URL of the provider: https, or http on loopback (local servers, tests)
	Header     string // header that carries the key, e.g. "x-api-key" or "Authorization"
	Prefix     string // value prefix, e.g. "Bearer "
	Key        string // the real key
	KeyEnv     string // variable that holds the placeholder inside the sandbox, e.g. ANTHROPIC_API_KEY
	BaseURLEnv string // variable that holds the proxy's URL inside the sandbox, e.g. ANTHROPIC_BASE_URL
}

// FromSetup is the rule of a registry credential of a project's setup.
func FromSetup(c protocol.SetupCredential) Credential {
	return Credential{Name: c.Name, Upstream: c.Upstream, Header: c.Header, Prefix: c.Prefix, Key: c.Key,
		KeyEnv: c.KeyEnv, BaseURLEnv: c.BaseURLEnv}
}

// Event is one connection or request, as recorded in the attempt's evidence.
type Event struct {
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"` // connect, http or credential
	Host    string    `json:"host"` // host:port asked for
	Allowed bool      `json:"allowed"`
	Rule    string    `json:"rule"` // what decided: "allow host:port", "allowlist", "credential NAME"
	Status  int       `json:"status,omitempty"`
	Up      int64     `json:"bytes_up"`
	Down    int64     `json:"bytes_down"`
	Error   string    `json:"error,omitempty"`
	// RetryAt is when a provider that answered 429 said to come back,
	// from its response headers: the reset time of a rate limit that the
	// CLI itself may not print.
	RetryAt time.Time `json:"retry_at,omitzero"`
}

// RetryAt reads when a rate-limited response says to retry: Anthropic's
// reset times (unix seconds or RFC 3339), else Retry-After (seconds, rounded
// up, or an HTTP date), else OpenAI's x-ratelimit-reset-* durations; the
// latest of the first kind present wins. Zero when none.
func RetryAt(h http.Header, now time.Time) time.Time {
	var at time.Time
	later := func(t time.Time) {
		if t.After(at) {
			at = t
		}
	}
	for _, name := range []string{"Anthropic-Ratelimit-Unified-Reset", "Anthropic-Ratelimit-Requests-Reset", "Anthropic-Ratelimit-Tokens-Reset"} {
		v := h.Get(name)
		if secs, err := strconv.ParseInt(v, 10, 64); err == nil && secs > 0 {
			later(time.Unix(secs, 0))
		} else if t, err := time.Parse(time.RFC3339, v); err == nil {
			later(t)
		}
	}
	if !at.IsZero() {
		return at
	}
	if t, ok := retry.AtHeader(h.Get("Retry-After"), now); ok {
		later(t)
	}
	if !at.IsZero() {
		return at
	}
	for _, name := range []string{"X-Ratelimit-Reset-Requests", "X-Ratelimit-Reset-Tokens"} {
		if d, err := time.ParseDuration(h.Get(name)); err == nil && d > 0 {
			later(now.Add(d))
		}
	}
	return at
}

// Refusal is the JSON body of a refused request: enough for an agent to
// see why and stop retrying.
type Refusal struct {
	Error   string   `json:"error"` // egress_denied, credential_refused, bad_request
	Rule    string   `json:"rule"`
	Host    string   `json:"host,omitempty"`
	Allowed []string `json:"allowed"`
	// Policy names the network policy in force ("agent: go,npm"), and
	// Widen says how the project's owner lets the host through (an
	// egress_denied refusal of a sandbox run under a policy).
	Policy  string `json:"policy,omitempty"`
	Widen   string `json:"widen,omitempty"`
	Message string `json:"message"`
}

// Config configures a Proxy.
type Config struct {
	Allow []string // host[:port] patterns reachable through the proxy (netpolicy.ParsePattern)
	Open  bool     // every host is reachable (the operator's "open" policy)
	// Policy names the network policy in force, for refusals; Widen, if
	// set, says for a refused host:port how to let it through.
	Policy      string
	Widen       func(hostport string) string
	Credentials []Credential
	Placeholder string      // the key the sandbox holds instead of each real one
	Log         func(Event) // called once per connection or request, when it ends; nil discards
	// Dial and TLS replace the network (tests): nil means net.Dialer and
	// the system's roots.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
	TLS  *tls.Config
}

// Proxy serves the proxy endpoint and one endpoint per credential.
type Proxy struct {
	cfg       Config
	allow     netpolicy.Matcher
	upstreams []*url.URL
	transport *http.Transport

	mu      sync.Mutex
	servers []*http.Server
	tunnels map[net.Conn]struct{} // hijacked connections: http.Server.Close does not close them
	closed  bool
}

const dialTimeout = 15 * time.Second

// New checks cfg.
func New(cfg Config) (*Proxy, error) {
	p := &Proxy{cfg: cfg, tunnels: map[net.Conn]struct{}{}}
	m, err := netpolicy.NewMatcher(cfg.Allow, cfg.Open)
	if err != nil {
		return nil, fmt.Errorf("egress allowlist: %w", err)
	}
	p.allow = m
	if len(cfg.Credentials) > 0 && len(cfg.Placeholder) < 16 {
		return nil, errors.New("egress: credential rules need a placeholder of at least 16 characters")
	}
	for _, c := range cfg.Credentials {
		u, err := CheckCredential(c)
		if err != nil {
			return nil, err
		}
		p.upstreams = append(p.upstreams, u)
	}
	if p.cfg.Dial == nil {
		d := &net.Dialer{Timeout: dialTimeout}
		p.cfg.Dial = d.DialContext
	}
	if p.cfg.Log == nil {
		p.cfg.Log = func(Event) {}
	}
	p.transport = &http.Transport{
		Proxy:                 nil, // never the runner's own proxy settings
		DialContext:           p.cfg.Dial,
		TLSClientConfig:       cfg.TLS,
		ForceAttemptHTTP2:     cfg.TLS == nil,
		TLSHandshakeTimeout:   dialTimeout,
		ResponseHeaderTimeout: 10 * time.Minute, // model calls can think for a long time
	}
	return p, nil
}

// NormalizeHostPort lower-cases a host:port pair and checks it has both.
func NormalizeHostPort(hp string) (string, error) {
	host, port, err := net.SplitHostPort(strings.TrimSpace(hp))
	if err != nil {
		return "", fmt.Errorf("%q: want host:port: %w", hp, err)
	}
	host = strings.TrimSuffix(strings.ToLower(host), ".")
	if n, err := strconv.Atoi(port); host == "" || err != nil || n < 1 || n > 65535 {
		return "", fmt.Errorf("%q: want host:port with a port from 1 to 65535", hp)
	}
	return net.JoinHostPort(host, port), nil
}

// CheckCredential validates a credential rule and returns its upstream URL.
func CheckCredential(c Credential) (*url.URL, error) {
	if c.Name == "" || c.Header == "" || c.Key == "" || c.KeyEnv == "" || c.BaseURLEnv == "" {
		return nil, fmt.Errorf("credential %q: name, upstream, header, key, key variable and base URL variable are all required", c.Name)
	}
	u, err := url.Parse(c.Upstream)
	if err != nil || u.Host == "" || u.User != nil || u.RawQuery != "" {
		return nil, fmt.Errorf("credential %q: upstream %q is not a base URL", c.Name, c.Upstream)
	}
	switch {
	case u.Scheme == "https":
	case u.Scheme == "http" && isLoopback(u.Hostname()):
	default:
		return nil, fmt.Errorf("credential %q: upstream %q must be https (plain http only on loopback)", c.Name, c.Upstream)
	}
	return u, nil
}

func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Serve serves the proxy endpoint on l until Close.
func (p *Proxy) Serve(l net.Listener) error {
	return p.serve(l, http.HandlerFunc(p.proxy))
}

// ServeCredential serves the endpoint of credential i on l until Close.
func (p *Proxy) ServeCredential(i int, l net.Listener) error {
	if i < 0 || i >= len(p.upstreams) {
		return fmt.Errorf("egress: no credential %d", i)
	}
	return p.serve(l, p.credentialHandler(i))
}

func (p *Proxy) serve(l net.Listener, h http.Handler) error {
	srv := &http.Server{Handler: h, ReadHeaderTimeout: 30 * time.Second}
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		l.Close()
		return http.ErrServerClosed
	}
	p.servers = append(p.servers, srv)
	p.mu.Unlock()
	err := srv.Serve(l)
	if errors.Is(err, http.ErrServerClosed) {
		return nil
	}
	return err
}

// Close stops every endpoint and cuts open tunnels.
func (p *Proxy) Close() error {
	p.mu.Lock()
	p.closed = true
	servers, tunnels := p.servers, p.tunnels
	p.servers, p.tunnels = nil, map[net.Conn]struct{}{}
	p.mu.Unlock()
	var errs []error
	for _, s := range servers {
		errs = append(errs, s.Close())
	}
	for c := range tunnels {
		c.Close()
	}
	p.transport.CloseIdleConnections()
	return errors.Join(errs...)
}

func (p *Proxy) allowed() []string {
	if p.allow.Open {
		return []string{"*"}
	}
	return p.allow.Strings()
}

// proxy handles one request to the proxy endpoint.
func (p *Proxy) proxy(w http.ResponseWriter, r *http.Request) {
	kind, target := "http", ""
	switch {
	case r.Method == http.MethodConnect:
		kind, target = "connect", r.Host
	case r.URL.IsAbs() && r.URL.Scheme == "http":
		target = r.URL.Host
		if r.URL.Port() == "" {
			target = net.JoinHostPort(r.URL.Hostname(), "80")
		}
	default:
		p.refuse(w, Event{Kind: kind, Host: r.Host}, http.StatusBadRequest, Refusal{Error: "bad_request", Rule: "proxy",
			Message: "this is drover's egress proxy: send CONNECT host:port, or a plain-http request in absolute form (GET http://host/path); https must go through CONNECT"})
		return
	}
	hp, err := NormalizeHostPort(target)
	ev := Event{Kind: kind, Host: target}
	if err != nil || !p.allow.Allows(hp) {
		ev.Rule = "allowlist"
		ref := Refusal{Error: "egress_denied", Rule: "allowlist", Host: target, Policy: p.cfg.Policy,
			Message: fmt.Sprintf("drover's egress proxy refused %s: only the listed host:port pairs are reachable from this sandbox; retrying will not help", target)}
		if p.cfg.Policy != "" {
			ref.Message = fmt.Sprintf("drover's egress proxy refused %s: the network policy in force (%s) does not allow it; retrying will not help", target, p.cfg.Policy)
		}
		if p.cfg.Widen != nil && err == nil {
			ref.Widen = p.cfg.Widen(hp)
			ref.Message += "; the project's owner can allow it with: " + ref.Widen
		}
		p.refuse(w, ev, http.StatusForbidden, ref)
		return
	}
	ev.Host, ev.Allowed, ev.Rule = hp, true, "allow "+hp
	if kind == "connect" {
		p.tunnel(w, r, ev)
		return
	}
	p.forward(w, r, ev, nil, func(pr *httputil.ProxyRequest) {
		pr.Out.URL = pr.In.URL
		pr.Out.Host = pr.In.Host
		pr.Out.Header.Del("Proxy-Authorization")
	})
}

// refuse answers with a Refusal and records the event.
func (p *Proxy) refuse(w http.ResponseWriter, ev Event, status int, ref Refusal) {
	ref.Allowed = p.allowed()
	body, _ := json.Marshal(ref)
	body = append(body, '\n')
	if ev.Kind != "connect" || !refuseConnect(w, status, ref.Message, body) {
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("X-Drover-Egress", "refused")
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		w.WriteHeader(status)
		w.Write(body)
	}
	ev.Time, ev.Status, ev.Error = time.Now(), status, ref.Message
	if ev.Rule == "" {
		ev.Rule = ref.Rule
	}
	p.cfg.Log(ev)
}

// refuseConnect answers a refused CONNECT with the message as the status
// line's reason phrase: clients show that line, not the body, when a tunnel
// fails (Go prints the phrase, Python "Tunnel connection failed: 403
// PHRASE", curl -v the line), so the agent learns why without a retry.
// net/http cannot set a reason phrase, hence the raw write on the
// hijacked connection; false if it cannot hijack.
func refuseConnect(w http.ResponseWriter, status int, message string, body []byte) bool {
	hj, ok := w.(http.Hijacker)
	if !ok {
		return false
	}
	c, brw, err := hj.Hijack()
	if err != nil {
		return false
	}
	defer c.Close()
	fmt.Fprintf(brw, "HTTP/1.1 %d %s\r\nContent-Type: application/json\r\nX-Drover-Egress: refused\r\nContent-Length: %d\r\nConnection: close\r\n\r\n",
		status, reasonPhrase(message), len(body))
	brw.Write(body)
	brw.Flush()
	return true
}

// reasonPhrase makes text fit a status line: printable ASCII only, at most
// 512 bytes.
func reasonPhrase(text string) string {
	b := []byte(text)
	for i, c := range b {
		if c < 0x20 || c >= 0x7f {
			b[i] = '?'
		}
	}
	if len(b) > 512 {
		b = append(b[:509], "..."...)
	}
	return string(b)
}

// tunnel splices a CONNECT to an allowed host:port.
func (p *Proxy) tunnel(w http.ResponseWriter, r *http.Request, ev Event) {
	ev.Time = time.Now()
	ctx, cancel := context.WithTimeout(r.Context(), dialTimeout)
	up, err := p.cfg.Dial(ctx, "tcp", ev.Host)
	cancel()
	if err != nil {
		p.refuse(w, ev, http.StatusBadGateway, Refusal{Error: "upstream_unreachable", Rule: ev.Rule, Host: ev.Host,
			Message: fmt.Sprintf("%s is allowed but could not be reached: %v", ev.Host, err)})
		return
	}
	hj, ok := w.(http.Hijacker)
	if !ok {
		up.Close()
		http.Error(w, "cannot tunnel", http.StatusInternalServerError)
		return
	}
	down, brw, err := hj.Hijack()
	if err != nil {
		up.Close()
		return
	}
	if !p.track(down, true) {
		up.Close()
		down.Close()
		return
	}
	defer p.track(down, false)
	if _, err := down.Write([]byte("HTTP/1.1 200 Connection established\r\n\r\n")); err != nil {
		up.Close()
		down.Close()
		return
	}
	ev.Status = http.StatusOK
	// What the server already buffered past the CONNECT header goes first.
	ev.Up, ev.Down = Splice(readerConn{down, brw.Reader}, up)
	p.cfg.Log(ev)
}

// readerConn reads through r, which buffers Conn.
type readerConn struct {
	net.Conn
	r io.Reader
}

func (c readerConn) Read(b []byte) (int, error) { return c.r.Read(b) }

// Splice copies a to b and b to a until both directions are done, closes
// both, and returns the bytes copied each way. The drover init's bridges
// use it too.
func Splice(a, b net.Conn) (aToB, bToA int64) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		aToB, _ = io.Copy(b, a)
		closeWrite(b)
	}()
	bToA, _ = io.Copy(a, b)
	closeWrite(a)
	<-done
	a.Close()
	b.Close()
	return aToB, bToA
}

func closeWrite(c net.Conn) {
	if rc, ok := c.(readerConn); ok {
		c = rc.Conn
	}
	if cw, ok := c.(interface{ CloseWrite() error }); ok {
		cw.CloseWrite()
		return
	}
	c.Close()
}

func (p *Proxy) track(c net.Conn, add bool) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !add {
		delete(p.tunnels, c)
		return true
	}
	if p.closed {
		return false
	}
	p.tunnels[c] = struct{}{}
	return true
}

// credentialHandler forwards requests that carry the placeholder to the
// provider, with the real key in place of the placeholder.
func (p *Proxy) credentialHandler(i int) http.Handler {
	c, up := p.cfg.Credentials[i], p.upstreams[i]
	want := []byte(c.Prefix + p.cfg.Placeholder)
	host := up.Host
	if up.Port() == "" {
		host = net.JoinHostPort(up.Hostname(), map[string]string{"https": "443", "http": "80"}[up.Scheme])
	}
	rule := "credential " + c.Name
	needles := Needles(c)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ev := Event{Kind: "credential", Host: host, Rule: rule}
		got := []byte(r.Header.Get(c.Header))
		if r.URL.IsAbs() || r.Method == http.MethodConnect {
			p.refuse(w, ev, http.StatusBadRequest, Refusal{Error: "bad_request", Rule: rule,
				Message: fmt.Sprintf("this is the %s endpoint: send requests to $%s directly, not as a proxy", c.Name, c.BaseURLEnv)})
			return
		}
		if subtle.ConstantTimeCompare(got, want) != 1 {
			p.refuse(w, ev, http.StatusUnauthorized, Refusal{Error: "credential_refused", Rule: rule, Host: host,
				Message: fmt.Sprintf("requests to %s must carry the key from $%s in the %s header; the proxy adds the real one", c.Name, c.KeyEnv, c.Header)})
			return
		}
		if r.Header.Get("Upgrade") != "" {
			// An upgraded connection is spliced raw: its answer could not
			// be checked for the key.
			p.refuse(w, ev, http.StatusBadRequest, Refusal{Error: "bad_request", Rule: rule, Host: host,
				Message: fmt.Sprintf("the %s endpoint does not upgrade connections (Upgrade: %s)", c.Name, reasonPhrase(r.Header.Get("Upgrade")))})
			return
		}
		ev.Allowed = true
		p.forward(w, r, ev, newScrubber(needles), func(pr *httputil.ProxyRequest) {
			pr.SetURL(up)
			pr.Out.Header.Set(c.Header, c.Prefix+c.Key)
			// The transport then asks for gzip itself and decodes it, so
			// that the answer can be checked for the key.
			pr.Out.Header.Del("Accept-Encoding")
		})
	})
}

// forward sends r upstream through the proxy's own transport and records
// the bytes each way. With scrub (a credential's request) every form of
// the key is masked in the answer, its error and the event.
func (p *Proxy) forward(w http.ResponseWriter, r *http.Request, ev Event, scrub *scrubber, rewrite func(*httputil.ProxyRequest)) {
	ev.Time = time.Now()
	// Without full duplex, net/http drains and closes the request body as
	// soon as the response headers go out; an upstream that answers before
	// it has read the body's end (a model server replies once the JSON
	// parses) would then have its request cut and its stream with it. The
	// proxy serves HTTP/1.1, whose writer supports it.
	http.NewResponseController(w).EnableFullDuplex()
	var down countingReader
	up := newFencedBody()
	if r.Body != nil && r.Body != http.NoBody {
		up.r = r.Body
		r.Body = up
		// The transport may still read the body when the proxy answers
		// (an upstream it could not reach); net/http reads the client's
		// next request as the handler returns, and two reads of one
		// connection at once panic: no read outlives the handler.
		defer up.fence()
	}
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			// net/http cancels a request's context when its connection's
			// read side ends (a client that half-closes, or a bridge that
			// passes a half-close on) even while the response still
			// streams; the upstream call must not die of that. A client
			// that is really gone fails the copy of the response, which
			// ends the upstream call all the same.
			pr.Out = pr.Out.WithContext(context.WithoutCancel(pr.Out.Context()))
			rewrite(pr)
		},
		Transport:     p.transport,
		FlushInterval: -1, // streamed responses (server-sent events) go through at once
		ModifyResponse: func(resp *http.Response) error {
			ev.Status = resp.StatusCode
			if resp.StatusCode == http.StatusTooManyRequests {
				ev.RetryAt = RetryAt(resp.Header, time.Now())
			}
			down.r = resp.Body
			if scrub != nil {
				if ce := resp.Header.Get("Content-Encoding"); ce != "" && !strings.EqualFold(ce, "identity") {
					return fmt.Errorf("the answer is encoded (%s), so the proxy cannot check it does not hold the key", ce)
				}
				down.r = &scrubBody{r: resp.Body, s: scrub, resp: resp}
			}
			resp.Body = &down
			return nil
		},
		ErrorHandler: func(w http.ResponseWriter, _ *http.Request, err error) {
			msg := err.Error()
			if scrub != nil {
				msg = scrub.text(msg) // a malformed answer is quoted in the error
			}
			ev.Status, ev.Error = http.StatusBadGateway, msg
			body, _ := json.Marshal(Refusal{Error: "upstream_unreachable", Rule: ev.Rule, Host: ev.Host, Allowed: p.allowed(),
				Message: fmt.Sprintf("%s is allowed but the request failed: %s", ev.Host, msg)})
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusBadGateway)
			w.Write(append(body, '\n'))
		},
	}
	if scrub != nil {
		w = scrubHeaders{w, scrub}
	}
	rp.ServeHTTP(w, r)
	ev.Up, ev.Down = up.n.Load(), down.n.Load()
	p.cfg.Log(ev)
}

// fencedBody is a request body whose reads end with its handler: fence
// waits (boundedly) for a read in progress, and reads after it fail.
type fencedBody struct {
	// turn is a one-slot lock: a read holds it, and fence can give up
	// waiting for it, which sync.Mutex cannot.
	turn chan struct{}
	countingReader
	fenced bool
}

func newFencedBody() *fencedBody { return &fencedBody{turn: make(chan struct{}, 1)} }

func (f *fencedBody) Read(b []byte) (int, error) {
	f.turn <- struct{}{}
	defer func() { <-f.turn }()
	if f.fenced {
		return 0, io.ErrClosedPipe
	}
	return f.countingReader.Read(b)
}

// fence waits up to a second for a read in progress: one blocked on a
// client that sends no more is left to end with the connection.
func (f *fencedBody) fence() {
	t := time.NewTimer(time.Second)
	defer t.Stop()
	select {
	case f.turn <- struct{}{}:
		f.fenced = true
		<-f.turn
	case <-t.C:
	}
}

type countingReader struct {
	r io.ReadCloser
	n atomic.Int64
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n.Add(int64(n))
	return n, err
}

func (c *countingReader) Close() error { return c.r.Close() }
