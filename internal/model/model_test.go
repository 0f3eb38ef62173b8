package model

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"drover/internal/testkit/fakemodel"
)

const testKey = "sk-test-SECRET-key-0123"

var readTool = Tool{Name: "read_file", Description: "read a file", Schema: map[string]any{
	"type": "object", "properties": map[string]any{"path": map[string]any{"type": "string"}}, "required": []string{"path"}}}

// fakes are the wire protocols under test, each with the provider that
// speaks it.
var fakes = []struct {
	name  string
	start func(testing.TB, []fakemodel.Turn, ...fakemodel.Option) *fakemodel.FakeServer
	cfg   func(url string) Config
}{
	{"anthropic", fakemodel.NewFakeAnthropic, func(u string) Config {
		return Config{Provider: Anthropic, BaseURL: u, Model: "claude-sonnet-4-5", Key: testKey}
	}},
	{"chat", fakemodel.NewFakeChat, func(u string) Config {
		return Config{Provider: OpenAICompatible, BaseURL: u + "/v1", Model: "qwen-local", Key: testKey}
	}},
	{"responses", fakemodel.NewFakeResponses, func(u string) Config {
		return Config{Provider: OpenAI, BaseURL: u + "/v1", Model: "gpt-5", Key: testKey}
	}},
}

func newProvider(t *testing.T, cfg Config) Provider {
	t.Helper()
	cfg.RetryWait = time.Millisecond
	p, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func prompt(text string) Request {
	return Request{System: "you are a test", Messages: []Message{{Role: User, Text: text}}, Tools: []Tool{readTool}}
}

// TestToolCallRoundTrip: a streamed tool call arrives with its name, id and
// arguments; its result goes back; the final text ends the turn; usage is
// counted, and the key travels in the vendor's header.
func TestToolCallRoundTrip(t *testing.T) {
	for _, fk := range fakes {
		t.Run(fk.name, func(t *testing.T) {
			srv := fk.start(t, []fakemodel.Turn{
				fakemodel.CallTool("read_file", map[string]any{"path": "a.txt"}),
				fakemodel.Text("all done"),
			}, fakemodel.RequireKey(testKey))
			p := newProvider(t, fk.cfg(srv.URL))
			req := prompt("read a.txt")
			r, err := p.Complete(context.Background(), req)
			if err != nil {
				t.Fatalf("%v\n%s", err, srv.Dump())
			}
			if r.Stop != StopTools || len(r.Calls) != 1 || r.Calls[0].Name != "read_file" || r.Calls[0].ID == "" {
				t.Fatalf("got %+v; want one read_file call", r)
			}
			args, err := ArgsObject(r.Calls[0].Args)
			if err != nil || args["path"] != "a.txt" {
				t.Fatalf("args %q: %v", r.Calls[0].Args, err)
			}
			if r.Usage.InputTokens == 0 || r.Usage.OutputTokens == 0 {
				t.Errorf("usage %+v: want tokens counted", r.Usage)
			}
			req.Messages = append(req.Messages, r.Message(),
				Message{Role: User, Results: []Result{{CallID: r.Calls[0].ID, Name: "read_file", Output: "hello"}}})
			r, err = p.Complete(context.Background(), req)
			if err != nil {
				t.Fatal(err)
			}
			if r.Stop != StopEnd || r.Text != "all done" || len(r.Calls) != 0 {
				t.Fatalf("got %+v; want the final text", r)
			}
			if res, ok := srv.Result(0); !ok || res.Output != "hello" {
				t.Fatalf("the fake got result %+v, %v", res, ok)
			}
		})
	}
}

// TestCacheHints: with a cache key, Anthropic gets two cache breakpoints
// (the system text, the last message) and OpenAI's Responses API the key.
func TestCacheHints(t *testing.T) {
	want := map[string]string{"anthropic": `"cache_control":{"type":"ephemeral"`, "responses": `"prompt_cache_key":"sess-1"`}
	for _, fk := range fakes {
		w, ok := want[fk.name]
		if !ok {
			continue
		}
		t.Run(fk.name, func(t *testing.T) {
			srv := fk.start(t, []fakemodel.Turn{fakemodel.Text("ok")})
			req := prompt("go")
			req.CacheKey = "sess-1"
			if _, err := newProvider(t, fk.cfg(srv.URL)).Complete(context.Background(), req); err != nil {
				t.Fatal(err)
			}
			requests(srv, 1)
			body := string(srv.Requests()[0].Body)
			if n := strings.Count(body, w); n == 0 || (fk.name == "anthropic" && n != 2) {
				t.Fatalf("%d times %s in %s", n, w, body)
			}
		})
	}
}

// TestTruncated: an answer cut at the token limit says so.
func TestTruncated(t *testing.T) {
	for _, fk := range fakes {
		t.Run(fk.name, func(t *testing.T) {
			srv := fk.start(t, []fakemodel.Turn{fakemodel.Truncated("half an ans")})
			r, err := newProvider(t, fk.cfg(srv.URL)).Complete(context.Background(), prompt("go"))
			if err != nil {
				t.Fatal(err)
			}
			if r.Stop != StopLength {
				t.Fatalf("stop %q; want length", r.Stop)
			}
		})
	}
}

// TestBrokenStreamRetried: a cut or garbled stream is a transport failure:
// retried within the limit, and then the call fails with a reason that
// names neither the key nor the prompt.
func TestBrokenStreamRetried(t *testing.T) {
	for _, fk := range fakes {
		t.Run(fk.name+"/recovers", func(t *testing.T) {
			srv := fk.start(t, []fakemodel.Turn{fakemodel.Text("fine")},
				fakemodel.Break(0, fakemodel.CutStream, fakemodel.Garbage))
			cfg := fk.cfg(srv.URL)
			cfg.Retries = 2
			r, err := newProvider(t, cfg).Complete(context.Background(), prompt("go"))
			if err != nil || r.Text != "fine" {
				t.Fatalf("got %+v, %v\n%s", r, err, srv.Dump())
			}
			if n := requests(srv, 3); n != 3 {
				t.Fatalf("%d requests; want 3 (two broken, one retry that worked)", n)
			}
		})
		t.Run(fk.name+"/gives up", func(t *testing.T) {
			srv := fk.start(t, []fakemodel.Turn{fakemodel.Text("fine")},
				fakemodel.Break(0, fakemodel.CutStream, fakemodel.CutStream, fakemodel.CutStream))
			cfg := fk.cfg(srv.URL)
			cfg.Retries = 2
			_, err := newProvider(t, cfg).Complete(context.Background(), prompt("PROMPT-TEXT-XYZ"))
			var e *Error
			if !errors.As(err, &e) || e.Kind != KindTransport {
				t.Fatalf("got %v; want a transport error", err)
			}
			checkRedacted(t, err)
			if n := requests(srv, 3); n != 3 {
				t.Fatalf("%d requests; want 3", n)
			}
		})
	}
}

// TestStatusErrors: a refused key and a rate limit are classified, not
// retried, and their errors hold no secret.
func TestStatusErrors(t *testing.T) {
	for _, fk := range fakes {
		t.Run(fk.name+"/auth", func(t *testing.T) {
			srv := fk.start(t, []fakemodel.Turn{fakemodel.Text("x")}, fakemodel.RequireKey("another-key"))
			_, err := newProvider(t, fk.cfg(srv.URL)).Complete(context.Background(), prompt("PROMPT-TEXT-XYZ"))
			var e *Error
			if !errors.As(err, &e) || e.Kind != KindAuth || e.Status != 401 {
				t.Fatalf("got %v; want an auth error", err)
			}
			checkRedacted(t, err)
			if n := requests(srv, 1); n != 1 {
				t.Fatalf("%d requests; an auth error is not retried", n)
			}
		})
		t.Run(fk.name+"/limited", func(t *testing.T) {
			srv := fk.start(t, []fakemodel.Turn{fakemodel.Text("x")}, fakemodel.RateLimit(0, time.Now().Add(time.Hour)))
			_, err := newProvider(t, fk.cfg(srv.URL)).Complete(context.Background(), prompt("PROMPT-TEXT-XYZ"))
			var e *Error
			if !errors.As(err, &e) || e.Kind != KindLimited || e.RetryAt.IsZero() {
				t.Fatalf("got %#v; want a limit with its stated reset", err)
			}
			checkRedacted(t, err)
		})
	}
}

// TestUnreachable: nothing listening is a transport error naming the host.
func TestUnreachable(t *testing.T) {
	cfg := Config{Provider: OpenAICompatible, BaseURL: "http://127.0.0.1:1/v1", Model: "m", Key: testKey, Retries: -1}
	_, err := newProvider(t, cfg).Complete(context.Background(), prompt("PROMPT-TEXT-XYZ"))
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindTransport || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Fatalf("got %v", err)
	}
	checkRedacted(t, err)
}

// TestConfig: a provider needs a model and, when OpenAI-compatible, a base
// URL; a base URL must pass protocol.CheckBaseURL.
func TestConfig(t *testing.T) {
	for _, cfg := range []Config{
		{Provider: OpenAICompatible, Model: "m"},
		{Provider: OpenAICompatible, BaseURL: "http://example.com/v1", Model: "m"},
		{Provider: "gemini", Model: "m"},
	} {
		if _, err := New(cfg); err == nil {
			t.Errorf("%+v: want an error", cfg)
		}
	}
	if _, err := New(Config{Provider: Anthropic}); err != nil {
		t.Errorf("anthropic has a default model: %v", err)
	}
}

// requests is how many requests srv recorded, waiting (up to 2 s) until it
// has n: a request is recorded when its handler returns, which may be
// after the client has read the answer.
func requests(srv *fakemodel.FakeServer, n int) int {
	for range 200 {
		if got := len(srv.Requests()); got >= n {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
	return len(srv.Requests())
}

func checkRedacted(t *testing.T, err error) {
	t.Helper()
	for _, secret := range []string{testKey, "PROMPT-TEXT-XYZ"} {
		if strings.Contains(err.Error(), secret) {
			t.Errorf("error %q holds %q", err, secret)
		}
	}
}

// TestCost: known models cost by the price table; local ones nothing.
func TestCost(t *testing.T) {
	u := Usage{InputTokens: 1_000_000, OutputTokens: 1_000_000}
	if c := Cost("claude-sonnet-4-5", u); c != 18 {
		t.Errorf("sonnet: %v", c)
	}
	if c := Cost("qwen2.5-coder", u); c != 0 {
		t.Errorf("local: %v", c)
	}
}

// TestHangingProviderTimesOut: a server that accepts the call and never
// answers is a transport failure after the per-call timeout, retried, then
// given up with a reason.
func TestHangingProviderTimesOut(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		select {
		case <-release:
		case <-r.Context().Done():
		}
	}))
	defer srv.Close()
	defer close(release)
	cfg := Config{Provider: OpenAICompatible, BaseURL: srv.URL + "/v1", Model: "m", Key: testKey, Timeout: 50 * time.Millisecond, Retries: 1}
	_, err := newProvider(t, cfg).Complete(context.Background(), prompt("PROMPT-TEXT-XYZ"))
	var e *Error
	if !errors.As(err, &e) || e.Kind != KindTransport || !strings.Contains(err.Error(), "no answer within") {
		t.Fatalf("got %v", err)
	}
	checkRedacted(t, err)
	if n := calls.Load(); n != 2 {
		t.Fatalf("%d calls; want 2 (one retry)", n)
	}
}

// TestProbe: a model that calls the probe tool takes tool calls; one that
// answers in text does not; neither is an error.
func TestProbe(t *testing.T) {
	for _, tt := range []struct {
		turn fakemodel.Turn
		want bool
	}{
		{fakemodel.CallTool("probe", map[string]any{"ok": true}), true},
		{fakemodel.Text("I cannot call tools."), false},
	} {
		srv := fakemodel.NewFakeChat(t, []fakemodel.Turn{tt.turn})
		p := newProvider(t, Config{Provider: OpenAICompatible, BaseURL: srv.URL + "/v1", Model: "m"})
		f, err := Probe(context.Background(), p)
		if err != nil || f.ToolCalls != tt.want {
			t.Fatalf("%v: %+v, %v", tt.turn, f, err)
		}
	}
}

// TestWireID: a tool-call id every provider takes is sent as it is; any
// other becomes one they all take, the same each time.
func TestWireID(t *testing.T) {
	for _, id := range []string{"toolu_01AbC", "call_fake_1_2", "x"} {
		if got := WireID(id); got != id {
			t.Errorf("WireID(%q) = %q", id, got)
		}
	}
	for _, id := range []string{"", "functions.read_file:0", strings.Repeat("a", 41), "call id"} {
		got := WireID(id)
		if got == id || got != WireID(id) || !strings.HasPrefix(got, "call_") || len(got) > 40 || WireID(got) != got {
			t.Errorf("WireID(%q) = %q", id, got)
		}
	}
}

// TestProbeFindings: a server whose streamed tool calls arrive broken (as
// Ollama's have) is found to take tool calls whole only; one that states
// the context it serves has it found; one that answers in text takes no
// tool calls.
func TestProbeFindings(t *testing.T) {
	call := fakemodel.CallTool("probe", map[string]any{"ok": true})
	for _, tt := range []struct {
		name string
		turn fakemodel.Turn
		opts []fakemodel.Option
		want Found
	}{
		{"streamed", call, nil, Found{ToolCalls: true, StreamedToolCalls: true}},
		{"broken stream", call, []fakemodel.Option{fakemodel.BrokenStreamedTools()}, Found{ToolCalls: true}},
		{"text only", fakemodel.Text("I cannot call tools."), nil, Found{}},
		{"whole answer to a stream", call, []fakemodel.Option{fakemodel.WholeStreams()}, Found{ToolCalls: true}},
		{"tools refused", fakemodel.Text("I cannot call tools."), []fakemodel.Option{fakemodel.RefuseTools()}, Found{}},
		{"vllm context", call, []fakemodel.Option{fakemodel.ServedContext(8192)}, Found{ToolCalls: true, StreamedToolCalls: true, ContextLength: 8192}},
		{"ollama context", call, []fakemodel.Option{fakemodel.OllamaContext(2048)}, Found{ToolCalls: true, StreamedToolCalls: true, ContextLength: 2048}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakemodel.NewFakeChat(t, []fakemodel.Turn{tt.turn}, tt.opts...)
			p := newProvider(t, Config{Provider: OpenAICompatible, BaseURL: srv.URL + "/v1", Model: "m", Retries: -1})
			f, err := Probe(context.Background(), p)
			f.Usage = Usage{}
			if err != nil || f != tt.want {
				t.Fatalf("got %+v, %v; want %+v\n%s", f, err, tt.want, srv.Dump())
			}
		})
	}
}

// TestWholeAnswerToStream: a server that answers a streamed request
// carrying tools with a whole JSON body has its answer taken, marked
// Whole, not retried as garbled.
func TestWholeAnswerToStream(t *testing.T) {
	srv := fakemodel.NewFakeChat(t, []fakemodel.Turn{fakemodel.CallTool("read_file", map[string]any{"path": "a.txt"})}, fakemodel.WholeStreams())
	p := newProvider(t, Config{Provider: OpenAICompatible, BaseURL: srv.URL + "/v1", Model: "m", Retries: -1})
	r, err := p.Complete(context.Background(), prompt("read a.txt"))
	if err != nil || !r.Whole || len(r.Calls) != 1 || r.Calls[0].Name != "read_file" || r.Stop != StopTools {
		t.Fatalf("got %+v, %v\n%s", r, err, srv.Dump())
	}
}

// TestRefusalKinds: a model the server does not serve (Ollama's 404) and
// a model whose server refuses tools (Ollama's 400) are told apart from
// an endpoint that is not there (a base URL without /v1: a bare 404), and
// from each other; none is retried and none quotes the key.
func TestRefusalKinds(t *testing.T) {
	for _, tt := range []struct {
		name  string
		opts  []fakemodel.Option
		path  string
		want  Kind
		fault bool
	}{
		{"model not found", []fakemodel.Option{fakemodel.Models("other")}, "/v1", KindNoModel, true},
		{"tools refused", []fakemodel.Option{fakemodel.RefuseTools()}, "/v1", KindNoTools, true},
		{"no /v1", nil, "", KindRefused, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := fakemodel.NewFakeChat(t, []fakemodel.Turn{fakemodel.Text("x")}, tt.opts...)
			_, err := newProvider(t, Config{Provider: OpenAICompatible, BaseURL: srv.URL + tt.path, Model: "m", Key: testKey}).
				Complete(context.Background(), prompt("PROMPT-TEXT-XYZ"))
			var e *Error
			if !errors.As(err, &e) || e.Kind != tt.want || e.AccountFault() != tt.fault {
				t.Fatalf("got %#v; want kind %s", err, tt.want)
			}
			checkRedacted(t, err)
			if n := requests(srv, 1); n != 1 {
				t.Fatalf("%d requests; a refusal is not retried", n)
			}
		})
	}
}
