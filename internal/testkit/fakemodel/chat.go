package fakemodel

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// NewFakeChat starts a fake OpenAI Chat Completions API for opencode (an
// @ai-sdk/openai-compatible provider with baseURL = URL + "/v1"): POST
// /v1/chat/completions streams data-only SSE chunks with tool_calls
// deltas. opencode's title request offers no tools; it gets a title and
// takes no turn.
func NewFakeChat(t testing.TB, turns []Turn, opts ...Option) *FakeServer {
	t.Helper()
	return newServer(t, chat{}, turns, opts)
}

type chat struct{}

func (chat) name() string { return "chat completions" }

func (chat) key(r *http.Request) string {
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

func (chat) parse(r *http.Request, body []byte) (parsed, bool) {
	if r.Method == http.MethodGet && r.URL.Path == "/v1/models" || r.Method == http.MethodPost && r.URL.Path == "/api/show" {
		return parsed{}, true // a side request: the model's listing
	}
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		return parsed{}, false
	}
	m, ok := decode(body)
	if !ok {
		return parsed{}, false
	}
	p := parsed{raw: m, model: str(m, "model"), cwd: findCwd(body)}
	p.stream, _ = m["stream"].(bool)
	for _, t := range list(m, "tools") {
		if n := str(obj(obj(t)["function"]), "name"); n != "" {
			p.tools = append(p.tools, n)
		}
	}
	p.turn = len(p.tools) > 0
	for _, msg := range list(m, "messages") {
		msg := obj(msg)
		if str(msg, "role") == "tool" {
			p.results = append(p.results, ToolResult{CallID: str(msg, "tool_call_id"), Output: textOf(msg["content"])})
		}
	}
	return p, true
}

func (chat) toolFor(t Turn, p parsed) (string, map[string]any) {
	switch t.kind {
	case kindWrite:
		return "write", map[string]any{"filePath": absPath(p, t.path), "content": t.content}
	case kindRun:
		return "bash", map[string]any{"command": t.command, "description": "fake model command"}
	}
	return resolveTool(t.tool, p.tools), t.args
}

func (chat) reply(w http.ResponseWriter, p parsed, call *toolCall, text string) {
	id := fmt.Sprintf("chatcmpl-fake-%d", time.Now().UnixNano())
	finish := "stop"
	if p.truncated {
		finish = "length"
	}
	var msg map[string]any
	if call != nil {
		args := argsJSON(call.args)
		if p.truncated {
			finish, args = "length", args[:len(args)/2]
		} else {
			finish = "tool_calls"
		}
		msg = map[string]any{"role": "assistant", "content": nil, "tool_calls": []any{map[string]any{
			"index": 0, "id": call.id, "type": "function",
			"function": map[string]any{"name": call.name, "arguments": args}}}}
	} else {
		msg = map[string]any{"role": "assistant", "content": text}
	}
	usage := map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}
	if !p.stream || p.cfg != nil && p.cfg.wholeStreams && len(p.tools) > 0 {
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "object": "chat.completion", "created": 0, "model": p.model,
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage})
		return
	}
	chunk := func(choices []any, extra map[string]any) map[string]any {
		c := map[string]any{"id": id, "object": "chat.completion.chunk", "created": 0, "model": p.model, "choices": choices}
		for k, v := range extra {
			c[k] = v
		}
		return c
	}
	if call != nil && p.cfg != nil && p.cfg.brokenStreamedTools {
		msg = map[string]any{"role": "assistant", "content": "", "tool_calls": []any{map[string]any{
			"index": 0, "type": "function", "function": map[string]any{"name": "", "arguments": ""}}}}
	}
	s := startSSE(w)
	s.send("", chunk([]any{map[string]any{"index": 0, "delta": msg, "finish_reason": nil}}, nil))
	s.send("", chunk([]any{map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}}, nil))
	s.send("", chunk([]any{}, map[string]any{"usage": usage}))
	s.send("", "[DONE]")
}

func (c chat) side(w http.ResponseWriter, r *http.Request, p parsed) {
	var n, ollama int64
	if p.cfg != nil {
		n, ollama = p.cfg.servedContext, p.cfg.ollamaContext
	}
	switch r.URL.Path {
	case "/v1/models":
		m := map[string]any{"id": "fake", "object": "model", "created": 0, "owned_by": "fakemodel"}
		if n > 0 {
			m["max_model_len"] = n
		}
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{m}})
	case "/api/show":
		if ollama == 0 {
			http.NotFound(w, r)
			return
		}
		writeJSON(w, http.StatusOK, map[string]any{"parameters": fmt.Sprintf("stop \"<|im_end|>\"\nnum_ctx %d", ollama)})
	default:
		c.reply(w, p, nil, "Fake title")
	}
}

func (chat) limited(w http.ResponseWriter, reset time.Time) { openAILimited(w, reset) }

func (chat) unauthorized(w http.ResponseWriter) { openAIUnauthorized(w) }
