package fakemodel

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"
)

// NewFakeAnthropic starts a fake Anthropic Messages API for Claude Code
// (ANTHROPIC_BASE_URL=URL): HEAD / answers 200, POST /v1/messages streams
// SSE with event: lines, which Claude Code needs (plain JSON or data-only
// SSE makes it repeat each call without streaming).
func NewFakeAnthropic(t testing.TB, turns []Turn, opts ...Option) *FakeServer {
	t.Helper()
	return newServer(t, anthropic{}, turns, opts)
}

type anthropic struct{}

func (anthropic) name() string { return "anthropic" }

func (anthropic) key(r *http.Request) string {
	if k := r.Header.Get("X-Api-Key"); k != "" {
		return k
	}
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

func (anthropic) parse(r *http.Request, body []byte) (parsed, bool) {
	if r.Method != http.MethodPost || !strings.HasPrefix(r.URL.Path, "/v1/messages") {
		return parsed{}, false
	}
	m, ok := decode(body)
	if !ok {
		return parsed{}, false
	}
	p := parsed{raw: m, model: str(m, "model"), cwd: findCwd(body)}
	p.stream, _ = m["stream"].(bool)
	for _, t := range list(m, "tools") {
		if n := str(obj(t), "name"); n != "" {
			p.tools = append(p.tools, n)
		}
	}
	// count_tokens and the like offer tools too but are not turns.
	p.turn = len(p.tools) > 0 && r.URL.Path == "/v1/messages"
	for _, msg := range list(m, "messages") {
		for _, c := range list(obj(msg), "content") {
			c := obj(c)
			if str(c, "type") != "tool_result" {
				continue
			}
			isErr, _ := c["is_error"].(bool)
			p.results = append(p.results, ToolResult{CallID: str(c, "tool_use_id"), Output: textOf(c["content"]), IsError: isErr})
		}
	}
	return p, true
}

func (anthropic) toolFor(t Turn, p parsed) (string, map[string]any) {
	switch t.kind {
	case kindWrite:
		return "Write", map[string]any{"file_path": absPath(p, t.path), "content": t.content}
	case kindRun:
		return "Bash", map[string]any{"command": t.command, "description": "fake model command"}
	}
	return resolveTool(t.tool, p.tools), t.args
}

func (anthropic) reply(w http.ResponseWriter, p parsed, call *toolCall, text string) {
	id := fmt.Sprintf("msg_fake_%d", time.Now().UnixNano())
	model := p.model
	if model == "" {
		model = "claude-fake"
	}
	usage := map[string]any{"input_tokens": 10, "output_tokens": 5,
		"cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
	stop := "end_turn"
	if p.truncated {
		stop = "max_tokens"
	}
	var block map[string]any
	if call != nil {
		stop = "tool_use"
		block = map[string]any{"type": "tool_use", "id": call.id, "name": call.name, "input": call.args}
	} else {
		block = map[string]any{"type": "text", "text": text}
	}
	if !p.stream {
		writeJSON(w, http.StatusOK, map[string]any{"id": id, "type": "message", "role": "assistant", "model": model,
			"content": []any{block}, "stop_reason": stop, "stop_sequence": nil, "usage": usage})
		return
	}
	s := startSSE(w)
	s.send("message_start", map[string]any{"type": "message_start", "message": map[string]any{
		"id": id, "type": "message", "role": "assistant", "model": model, "content": []any{},
		"stop_reason": nil, "stop_sequence": nil, "usage": usage}})
	if call != nil {
		s.send("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "tool_use", "id": call.id, "name": call.name, "input": map[string]any{}}})
		s.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "input_json_delta", "partial_json": argsJSON(call.args)}})
	} else {
		s.send("content_block_start", map[string]any{"type": "content_block_start", "index": 0,
			"content_block": map[string]any{"type": "text", "text": ""}})
		s.send("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0,
			"delta": map[string]any{"type": "text_delta", "text": text}})
	}
	s.send("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0})
	s.send("message_delta", map[string]any{"type": "message_delta",
		"delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 5}})
	s.send("message_stop", map[string]any{"type": "message_stop"})
}

func (a anthropic) side(w http.ResponseWriter, r *http.Request, p parsed) {
	if strings.HasSuffix(r.URL.Path, "/count_tokens") {
		writeJSON(w, http.StatusOK, map[string]any{"input_tokens": 10})
		return
	}
	a.reply(w, p, nil, "fake")
}

// limited answers like an account whose usage limit is reached: the
// unified rate-limit headers Claude Code reads, retry-after, and the API's
// error body.
func (anthropic) limited(w http.ResponseWriter, reset time.Time) {
	h := w.Header()
	h.Set("anthropic-ratelimit-unified-status", "rejected")
	if !reset.IsZero() {
		h.Set("anthropic-ratelimit-unified-reset", strconv.FormatInt(reset.Unix(), 10))
		h.Set("retry-after", strconv.Itoa(retryAfter(reset)))
	}
	h.Set("request-id", "req_fake_limited")
	writeJSON(w, http.StatusTooManyRequests, map[string]any{"type": "error",
		"error": map[string]any{"type": "rate_limit_error", "message": "This request would exceed your account's rate limit. Please try again later."}})
}

func (anthropic) unauthorized(w http.ResponseWriter) {
	writeJSON(w, http.StatusUnauthorized, map[string]any{"type": "error",
		"error": map[string]any{"type": "authentication_error", "message": "invalid x-api-key"}})
}

// retryAfter is the whole seconds until reset, at least 1.
func retryAfter(reset time.Time) int {
	s := int(time.Until(reset).Seconds() + 0.999)
	return max(s, 1)
}
