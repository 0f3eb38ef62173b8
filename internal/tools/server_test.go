package tools_test

import (
	"context"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"drover/internal/rules"
	"drover/internal/tools"
)

// Claude Code speaks 2025-06-18 (initialize handshake); the SDK's newest
// version is stateless. Both must work.
var protocolVersions = []string{"2025-06-18", "2026-07-28"}

type harness struct {
	url   string
	token string
	fake  *fakeBackend
	tools *tools.Tools
}

// start serves a fresh attempt's tools on a loopback port until the test ends.
func start(t *testing.T, f *fakeBackend) *harness {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	h := &harness{url: "http://" + ln.Addr().String() + tools.Path, token: tools.NewToken(), fake: f, tools: tools.New(f)}
	serveOn(t, ln, h.tools, h.token)
	return h
}

func serveOn(t *testing.T, ln net.Listener, tl *tools.Tools, token string) {
	t.Helper()
	srv, err := tools.NewServer(tl, token, tools.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve: %v", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Serve did not stop")
		}
	})
}

// bearer adds the Authorization header, as Claude Code does from its config.
type bearer struct {
	token string
	next  http.RoundTripper
}

func (b bearer) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	if b.token != "" {
		r.Header.Set("Authorization", "Bearer "+b.token)
	}
	return b.next.RoundTrip(r)
}

func connectWith(ctx context.Context, url, token, version string, rt http.RoundTripper) (*mcp.ClientSession, error) {
	if rt == nil {
		rt = http.DefaultTransport
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "0"}, nil)
	tr := &mcp.StreamableClientTransport{
		Endpoint:   url,
		HTTPClient: &http.Client{Transport: bearer{token: token, next: rt}},
		MaxRetries: -1,
	}
	return c.Connect(ctx, tr, &mcp.ClientSessionOptions{ProtocolVersion: version})
}

func connect(t *testing.T, h *harness, version string) *mcp.ClientSession {
	t.Helper()
	cs, err := connectWith(t.Context(), h.url, h.token, version, nil)
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(func() { cs.Close() })
	return cs
}

// call calls a tool and returns its text and whether it is a tool error.
func call(t *testing.T, cs *mcp.ClientSession, name string, args map[string]any) (string, bool) {
	t.Helper()
	res, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		t.Fatalf("%s: protocol error: %v", name, err)
	}
	var texts []string
	for _, c := range res.Content {
		if tc, ok := c.(*mcp.TextContent); ok {
			texts = append(texts, tc.Text)
		}
	}
	return strings.Join(texts, "\n"), res.IsError
}

func forEachVersion(t *testing.T, run func(t *testing.T, version string)) {
	for _, v := range protocolVersions {
		t.Run(v, func(t *testing.T) { run(t, v) })
	}
}

func TestListTools(t *testing.T) {
	forEachVersion(t, func(t *testing.T, version string) {
		cs := connect(t, start(t, &fakeBackend{}), version)
		if got := cs.InitializeResult().ServerInfo.Name; got != "drover" {
			t.Errorf("server name %q", got)
		}
		res, err := cs.ListTools(t.Context(), nil)
		if err != nil {
			t.Fatal(err)
		}
		want := map[string][]string{"ask": {"question"}, "checkpoint": {"message"}, "deliver": {"summary"}, "context": nil, "sparse_add": {"paths"}}
		if len(res.Tools) != len(want) {
			t.Fatalf("%d tools, want %d", len(res.Tools), len(want))
		}
		for _, tool := range res.Tools {
			req, ok := want[tool.Name]
			if !ok {
				t.Fatalf("unexpected tool %q", tool.Name)
			}
			schema, _ := tool.InputSchema.(map[string]any)
			if schema["type"] != "object" || schema["properties"] == nil {
				t.Errorf("%s: schema %v", tool.Name, tool.InputSchema)
			}
			var got []string
			if r, ok := schema["required"].([]any); ok {
				for _, s := range r {
					got = append(got, s.(string))
				}
			}
			if !slices.Equal(got, req) {
				t.Errorf("%s: required %v, want %v", tool.Name, got, req)
			}
			if tool.Description == "" || tool.Annotations == nil {
				t.Errorf("%s: missing description or annotations", tool.Name)
			}
			if tool.Annotations.ReadOnlyHint != (tool.Name == "context") {
				t.Errorf("%s: readOnlyHint %v", tool.Name, tool.Annotations.ReadOnlyHint)
			}
		}
		props := res.Tools[0].InputSchema.(map[string]any)["properties"].(map[string]any)
		if props["choices"].(map[string]any)["maxItems"] != float64(rules.MaxChoices) {
			t.Errorf("ask choices schema: %v", props["choices"])
		}
	})
}

func TestRoundTrips(t *testing.T) {
	forEachVersion(t, func(t *testing.T, version string) {
		f := &fakeBackend{job: sampleJob()}
		h := start(t, f)
		cs := connect(t, h, version)

		text, isErr := call(t, cs, "context", nil)
		if isErr || !strings.Contains(text, "fix the flaky test") || !strings.Contains(text, "notes.md") ||
			!strings.Contains(text, `"sqlite"`) || !strings.Contains(text, `"released"`) {
			t.Fatalf("context: %v %s", isErr, text)
		}
		if strings.Contains(text, "drop everything") {
			t.Fatalf("context shows an unapproved answer: %s", text)
		}

		text, isErr = call(t, cs, "checkpoint", map[string]any{"message": "tests pass locally"})
		if isErr || !strings.Contains(text, "2222222222222222222222222222222222222222") {
			t.Fatalf("checkpoint: %v %s", isErr, text)
		}
		if got := f.recorded().messages; !slices.Equal(got, []string{"tests pass locally"}) {
			t.Fatalf("backend messages %q", got)
		}

		text, isErr = call(t, cs, "deliver", map[string]any{"summary": "fixed the race in TestFoo"})
		if isErr || !strings.Contains(text, "completed") {
			t.Fatalf("deliver: %v %s", isErr, text)
		}
		if got := f.recorded().summaries; !slices.Equal(got, []string{"fixed the race in TestFoo"}) || h.tools.Status() != tools.Delivered {
			t.Fatalf("backend summaries %q, status %s", got, h.tools.Status())
		}
	})
}

func TestAskPausesAndRefusesLaterMutations(t *testing.T) {
	forEachVersion(t, func(t *testing.T, version string) {
		f := &fakeBackend{job: sampleJob()}
		h := start(t, f)
		cs := connect(t, h, version)

		text, isErr := call(t, cs, "ask", map[string]any{"question": "sqlite or postgres?", "choices": []string{"sqlite", "postgres"}, "expires_in_seconds": 3600})
		if isErr || !strings.Contains(text, "q_1") || !strings.Contains(text, "paused") || !strings.Contains(text, "Stop now") {
			t.Fatalf("ask: %v %s", isErr, text)
		}
		qs := f.recorded().questions
		if len(qs) != 1 || qs[0].Text != "sqlite or postgres?" || !slices.Equal(qs[0].Choices, []string{"sqlite", "postgres"}) || qs[0].ExpiresInSeconds != 3600 {
			t.Fatalf("backend questions %+v", qs)
		}
		if h.tools.Status() != tools.Waiting {
			t.Fatalf("status %s", h.tools.Status())
		}

		for name, args := range map[string]map[string]any{
			"checkpoint": {"message": "more work"},
			"ask":        {"question": "another?"},
			"deliver":    {"summary": "done anyway"},
		} {
			text, isErr := call(t, cs, name, args)
			if !isErr || !strings.Contains(text, "already waiting") {
				t.Errorf("%s after ask: %v %s", name, isErr, text)
			}
		}
		if f.mutations() != 1 {
			t.Fatalf("backend saw %d mutations, want 1", f.mutations())
		}
		if _, isErr := call(t, cs, "context", nil); isErr {
			t.Fatal("context refused after ask")
		}
	})
}

func TestOversizeArgumentsRefused(t *testing.T) {
	cases := []struct {
		tool string
		args map[string]any
		want string
	}{
		{"ask", map[string]any{"question": strings.Repeat("q", rules.MaxQuestion+1)}, "the limit is 8192"},
		{"ask", map[string]any{"question": "pick", "choices": make([]string, rules.MaxChoices+1)}, "21 choices"},
		{"ask", map[string]any{"question": "pick", "choices": []string{"a", strings.Repeat("c", rules.MaxChoice+1)}}, "choice 2: 501 bytes"},
		{"ask", map[string]any{"question": "  "}, "question is required"},
		{"ask", map[string]any{"question": "pick", "expires_in_seconds": -1}, "expires_in_seconds is -1"},
		{"ask", map[string]any{}, "question is required"},
		{"checkpoint", map[string]any{"message": strings.Repeat("m", rules.MaxMessage+1)}, "the limit is 65536"},
		{"deliver", map[string]any{"summary": strings.Repeat("s", rules.MaxSummary+1)}, "the limit is 65536"},
		{"deliver", map[string]any{"summary": "ok", "extra": 1}, "unknown field"},
	}
	f := &fakeBackend{}
	h := start(t, f)
	cs := connect(t, h, "2025-06-18")
	for _, c := range cases {
		text, isErr := call(t, cs, c.tool, c.args)
		if !isErr || !strings.Contains(text, c.want) {
			t.Errorf("%s: %v %.200s, want a tool error with %q", c.tool, isErr, text, c.want)
		}
	}
	if f.mutations() != 0 || h.tools.Status() != tools.Working {
		t.Fatalf("backend saw %d mutations, status %s", f.mutations(), h.tools.Status())
	}
}

func TestBackendErrorSurfaced(t *testing.T) {
	f := &fakeBackend{err: errors.New("fenced: this attempt was superseded")}
	h := start(t, f)
	cs := connect(t, h, "2025-06-18")
	for name, args := range map[string]map[string]any{
		"ask": {"question": "q?"}, "checkpoint": {"message": "m"}, "deliver": {"summary": "s"}, "context": nil,
		"sparse_add": {"paths": []string{"lib"}},
	} {
		text, isErr := call(t, cs, name, args)
		if !isErr || !strings.Contains(text, "fenced: this attempt was superseded") || !strings.HasPrefix(text, name+": ") {
			t.Errorf("%s: %v %s", name, isErr, text)
		}
	}
	if h.tools.Status() != tools.Working {
		t.Fatalf("status %s after failed calls", h.tools.Status())
	}
	// A failed ask does not end the turn: once the backend recovers it works.
	f.mu.Lock()
	f.err = nil
	f.mu.Unlock()
	if text, isErr := call(t, cs, "ask", map[string]any{"question": "q?"}); isErr {
		t.Fatalf("ask after recovery: %s", text)
	}
}

func TestUnknownToolIsProtocolError(t *testing.T) {
	cs := connect(t, start(t, &fakeBackend{}), "2025-06-18")
	_, err := cs.CallTool(t.Context(), &mcp.CallToolParams{Name: "push", Arguments: map[string]any{}})
	if err == nil || !strings.Contains(err.Error(), "unknown tool") {
		t.Fatalf("unknown tool: %v", err)
	}
}

func TestWrongTokenRefused(t *testing.T) {
	f := &fakeBackend{}
	h := start(t, f)
	for name, token := range map[string]string{"wrong": tools.NewToken(), "missing": "", "prefix": h.token[:10]} {
		for _, v := range protocolVersions {
			cs, err := connectWith(t.Context(), h.url, token, v, nil)
			if err == nil {
				cs.Close()
				t.Errorf("%s token, %s: connected", name, v)
			}
		}
	}

	// A raw tool call with a wrong token gets 401 and reaches nothing.
	body := `{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"deliver","arguments":{"summary":"x"}}}`
	for _, auth := range []string{"", "Bearer " + tools.NewToken(), "Basic " + h.token, "Bearer " + h.token + "x"} {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodPost, h.url, strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Accept", "application/json, text/event-stream")
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusUnauthorized || resp.Header.Get("WWW-Authenticate") == "" {
			t.Errorf("auth %.12q: status %d", auth, resp.StatusCode)
		}
	}
	if r := f.recorded(); f.mutations() != 0 || r.reads != 0 {
		t.Fatalf("backend was called: %d mutations, %d reads", f.mutations(), r.reads)
	}
}

// The runner may serve on a unix socket that the sandbox bridge exposes as
// 127.0.0.1:PORT inside the sandbox.
func TestServeOnUnixSocket(t *testing.T) {
	dir, err := os.MkdirTemp("", "drt")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "tools.sock")
	ln, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	f := &fakeBackend{job: sampleJob()}
	token := tools.NewToken()
	serveOn(t, ln, tools.New(f), token)

	rt := &http.Transport{DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
		return (&net.Dialer{}).DialContext(ctx, "unix", sock)
	}}
	defer rt.CloseIdleConnections()
	cs, err := connectWith(t.Context(), "http://127.0.0.1:41234"+tools.Path, token, "2025-06-18", rt)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if text, isErr := call(t, cs, "checkpoint", map[string]any{"message": "via socket"}); isErr {
		t.Fatal(text)
	}
	if got := f.recorded().messages; len(got) != 1 {
		t.Fatalf("backend messages %q", got)
	}
}

func TestNewServerRefusesEmptyToken(t *testing.T) {
	if _, err := tools.NewServer(tools.New(&fakeBackend{}), "", tools.Options{}); err == nil {
		t.Fatal("empty token accepted")
	}
}

func TestNewToken(t *testing.T) {
	a, b := tools.NewToken(), tools.NewToken()
	if !strings.HasPrefix(a, tools.TokenPrefix) || a == b || len(a) < len(tools.TokenPrefix)+40 {
		t.Fatalf("tokens %q %q", a, b)
	}
}
