package testkit

import (
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync"
	"testing"
)

// ForgeFault is what a ForgeProxy does to a request a rule matches.
type ForgeFault int

const (
	// LoseReply forwards the request, then drops the connection before the
	// reply: the forge acted, the caller cannot know it.
	LoseReply ForgeFault = iota + 1
	// Hold never forwards the request: it waits until the caller goes
	// away (or the proxy closes), as a hub killed in the call would.
	Hold
	// Fail answers 503 with Retry-After: 1 without forwarding.
	Fail
)

// ForgeProxy is an HTTP reverse proxy in front of a forge (a real Gitea)
// that counts the requests through it and makes the faults its rules say,
// to test that a publication happens exactly once.
type ForgeProxy struct {
	URL    string
	target *url.URL

	mu     sync.Mutex
	counts map[string]int // "METHOD suffix-matched path" → requests
	rules  []*forgeRule
	seen   map[string]chan struct{}
	closed chan struct{} // ends the requests held
}

type forgeRule struct {
	method, suffix string
	times          int // faults left; -1 for every one
	fault          ForgeFault
}

// NewForgeProxy proxies a loopback port to the forge at target.
func NewForgeProxy(t testing.TB, target string) *ForgeProxy {
	t.Helper()
	u, err := url.Parse(target)
	if err != nil {
		t.Fatal(err)
	}
	p := &ForgeProxy{target: u, counts: map[string]int{}, seen: map[string]chan struct{}{}, closed: make(chan struct{})}
	srv := httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(srv.Close)
	t.Cleanup(func() { close(p.closed) }) // first: Close waits for the handlers
	p.URL = srv.URL
	return p
}

// On makes the next times requests of method whose path ends with suffix
// meet fault (times -1: all of them).
func (p *ForgeProxy) On(method, suffix string, times int, fault ForgeFault) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = append(p.rules, &forgeRule{method: method, suffix: suffix, times: times, fault: fault})
}

// Clear drops every rule.
func (p *ForgeProxy) Clear() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.rules = nil
}

// Count is how many requests of method whose path ends with suffix came
// through ("" for any method; a git push is POST .../git-receive-pack).
func (p *ForgeProxy) Count(method, suffix string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for k, c := range p.counts {
		m, path, _ := strings.Cut(k, " ")
		if (method == "" || m == method) && strings.HasSuffix(path, suffix) {
			n += c
		}
	}
	return n
}

// Seen is closed once a request of method whose path ends with suffix
// arrived.
func (p *ForgeProxy) Seen(method, suffix string) <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := method + " " + suffix
	ch, ok := p.seen[key]
	if !ok {
		ch = make(chan struct{})
		p.seen[key] = ch
		for k := range p.counts {
			if m, path, _ := strings.Cut(k, " "); m == method && strings.HasSuffix(path, suffix) {
				close(ch)
				break
			}
		}
	}
	return ch
}

func (p *ForgeProxy) serve(w http.ResponseWriter, r *http.Request) {
	p.mu.Lock()
	p.counts[r.Method+" "+r.URL.Path]++
	for key, ch := range p.seen {
		if m, suffix, _ := strings.Cut(key, " "); m == r.Method && strings.HasSuffix(r.URL.Path, suffix) {
			select {
			case <-ch:
			default:
				close(ch)
			}
		}
	}
	var fault ForgeFault
	for _, rule := range p.rules {
		if rule.times != 0 && rule.method == r.Method && strings.HasSuffix(r.URL.Path, rule.suffix) {
			fault = rule.fault
			if rule.times > 0 {
				rule.times--
			}
			break
		}
	}
	p.mu.Unlock()
	switch fault {
	case Hold:
		// The body read, the server sees the caller go away.
		_, _ = io.Copy(io.Discard, r.Body)
		select {
		case <-r.Context().Done():
		case <-p.closed:
		}
		return
	case Fail:
		w.Header().Set("Retry-After", "1")
		http.Error(w, `{"message":"unavailable (a ForgeProxy fault)"}`, http.StatusServiceUnavailable)
		return
	}
	out := r.Clone(r.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = p.target.Scheme, p.target.Host
	out.Host = p.target.Host
	resp, err := http.DefaultTransport.RoundTrip(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadGateway)
		return
	}
	defer resp.Body.Close()
	if fault == LoseReply {
		_, _ = io.Copy(io.Discard, resp.Body)
		panic(http.ErrAbortHandler) // the connection drops without a reply
	}
	for k, vs := range resp.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}
