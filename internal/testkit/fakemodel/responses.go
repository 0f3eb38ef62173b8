package fakemodel

import (
	"fmt"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// NewFakeResponses starts a fake OpenAI Responses API for Codex (a custom
// provider with base_url = URL + "/v1" and wire_api = "responses"): POST
// /v1/responses streams response.output_item.done and response.completed.
// Codex has no file tool; WriteFile becomes an exec_command shell command.
// A request without function tools (Codex's default model) that offers the
// JavaScript "exec" tool is answered with exec calls: a script that calls
// the tool through exec's global tools object (tools.exec_command,
// tools.mcp__drover__deliver) and returns its result.
func NewFakeResponses(t testing.TB, turns []Turn, opts ...Option) *FakeServer {
	t.Helper()
	return newServer(t, responses{}, turns, opts)
}

type responses struct{}

func (responses) name() string { return "responses" }

func (responses) key(r *http.Request) string {
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

func (responses) parse(r *http.Request, body []byte) (parsed, bool) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
		return parsed{}, false
	}
	m, ok := decode(body)
	if !ok {
		return parsed{}, false
	}
	p := parsed{raw: m, model: str(m, "model"), cwd: findCwd(body), stream: true}
	for _, t := range list(m, "tools") {
		t := obj(t)
		if str(t, "type") == "namespace" {
			// Codex offers MCP tools grouped: namespace "mcp__SERVER" with
			// tools named TOOL; the model calls them by name and namespace.
			for _, sub := range list(t, "tools") {
				full := str(t, "name") + "__" + str(obj(sub), "name")
				p.tools = append(p.tools, full)
				if p.namespaces == nil {
					p.namespaces = map[string][2]string{}
				}
				p.namespaces[full] = [2]string{str(t, "name"), str(obj(sub), "name")}
			}
			continue
		}
		if n := str(t, "name"); n != "" {
			p.tools = append(p.tools, n)
		}
	}
	for _, it := range list(m, "input") {
		// Codex's default model gets no function tools but, in an input
		// item, a namespace holding the JavaScript "exec" tool, whose
		// description declares the nested tools it reaches.
		it := obj(it)
		if str(it, "type") != "additional_tools" {
			continue
		}
		for _, ns := range list(it, "tools") {
			for _, sub := range list(obj(ns), "tools") {
				sub := obj(sub)
				if str(sub, "type") != "custom" || str(sub, "name") != "exec" {
					continue
				}
				p.exec = true
				for _, mm := range nestedToolRE.FindAllStringSubmatch(str(sub, "description"), -1) {
					p.tools = append(p.tools, mm[1])
				}
			}
		}
	}
	p.turn = len(p.tools) > 0 || p.exec
	for _, it := range list(m, "input") {
		it := obj(it)
		switch str(it, "type") {
		case "function_call_output", "custom_tool_call_output":
			p.results = append(p.results, ToolResult{CallID: str(it, "call_id"), Output: textOf(it["output"])})
		}
	}
	return p, true
}

func (responses) toolFor(t Turn, p parsed) (string, map[string]any) {
	switch t.kind {
	case kindWrite:
		return "exec_command", map[string]any{"cmd": shellWrite(t.path, t.content)}
	case kindRun:
		return "exec_command", map[string]any{"cmd": t.command}
	}
	if p.exec && strings.HasPrefix(t.tool, "mcp__") {
		// exec's global tools object has every MCP tool as mcp__SERVER__TOOL,
		// also those its description leaves out (deferred ones).
		return t.tool, t.args
	}
	return resolveTool(t.tool, p.tools), t.args
}

// nestedToolRE finds the tools exec's description declares.
var nestedToolRE = regexp.MustCompile(`declare const tools: \{ ([A-Za-z0-9_]+)\(`)

// execScript is the JavaScript that makes one tool call through exec and
// gives its result back as the exec call's output.
func execScript(call *toolCall) string {
	return fmt.Sprintf("const r = await tools.%s(%s);\ntext(typeof r === \"string\" ? r : JSON.stringify(r));\n", call.name, argsJSON(call.args))
}

func (responses) reply(w http.ResponseWriter, p parsed, call *toolCall, text string) {
	n := time.Now().UnixNano()
	rid := fmt.Sprintf("resp_fake_%d", n)
	var item map[string]any
	if call != nil {
		item = map[string]any{"type": "function_call", "id": fmt.Sprintf("fc_fake_%d", n), "call_id": call.id,
			"name": call.name, "arguments": argsJSON(call.args), "status": "completed"}
		if ns, ok := p.namespaces[call.name]; ok {
			item["namespace"], item["name"] = ns[0], ns[1]
		}
		if p.exec {
			item = map[string]any{"type": "custom_tool_call", "id": fmt.Sprintf("ctc_fake_%d", n), "call_id": call.id,
				"name": "exec", "input": execScript(call), "status": "completed"}
		}
	} else {
		item = map[string]any{"type": "message", "id": fmt.Sprintf("msg_fake_%d", n), "role": "assistant", "status": "completed",
			"content": []any{map[string]any{"type": "output_text", "text": text, "annotations": []any{}}}}
	}
	s := startSSE(w)
	s.send("response.created", map[string]any{"type": "response.created", "response": map[string]any{"id": rid}})
	s.send("response.output_item.done", map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item})
	done, status := "response.completed", "completed"
	var incomplete any
	if p.truncated {
		done, status, incomplete = "response.incomplete", "incomplete", map[string]any{"reason": "max_output_tokens"}
	}
	s.send(done, map[string]any{"type": done, "response": map[string]any{
		"id": rid, "model": p.model, "status": status, "incomplete_details": incomplete,
		"usage": map[string]any{"input_tokens": 10, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": 5, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 15}}})
}

func (r responses) side(w http.ResponseWriter, _ *http.Request, p parsed) { r.reply(w, p, nil, "fake") }

// limited answers like OpenAI for an exhausted limit: retry-after and the
// x-ratelimit headers, and the error body Codex reads a usage limit from
// (type usage_limit_reached with resets_at).
func (responses) limited(w http.ResponseWriter, reset time.Time) { openAILimited(w, reset) }

func (responses) unauthorized(w http.ResponseWriter) { openAIUnauthorized(w) }

func openAILimited(w http.ResponseWriter, reset time.Time) {
	h := w.Header()
	h.Set("x-ratelimit-limit-requests", "100")
	h.Set("x-ratelimit-remaining-requests", "0")
	body := map[string]any{"type": "usage_limit_reached", "code": "rate_limit_exceeded", "message": "You've hit your usage limit."}
	if !reset.IsZero() {
		secs := retryAfter(reset)
		h.Set("retry-after", strconv.Itoa(secs))
		h.Set("x-ratelimit-reset-requests", strconv.Itoa(secs)+"s")
		body["resets_at"], body["resets_in_seconds"] = reset.Unix(), secs
	}
	writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": body})
}

func openAIUnauthorized(w http.ResponseWriter) {
	writeJSON(w, http.StatusUnauthorized, map[string]any{"error": map[string]any{
		"type": "invalid_request_error", "code": "invalid_api_key", "message": "Incorrect API key provided."}})
}
