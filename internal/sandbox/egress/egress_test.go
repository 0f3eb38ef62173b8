package egress

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httptrace"
	"net/textproto"
	"net/url"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"drover/internal/sandbox/sandboxtest"
)

// All "hosts" in these tests are loopback listeners.

type events struct {
	mu sync.Mutex
	ev []Event
}

func (e *events) log(ev Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.ev = append(e.ev, ev)
}

func (e *events) all() []Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]Event(nil), e.ev...)
}

// serve starts p on a unix socket and returns its path.
func serve(t *testing.T, p *Proxy, credential int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "egress.sock")
	l, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		if credential < 0 {
			p.Serve(l)
		} else {
			p.ServeCredential(credential, l)
		}
	}()
	t.Cleanup(func() { p.Close() })
	return path
}

func connect(t *testing.T, sock, target string) (net.Conn, *http.Response) {
	t.Helper()
	c, err := net.Dial("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	io.WriteString(c, "CONNECT "+target+" HTTP/1.1\r\nHost: "+target+"\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
	if err != nil {
		t.Fatal(err)
	}
	return c, resp
}

func TestConnectOnlyToAllowedHosts(t *testing.T) {
	allowed, _ := sandboxtest.EchoListener(t)
	denied, deniedConns := sandboxtest.EchoListener(t)
	var ev events
	p, err := New(Config{Allow: []string{allowed}, Log: ev.log})
	if err != nil {
		t.Fatal(err)
	}
	sock := serve(t, p, -1)

	c, resp := connect(t, sock, allowed)
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("allowed CONNECT: %s", resp.Status)
	}
	io.WriteString(c, "ping\n")
	line, err := bufio.NewReader(c).ReadString('\n')
	if err != nil || line != "ping\n" {
		t.Fatalf("through the tunnel: %q, %v", line, err)
	}
	c.Close()

	_, resp = connect(t, sock, denied)
	if resp.StatusCode != http.StatusForbidden || resp.Header.Get("X-Drover-Egress") != "refused" {
		t.Fatalf("denied CONNECT: %s", resp.Status)
	}
	// Clients show a failed tunnel's status line, not its body: it says why.
	if !strings.HasPrefix(resp.Status, "403 drover's egress proxy refused "+denied) || !strings.Contains(resp.Status, "retrying will not help") {
		t.Fatalf("denied CONNECT's status line does not say why: %q", resp.Status)
	}
	var ref Refusal
	if err := json.NewDecoder(resp.Body).Decode(&ref); err != nil {
		t.Fatal(err)
	}
	if ref.Error != "egress_denied" || ref.Rule != "allowlist" || ref.Host != denied ||
		len(ref.Allowed) != 1 || ref.Allowed[0] != allowed || !strings.Contains(ref.Message, "retrying will not help") {
		t.Fatalf("refusal = %+v", ref)
	}
	if deniedConns.Load() != 0 {
		t.Fatal("the denied host was connected to")
	}

	waitEvents(t, &ev, 2)
	got := ev.all()
	var ok, no *Event
	for i := range got {
		if got[i].Allowed {
			ok = &got[i]
		} else {
			no = &got[i]
		}
	}
	if ok == nil || ok.Kind != "connect" || ok.Host != allowed || ok.Up != 5 || ok.Down != 5 || ok.Rule != "allow "+allowed {
		t.Fatalf("allowed event = %+v", ok)
	}
	if no == nil || no.Host != denied || no.Status != http.StatusForbidden || no.Rule != "allowlist" {
		t.Fatalf("denied event = %+v", no)
	}
}

func waitEvents(t *testing.T, ev *events, n int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for len(ev.all()) < n {
		if time.Now().After(deadline) {
			t.Fatalf("got %d events, want %d: %+v", len(ev.all()), n, ev.all())
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// viaProxy is an HTTP client whose every request goes through the proxy's
// unix socket.
func viaProxy(sock string) *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "proxy"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		},
	}}
}

func TestPlainHTTPOnlyToAllowedHosts(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "hello "+r.URL.Path)
	}))
	defer srv.Close()
	other := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { t.Error("denied host reached") }))
	defer other.Close()
	var ev events
	p, err := New(Config{Allow: []string{srv.Listener.Addr().String()}, Log: ev.log})
	if err != nil {
		t.Fatal(err)
	}
	c := viaProxy(serve(t, p, -1))

	resp, err := c.Get(srv.URL + "/x")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "hello /x" {
		t.Fatalf("allowed GET: %s %q", resp.Status, body)
	}
	resp, err = c.Get(other.URL + "/y")
	if err != nil {
		t.Fatal(err)
	}
	body, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(string(body), `"egress_denied"`) {
		t.Fatalf("denied GET: %s %s", resp.Status, body)
	}
	waitEvents(t, &ev, 2)
	for _, e := range ev.all() {
		if e.Allowed && (e.Kind != "http" || e.Status != 200 || e.Down != int64(len("hello /x"))) {
			t.Fatalf("allowed event = %+v", e)
		}
	}
}

func TestProxyRefusesOriginFormRequests(t *testing.T) {
	p, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	sock := serve(t, p, -1)
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	resp, err := c.Get("http://proxy/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("origin-form request: %s", resp.Status)
	}
}

func TestCredentialAddsTheRealKeyOnlyForThePlaceholder(t *testing.T) {
	var gotKey, gotPath atomic.Value
	var calls atomic.Int32
	up := httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		gotKey.Store(r.Header.Get("x-api-key"))
		gotPath.Store(r.URL.Path)
		io.WriteString(w, `{"ok":true}`)
	}))
	defer up.Close()
	const placeholder = "drover-placeholder-0123456789abcdef"
	var ev events
	p, err := New(Config{
		Credentials: []Credential{{Name: "fake", Upstream: up.URL + "/base", Header: "x-api-key", Key: "real-key-123",
			KeyEnv: "FAKE_API_KEY", BaseURLEnv: "FAKE_BASE_URL"}},
		Placeholder: placeholder,
		Log:         ev.log,
		TLS:         up.Client().Transport.(*http.Transport).TLSClientConfig,
	})
	if err != nil {
		t.Fatal(err)
	}
	sock := serve(t, p, 0)
	c := &http.Client{Transport: &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}}
	call := func(key string) (int, string) {
		req, _ := http.NewRequest(http.MethodPost, "http://127.0.0.1:3129/v1/messages", strings.NewReader(`{"q":1}`))
		if key != "" {
			req.Header.Set("x-api-key", key)
		}
		resp, err := c.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	if code, body := call(placeholder); code != 200 || body != `{"ok":true}` {
		t.Fatalf("with the placeholder: %d %s", code, body)
	}
	if gotKey.Load() != "real-key-123" || gotPath.Load() != "/base/v1/messages" {
		t.Fatalf("upstream got key %q path %q", gotKey.Load(), gotPath.Load())
	}
	for _, key := range []string{"", "real-key-123", placeholder + "x"} {
		code, body := call(key)
		if code != http.StatusUnauthorized || !strings.Contains(body, `"credential_refused"`) || strings.Contains(body, "real-key") {
			t.Fatalf("with key %q: %d %s", key, code, body)
		}
	}
	if calls.Load() != 1 {
		t.Fatalf("upstream called %d times, want 1", calls.Load())
	}
	waitEvents(t, &ev, 4)
	for _, e := range ev.all() {
		if e.Kind != "credential" || e.Rule != "credential fake" {
			t.Fatalf("event = %+v", e)
		}
		if e.Allowed && (e.Up != int64(len(`{"q":1}`)) || e.Status != 200) {
			t.Fatalf("allowed event = %+v", e)
		}
	}
}

func TestCloseCutsOpenTunnels(t *testing.T) {
	allowed, _ := sandboxtest.EchoListener(t)
	p, err := New(Config{Allow: []string{allowed}})
	if err != nil {
		t.Fatal(err)
	}
	sock := serve(t, p, -1)
	c, resp := connect(t, sock, allowed)
	if resp.StatusCode != 200 {
		t.Fatal(resp.Status)
	}
	p.Close()
	c.SetReadDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || strings.Contains(err.Error(), "timeout") {
		t.Fatalf("tunnel still open after Close: %v", err)
	}
}

func TestReasonPhraseFitsAStatusLine(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain text", "plain text"},
		{"cr\r\nlf and \x7f del", "cr??lf and ? del"},
		{"caf\u00e9", "caf??"},
		{strings.Repeat("x", 600), strings.Repeat("x", 509) + "..."},
	} {
		if got := reasonPhrase(tc.in); got != tc.want {
			t.Errorf("reasonPhrase(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestNewRefusesBadRules(t *testing.T) {
	good := Credential{Name: "x", Upstream: "https://api.example.com", Header: "x-api-key", Key: "k", KeyEnv: "K", BaseURLEnv: "U"}
	for name, cfg := range map[string]Config{
		"every host":        {Allow: []string{"*"}},
		"wildcard TLD":      {Allow: []string{"*.com"}},
		"bad port":          {Allow: []string{"example.com:99999"}},
		"short placeholder": {Credentials: []Credential{good}, Placeholder: "short"},
		"plain http remote": {Credentials: []Credential{func() Credential { c := good; c.Upstream = "http://api.example.com"; return c }()},
			Placeholder: strings.Repeat("p", 20)},
		"no key": {Credentials: []Credential{func() Credential { c := good; c.Key = ""; return c }()}, Placeholder: strings.Repeat("p", 20)},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
	if _, err := New(Config{Allow: []string{"API.Example.com.:443"}, Credentials: []Credential{good}, Placeholder: strings.Repeat("p", 20)}); err != nil {
		t.Fatal(err)
	}
}

func TestRetryAt(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		header map[string]string
		want   time.Time
	}{
		{"none", nil, time.Time{}},
		{"anthropic unified reset", map[string]string{"anthropic-ratelimit-unified-reset": "1796040000", "retry-after": "9999"}, time.Unix(1796040000, 0)},
		{"anthropic rfc3339", map[string]string{"anthropic-ratelimit-tokens-reset": "2026-11-30T12:05:00Z"}, now.Add(5 * time.Minute)},
		{"retry-after seconds", map[string]string{"retry-after": "30"}, now.Add(30 * time.Second)},
		{"retry-after date", map[string]string{"retry-after": "Mon, 30 Nov 2026 13:00:00 GMT"}, now.Add(time.Hour)},
		{"openai durations, latest", map[string]string{"x-ratelimit-reset-requests": "1s", "x-ratelimit-reset-tokens": "6m0s"}, now.Add(6 * time.Minute)},
		{"garbage", map[string]string{"retry-after": "soon", "anthropic-ratelimit-unified-reset": "-5"}, time.Time{}},
	} {
		h := http.Header{}
		for k, v := range tc.header {
			h.Set(k, v)
		}
		if got := RetryAt(h, now); !got.Equal(tc.want) {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

const testPlaceholder = "drover-placeholder-0123456789abcdef"

// dialCredential connects to the endpoint of a credential "fake" whose
// upstream is url and whose placeholder is testPlaceholder.
func dialCredential(t *testing.T, url string) net.Conn {
	t.Helper()
	p, err := New(Config{
		Credentials: []Credential{{Name: "fake", Upstream: url, Header: "x-api-key", Key: "real-key-123",
			KeyEnv: "FAKE_API_KEY", BaseURLEnv: "FAKE_BASE_URL"}},
		Placeholder: testPlaceholder,
	})
	if err != nil {
		t.Fatal(err)
	}
	c, err := net.Dial("unix", serve(t, p, 0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// A client that half-closes its connection after its request (or a bridge
// that passes a half-close on) still gets the whole streamed response:
// net/http cancels a request's context when the read side ends, which must
// not cut the upstream call.
func TestCredentialStreamSurvivesAHalfClose(t *testing.T) {
	release := make(chan struct{})
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		select {
		case <-release:
		case <-time.After(10 * time.Second):
		}
		io.WriteString(w, "second\n")
	}))
	defer up.Close()
	c := dialCredential(t, up.URL)
	io.WriteString(c, "GET /stream HTTP/1.1\r\nHost: 127.0.0.1:3129\r\nx-api-key: "+testPlaceholder+"\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	body := bufio.NewReader(resp.Body)
	if _, err := body.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	c.(*net.UnixConn).CloseWrite()
	time.Sleep(100 * time.Millisecond) // let the server see the half-close
	close(release)
	rest, err := io.ReadAll(body)
	if err != nil || !strings.Contains(string(rest), "second") {
		t.Fatalf("after the half-close the stream gave %q, %v", rest, err)
	}
}

// An upstream that answers before the request body has been read to its
// end (a model server decodes the JSON and replies without waiting for the
// last chunk) must get the whole body and the client the whole stream. The
// proxy's server used to drain and close the request body when the
// response headers went out, so the upstream write failed and the stream
// was cut after its first bytes.
func TestCredentialStreamWhenUpstreamAnswersBeforeTheBodyEnds(t *testing.T) {
	const tail = "-the-end"
	got := make(chan string, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.NewResponseController(w).EnableFullDuplex()
		io.WriteString(w, "first\n")
		w.(http.Flusher).Flush()
		b, _ := io.ReadAll(r.Body)
		got <- string(b)
		io.WriteString(w, "second\n")
	}))
	defer up.Close()
	c := dialCredential(t, up.URL)
	first := strings.Repeat("x", 1000)
	io.WriteString(c, "POST /stream HTTP/1.1\r\nHost: 127.0.0.1:3129\r\nx-api-key: "+testPlaceholder+
		"\r\nTransfer-Encoding: chunked\r\n\r\n"+fmt.Sprintf("%x\r\n%s\r\n", len(first), first))
	// The upstream answers on the first chunk; the rest of the body comes
	// in two more writes, so the proxy is between reads of it when its
	// response headers go out.
	time.Sleep(200 * time.Millisecond)
	io.WriteString(c, fmt.Sprintf("%x\r\n%s\r\n", len(tail), tail))
	time.Sleep(200 * time.Millisecond)
	io.WriteString(c, "0\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || string(body) != "first\nsecond\n" {
		t.Fatalf("the stream gave %q, %v", body, err)
	}
	select {
	case b := <-got:
		if b != first+tail {
			t.Fatalf("upstream got %d bytes of the body, want %d", len(b), len(first+tail))
		}
	case <-time.After(10 * time.Second):
		t.Fatal("upstream never finished reading the body")
	}
}

// A refusal under a named policy names the policy and says how to widen it;
// an open policy lets any host through.
func TestRefusalNamesPolicyAndWiden(t *testing.T) {
	allowed, _ := sandboxtest.EchoListener(t)
	denied, _ := sandboxtest.EchoListener(t)
	p, err := New(Config{Allow: []string{allowed}, Policy: "agent: go",
		Widen: func(hp string) string { return "drover projects network web --agent go,more # " + hp }})
	if err != nil {
		t.Fatal(err)
	}
	sock := serve(t, p, -1)
	_, resp := connect(t, sock, denied)
	var ref Refusal
	if err := json.NewDecoder(resp.Body).Decode(&ref); err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusForbidden || ref.Policy != "agent: go" || !strings.HasPrefix(ref.Widen, "drover projects network web") ||
		!strings.Contains(ref.Message, "agent: go") || !strings.Contains(ref.Message, ref.Widen) || ref.Host != denied {
		t.Fatalf("refusal = %s %+v", resp.Status, ref)
	}

	open, err := New(Config{Open: true})
	if err != nil {
		t.Fatal(err)
	}
	if _, resp := connect(t, serve(t, open, -1), denied); resp.StatusCode != http.StatusOK {
		t.Fatalf("open policy: %s", resp.Status)
	}
}

// An upstream that echoes what it was sent (a debugging endpoint, an error
// page quoting the request) cannot hand the key to the sandbox: every form
// of it is masked in the answer's headers, interim headers, body (split
// across writes, gzipped, JSON- or base64-encoded) and trailers, and in an
// error quoting a malformed answer; an answer in an encoding the proxy
// cannot read is refused.
func TestCredentialAnswerNeverHoldsTheKey(t *testing.T) {
	const user, password = "deploy", "pw-5e8a1c7d"
	basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + password))
	for name, tc := range map[string]struct {
		prefix, key string
		echo        func(w http.ResponseWriter, got string)
		status      int // of the answer; 0: 200
	}{
		"headers and body": {key: "real-key-5f1c9a7e", echo: func(w http.ResponseWriter, got string) {
			w.Header().Set("X-Echo", got)
			w.Header().Set("X-Echo-"+got, "1")
			w.Header().Set("Location", "/next?k="+url.QueryEscape(got))
			fmt.Fprintf(w, "you sent %q, %s\n", got, base64.StdEncoding.EncodeToString([]byte("x"+got)))
		}},
		"split across writes": {key: "real-key-5f1c9a7e", echo: func(w http.ResponseWriter, got string) {
			for i := range len(got) {
				io.WriteString(w, got[i:i+1])
				w.(http.Flusher).Flush()
			}
		}},
		"json": {key: `real<key>&"5f1c"/9a`, echo: func(w http.ResponseWriter, got string) {
			b, _ := json.Marshal(map[string]string{"got": got})
			w.Write(b)
		}},
		"gzip": {key: "real-key-5f1c9a7e", echo: func(w http.ResponseWriter, got string) {
			w.Header().Set("Content-Encoding", "gzip")
			z := gzip.NewWriter(w)
			fmt.Fprintf(z, "you sent %s\n", got)
			z.Close()
		}},
		"an encoding the proxy cannot read": {key: "real-key-5f1c9a7e", status: http.StatusBadGateway,
			echo: func(w http.ResponseWriter, got string) {
				w.Header().Set("Content-Encoding", "br")
				fmt.Fprintf(w, "you sent %s\n", got)
			}},
		"trailers": {key: "real-key-5f1c9a7e", echo: func(w http.ResponseWriter, got string) {
			w.Header().Set("Trailer", "X-Echo")
			io.WriteString(w, "ok\n")
			w.Header().Set("X-Echo", got)
		}},
		"interim headers": {key: "real-key-5f1c9a7e", echo: func(w http.ResponseWriter, got string) {
			w.Header().Set("Link", "</"+got+">; rel=preload")
			w.WriteHeader(http.StatusEarlyHints)
			w.Header().Del("Link")
			io.WriteString(w, "ok\n")
		}},
		"basic auth decoded": {prefix: "Basic ", key: basic, echo: func(w http.ResponseWriter, got string) {
			u, p, _ := (&http.Request{Header: http.Header{"Authorization": {got}}}).BasicAuth()
			fmt.Fprintf(w, "user %s, password %s, pair %s:%s\n", u, p, u, p)
		}},
		"a malformed answer": {key: "real-key-5f1c9a7e", status: http.StatusBadGateway, echo: func(w http.ResponseWriter, got string) {
			c, brw, _ := http.NewResponseController(w).Hijack()
			defer c.Close()
			brw.WriteString(got + "\r\n\r\n") // no status line: the error quotes it
			brw.Flush()
		}},
	} {
		t.Run(name, func(t *testing.T) {
			up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tc.echo(w, r.Header.Get("Authorization"))
			}))
			defer up.Close()
			var ev events
			p, err := New(Config{Credentials: []Credential{{Name: "reg", Upstream: up.URL, Header: "Authorization", Prefix: tc.prefix,
				Key: tc.key, KeyEnv: "REG_KEY", BaseURLEnv: "REG_URL"}}, Placeholder: testPlaceholder, Log: ev.log})
			if err != nil {
				t.Fatal(err)
			}
			sock := serve(t, p, 0)
			var interim []string
			ctx := httptrace.WithClientTrace(context.Background(), &httptrace.ClientTrace{
				Got1xxResponse: func(code int, h textproto.MIMEHeader) error {
					interim = append(interim, fmt.Sprint(h))
					return nil
				}})
			req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:3129/echo", nil)
			req.Header.Set("Authorization", tc.prefix+testPlaceholder)
			req.Header.Set("Accept-Encoding", "gzip, br")
			c := &http.Client{Transport: &http.Transport{DisableCompression: true,
				DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
					return (&net.Dialer{}).DialContext(ctx, "unix", sock)
				}}}
			resp, err := c.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if want := cmp.Or(tc.status, http.StatusOK); resp.StatusCode != want {
				t.Fatalf("status %d, want %d: %s", resp.StatusCode, want, body)
			}
			if tc.status == http.StatusOK || tc.status == 0 {
				if !bytes.Contains(body, []byte("****")) && !strings.Contains(fmt.Sprint(resp.Header, resp.Trailer, interim), "****") {
					t.Fatalf("the echo holds no masked key: %s %v", body, resp.Header)
				}
			}
			waitEvents(t, &ev, 1)
			seen := fmt.Sprint(string(body), resp.Header, resp.Trailer, interim, ev.all())
			for _, form := range []string{tc.key, password, user + ":" + password, url.QueryEscape(tc.key),
				strings.Trim(string(must(json.Marshal(tc.key))), `"`), base64.StdEncoding.EncodeToString([]byte("x" + tc.key))[4:20]} {
				if strings.Contains(seen, form) {
					t.Fatalf("the answer holds %q:\n%s", form, seen)
				}
			}
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// The log writer masks a key written in pieces, and holds back only a
// tail that could begin one.
func TestScrubWriter(t *testing.T) {
	var out bytes.Buffer
	w := NewScrubWriter(&out, Needles(Credential{Key: "secret-value-1"}))
	for _, piece := range []string{"a secret-", "val", "ue-1 and ", "secret-value-", "2\nsecret"} {
		w.Write([]byte(piece))
	}
	if got := out.String(); got != "a ************** and secret-value-2\n" {
		t.Fatalf("before the flush: %q", got)
	}
	w.Flush()
	if got := out.String(); got != "a ************** and secret-value-2\nsecret" {
		t.Fatalf("after the flush: %q", got)
	}
}
