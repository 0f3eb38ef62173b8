package fakemodel_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"drover/internal/testkit/fakemodel"
)

// wire builds requests the way one CLI family sends them, so the fakes'
// bookkeeping can be tested without the CLIs.
type wire struct {
	name string
	new  func(t testing.TB, turns []fakemodel.Turn, opts ...fakemodel.Option) *fakemodel.FakeServer
	path string
	// auth sets the key header the CLI uses.
	auth func(h http.Header, key string)
	// body is a request offering one tool (or none, for a side request)
	// and carrying a result for each call id.
	body func(tools bool, results map[string]string) any
	// limitHeader is a header the vendor's 429 must carry.
	limitHeader string
	// toolName is what WriteFile becomes for this CLI, wantPath the path it
	// writes (relative ones joined to the working directory the request
	// states, for the CLIs that need absolute paths).
	toolName, wantPath string
	// keyStatus answers a wrong key.
	keyStatus int
}

func bearer(h http.Header, key string) { h.Set("Authorization", "Bearer "+key) }

var wires = []wire{
	{
		name: "anthropic", new: fakemodel.NewFakeAnthropic, path: "/v1/messages?beta=true",
		auth: func(h http.Header, key string) { h.Set("X-Api-Key", key) },
		body: func(tools bool, results map[string]string) any {
			msgs := []any{map[string]any{"role": "user", "content": "Primary working directory: /work\nhi"}}
			for id, out := range results {
				msgs = append(msgs, map[string]any{"role": "user", "content": []any{
					map[string]any{"type": "tool_result", "tool_use_id": id, "content": []any{map[string]any{"type": "text", "text": out}}}}})
			}
			b := map[string]any{"model": "m", "stream": true, "messages": msgs}
			if tools {
				b["tools"] = []any{map[string]any{"name": "Write"}, map[string]any{"name": "Bash"}}
			}
			return b
		},
		limitHeader: "Anthropic-Ratelimit-Unified-Reset", toolName: `"Write"`, wantPath: `/work/a.txt`, keyStatus: http.StatusUnauthorized,
	},
	{
		name: "responses", new: fakemodel.NewFakeResponses, path: "/v1/responses", auth: bearer,
		body: func(tools bool, results map[string]string) any {
			input := []any{map[string]any{"type": "message", "role": "user", "content": "hi"}}
			for id, out := range results {
				input = append(input, map[string]any{"type": "function_call_output", "call_id": id, "output": out})
			}
			b := map[string]any{"model": "m", "stream": true, "input": input}
			if tools {
				b["tools"] = []any{map[string]any{"type": "function", "name": "exec_command"}}
			}
			return b
		},
		limitHeader: "X-Ratelimit-Reset-Requests", toolName: `"exec_command"`, wantPath: `'a.txt'`, keyStatus: http.StatusUnauthorized,
	},
	{
		name: "chat", new: fakemodel.NewFakeChat, path: "/v1/chat/completions", auth: bearer,
		body: func(tools bool, results map[string]string) any {
			msgs := []any{map[string]any{"role": "user", "content": "Working directory: /work\nhi"}}
			for id, out := range results {
				msgs = append(msgs, map[string]any{"role": "tool", "tool_call_id": id, "content": out})
			}
			b := map[string]any{"model": "m", "stream": true, "messages": msgs}
			if tools {
				b["tools"] = []any{map[string]any{"type": "function", "function": map[string]any{"name": "write"}}}
			}
			return b
		},
		limitHeader: "X-Ratelimit-Reset-Requests", toolName: `"write"`, wantPath: `/work/a.txt`, keyStatus: http.StatusUnauthorized,
	},
	{
		name: "gemini", new: fakemodel.NewFakeGemini, path: "/v1beta/models/m:streamGenerateContent?alt=sse",
		auth: func(h http.Header, key string) { h.Set("X-Goog-Api-Key", key) },
		body: func(tools bool, results map[string]string) any {
			contents := []any{map[string]any{"role": "user", "parts": []any{map[string]any{"text": "hi"}}}}
			for id, out := range results {
				contents = append(contents, map[string]any{"role": "user", "parts": []any{map[string]any{
					"functionResponse": map[string]any{"id": id, "name": "write_file", "response": map[string]any{"output": out}}}}})
			}
			b := map[string]any{"contents": contents}
			if tools {
				b["tools"] = []any{map[string]any{"functionDeclarations": []any{map[string]any{"name": "write_file"}}}}
			}
			return b
		},
		limitHeader: "Retry-After", toolName: `"write_file"`, wantPath: `"a.txt"`, keyStatus: http.StatusBadRequest,
	},
}

func (w wire) post(t *testing.T, f *fakemodel.FakeServer, key string, tools bool, results map[string]string) (int, http.Header, string) {
	t.Helper()
	body, err := json.Marshal(w.body(tools, results))
	if err != nil {
		t.Fatal(err)
	}
	req, err := http.NewRequest(http.MethodPost, f.URL+w.path, strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	w.auth(req.Header, key)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, string(b)
}

var callID = regexp.MustCompile(`call_fake_\d+`)

// TestScript walks a script the way a CLI does, with a retry and side
// requests in between: only a request with a new tool result advances.
func TestScript(t *testing.T) {
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			f := w.new(t, []fakemodel.Turn{
				fakemodel.WriteFile("a.txt", "A"),
				fakemodel.RunCommand("echo hi"),
				fakemodel.Text("bye"),
			})
			_, _, first := w.post(t, f, "k", true, nil)
			if !strings.Contains(first, w.toolName) || !strings.Contains(first, w.wantPath) {
				t.Fatalf("first answer lacks %s or %s: %s", w.toolName, w.wantPath, first)
			}
			_, _, again := w.post(t, f, "k", true, nil) // a retry
			id1 := callID.FindString(first)
			if id1 == "" || callID.FindString(again) != id1 {
				t.Fatalf("retry got call %q, first %q", callID.FindString(again), id1)
			}
			if _, _, side := w.post(t, f, "k", false, nil); callID.MatchString(side) {
				t.Fatalf("side request got a tool call: %s", side)
			}
			_, _, second := w.post(t, f, "k", true, map[string]string{id1: "wrote a.txt"})
			id2 := callID.FindString(second)
			if id2 == "" || id2 == id1 {
				t.Fatalf("second turn call %q (first %q): %s", id2, id1, second)
			}
			_, _, last := w.post(t, f, "k", true, map[string]string{id1: "wrote a.txt", id2: "hi\n"})
			if !strings.Contains(last, "bye") || !f.Done() {
				t.Fatalf("last answer %s, done %v", last, f.Done())
			}
			if r, ok := f.Result(1); !ok || r.Output != "hi\n" || r.CallID != id2 {
				t.Errorf("Result(1) = %+v, %v", r, ok)
			}
			var turns []int
			for _, r := range f.Requests() {
				turns = append(turns, r.Turn)
			}
			if want := []int{0, 0, -1, 1, 2}; !slices.Equal(turns, want) {
				t.Errorf("turns %v; want %v", turns, want)
			}
		})
	}
}

// TestRateLimit: the limited turn is answered 429 once, with the vendor's
// reset header, and is still there for the next request.
func TestRateLimit(t *testing.T) {
	reset := time.Now().Add(time.Hour).Truncate(time.Second)
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			f := w.new(t, []fakemodel.Turn{fakemodel.Text("hello")}, fakemodel.RateLimit(0, reset))
			status, h, body := w.post(t, f, "k", true, nil)
			if status != http.StatusTooManyRequests || h.Get(w.limitHeader) == "" {
				t.Fatalf("got %d %v %s; want 429 with %s", status, h, body, w.limitHeader)
			}
			if w.name == "anthropic" {
				if h.Get("Anthropic-Ratelimit-Unified-Status") != "rejected" ||
					h.Get("Anthropic-Ratelimit-Unified-Reset") != strconv.FormatInt(reset.Unix(), 10) {
					t.Errorf("anthropic limit headers %v", h)
				}
			}
			if status, _, body := w.post(t, f, "k", true, nil); status != http.StatusOK || !strings.Contains(body, "hello") {
				t.Errorf("after the limit: %d %s", status, body)
			}
		})
	}
}

// TestRequireKey: a wrong key is refused and every key is recorded.
func TestRequireKey(t *testing.T) {
	for _, w := range wires {
		t.Run(w.name, func(t *testing.T) {
			f := w.new(t, []fakemodel.Turn{fakemodel.Text("hello")}, fakemodel.RequireKey("good"))
			if status, _, _ := w.post(t, f, "bad", true, nil); status != w.keyStatus {
				t.Errorf("bad key answered %d; want %d", status, w.keyStatus)
			}
			if status, _, _ := w.post(t, f, "good", true, nil); status != http.StatusOK {
				t.Errorf("good key answered %d", status)
			}
			if keys := f.Keys(); !slices.Equal(keys, []string{"bad", "good"}) {
				t.Errorf("keys %q", keys)
			}
		})
	}
}

// TestAnthropicHead: Claude Code probes the base URL before its first call.
func TestAnthropicHead(t *testing.T) {
	f := fakemodel.NewFakeAnthropic(t, nil)
	resp, err := http.Head(f.URL + "/")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD / = %d", resp.StatusCode)
	}
}

// TestResponsesExec: a request without function tools that offers Codex's
// JavaScript exec tool (its default model) is answered with exec calls
// whose scripts call the nested tool, MCP tools included, through the
// global tools object; their outputs advance the script.
func TestResponsesExec(t *testing.T) {
	f := fakemodel.NewFakeResponses(t, []fakemodel.Turn{
		fakemodel.RunCommand("echo hi"),
		fakemodel.CallTool("mcp__drover__deliver", map[string]any{"summary": "done"}),
		fakemodel.Text("bye"),
	})
	post := func(results map[string]string) map[string]any {
		t.Helper()
		input := []any{map[string]any{"type": "additional_tools", "role": "developer", "tools": []any{
			map[string]any{"type": "namespace", "name": "functions", "tools": []any{
				map[string]any{"type": "custom", "name": "exec", "description": "Run JavaScript\n" +
					"declare const tools: { exec_command(args: {\n cmd: string; }): Promise<unknown>; };\n" +
					"declare const tools: { apply_patch(input: string): Promise<unknown>; };"},
			}}}}}
		for id, out := range results {
			input = append(input, map[string]any{"type": "custom_tool_call_output", "call_id": id, "output": out})
		}
		b, _ := json.Marshal(map[string]any{"model": "default", "stream": true, "input": input})
		resp, err := http.Post(f.URL+"/v1/responses", "application/json", strings.NewReader(string(b)))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		raw, _ := io.ReadAll(resp.Body)
		for l := range strings.Lines(string(raw)) {
			data, ok := strings.CutPrefix(strings.TrimSpace(l), "data: ")
			var ev map[string]any
			if ok && json.Unmarshal([]byte(data), &ev) == nil && ev["type"] == "response.output_item.done" {
				return ev["item"].(map[string]any)
			}
		}
		t.Fatalf("no output item in %s", raw)
		return nil
	}
	for _, tc := range []struct {
		results map[string]string
		typ     string
		has     string // in the script, or the text
	}{
		{nil, "custom_tool_call", `await tools.exec_command({"cmd":"echo hi"})`},
		{map[string]string{"call_fake_1": "hi"}, "custom_tool_call", `await tools.mcp__drover__deliver({"summary":"done"})`},
		{map[string]string{"call_fake_1": "hi", "call_fake_2": "delivered"}, "message", "bye"},
	} {
		item := post(tc.results)
		got, _ := json.Marshal(item)
		text, _ := item["input"].(string) // an exec call's script
		if item["type"] == "message" {
			text = string(got)
		}
		if item["type"] != tc.typ || !strings.Contains(text, tc.has) {
			t.Errorf("item %s; want a %s with %s", got, tc.typ, tc.has)
		}
		if tc.typ == "custom_tool_call" && item["name"] != "exec" {
			t.Errorf("item %s; want a call of exec", got)
		}
	}
	if !f.Done() {
		t.Error("the script was not walked to its end")
	}
}

// TestHold: the request that takes the held turn waits until released; a
// held request given up by its client gives the turn back to its retry,
// and both count as having taken it.
func TestHold(t *testing.T) {
	w := wires[0]
	g := fakemodel.NewGate()
	f := w.new(t, []fakemodel.Turn{fakemodel.Text("hello")}, fakemodel.Hold(0, g))
	body, err := json.Marshal(w.body(true, nil))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, f.URL+w.path, strings.NewReader(string(body)))
	if err != nil {
		t.Fatal(err)
	}
	gone := make(chan error, 1)
	go func() {
		resp, err := http.DefaultClient.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		gone <- err
	}()
	<-g.Arrived()
	cancel()
	if err := <-gone; err == nil {
		t.Fatal("the held request was answered before its release")
	}
	// Its record is completed once its handler has given the turn back.
	for f.Requests()[0].Status == 0 {
		time.Sleep(time.Millisecond)
	}
	// The retry is not held (only the first request is) and gets the turn.
	if status, _, body := w.post(t, f, "k", true, nil); status != http.StatusOK || !strings.Contains(body, "hello") || !f.Done() {
		t.Fatalf("the retry: %d %s, done %v", status, body, f.Done())
	}
	var turns []int
	for _, r := range f.Requests() {
		turns = append(turns, r.Turn)
	}
	if want := []int{0, 0}; !slices.Equal(turns, want) {
		t.Errorf("turns %v; want %v", turns, want)
	}

	// Released, a held request is answered.
	g = fakemodel.NewGate()
	f = w.new(t, []fakemodel.Turn{fakemodel.Text("hello")}, fakemodel.Hold(0, g))
	answered := make(chan string, 1)
	go func() {
		_, _, body := w.post(t, f, "k", true, nil)
		answered <- body
	}()
	<-g.Arrived()
	select {
	case body := <-answered:
		t.Fatalf("answered while held: %s", body)
	default:
	}
	g.Release()
	if body := <-answered; !strings.Contains(body, "hello") {
		t.Fatalf("the released request was answered %s", body)
	}
}
