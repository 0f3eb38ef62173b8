package fakemodel

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// NewFakeGemini starts a fake Gemini API for Gemini CLI
// (GOOGLE_GEMINI_BASE_URL=URL): POST
// /v1beta/models/MODEL:streamGenerateContent?alt=sse takes the turns; the
// plain :generateContent requests Gemini CLI makes on the side (its model
// router, which wants a complexity_score, and JSON-schema checks) get a
// trivial answer and take no turn.
func NewFakeGemini(t testing.TB, turns []Turn, opts ...Option) *FakeServer {
	t.Helper()
	return newServer(t, gemini{}, turns, opts)
}

type gemini struct{}

func (gemini) name() string { return "gemini" }

func (gemini) key(r *http.Request) string {
	if k := r.Header.Get("X-Goog-Api-Key"); k != "" {
		return k
	}
	if k := r.URL.Query().Get("key"); k != "" {
		return k
	}
	return strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
}

func (gemini) parse(r *http.Request, body []byte) (parsed, bool) {
	rest, ok := strings.CutPrefix(r.URL.Path, "/v1beta/models/")
	if r.Method != http.MethodPost || !ok {
		return parsed{}, false
	}
	model, method, ok := strings.Cut(rest, ":")
	if !ok {
		return parsed{}, false
	}
	m, ok := decode(body)
	if !ok {
		return parsed{}, false
	}
	p := parsed{raw: m, model: model, stream: method == "streamGenerateContent"}
	for _, t := range list(m, "tools") {
		for _, d := range list(obj(t), "functionDeclarations") {
			if n := str(obj(d), "name"); n != "" {
				p.tools = append(p.tools, n)
			}
		}
	}
	p.turn = len(p.tools) > 0 && (method == "streamGenerateContent" || method == "generateContent")
	n := 0
	for _, c := range list(m, "contents") {
		for _, part := range list(obj(c), "parts") {
			fr := obj(obj(part)["functionResponse"])
			if fr == nil {
				continue
			}
			n++
			id := str(fr, "id")
			if id == "" {
				// Without ids a result is known by its place in the conversation.
				id = fmt.Sprintf("%s#%d", str(fr, "name"), n)
			}
			resp := obj(fr["response"])
			out, isErr := resp["output"], false
			if out == nil && resp["error"] != nil {
				out, isErr = resp["error"], true
			}
			if out == nil {
				out = resp
			}
			p.results = append(p.results, ToolResult{CallID: id, Output: textOf(out), IsError: isErr})
		}
	}
	return p, true
}

func (gemini) toolFor(t Turn, p parsed) (string, map[string]any) {
	switch t.kind {
	case kindWrite:
		return "write_file", map[string]any{"file_path": t.path, "content": t.content}
	case kindRun:
		return "run_shell_command", map[string]any{"command": t.command, "description": "fake model command"}
	}
	return resolveTool(t.tool, p.tools), t.args
}

func geminiResponse(p parsed, parts []any) map[string]any {
	return map[string]any{
		"candidates": []any{map[string]any{"content": map[string]any{"role": "model", "parts": parts},
			"finishReason": "STOP", "index": 0}},
		"usageMetadata": map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 5, "totalTokenCount": 15},
		"modelVersion":  p.model,
	}
}

func (gemini) reply(w http.ResponseWriter, p parsed, call *toolCall, text string) {
	var part map[string]any
	if call != nil {
		args := call.args
		if args == nil {
			args = map[string]any{}
		}
		part = map[string]any{"functionCall": map[string]any{"id": call.id, "name": call.name, "args": args}}
	} else {
		part = map[string]any{"text": text}
	}
	resp := geminiResponse(p, []any{part})
	if !p.stream {
		writeJSON(w, http.StatusOK, resp)
		return
	}
	startSSE(w).send("", resp)
}

// side answers Gemini CLI's JSON-schema requests: the router gets the
// lowest complexity (it only picks a model), anything else an object with
// the schema's string fields filled in.
func (g gemini) side(w http.ResponseWriter, r *http.Request, p parsed) {
	if strings.HasSuffix(r.URL.Path, ":countTokens") {
		writeJSON(w, http.StatusOK, map[string]any{"totalTokens": 10})
		return
	}
	text := "fake"
	if schema := obj(obj(p.raw["generationConfig"])["responseJsonSchema"]); schema != nil {
		ans := map[string]any{}
		for k, v := range obj(schema["properties"]) {
			switch strings.ToUpper(str(obj(v), "type")) {
			case "INTEGER", "NUMBER":
				ans[k] = 1
			case "BOOLEAN":
				ans[k] = false
			default:
				ans[k] = "fake"
			}
		}
		if _, ok := ans["next_speaker"]; ok {
			ans["next_speaker"] = "user"
		}
		j, _ := json.Marshal(ans)
		text = string(j)
	}
	g.reply(w, p, nil, text)
}

// limited answers like the Gemini API for an exhausted quota: 429
// RESOURCE_EXHAUSTED with a RetryInfo detail and retry-after.
func (gemini) limited(w http.ResponseWriter, reset time.Time) {
	secs := retryAfter(reset)
	w.Header().Set("retry-after", fmt.Sprint(secs))
	writeJSON(w, http.StatusTooManyRequests, map[string]any{"error": map[string]any{
		"code": 429, "status": "RESOURCE_EXHAUSTED",
		"message": "Resource has been exhausted (e.g. check quota).",
		"details": []any{map[string]any{"@type": "type.googleapis.com/google.rpc.RetryInfo",
			"retryDelay": fmt.Sprintf("%ds", secs)}}}})
}

func (gemini) unauthorized(w http.ResponseWriter) {
	writeJSON(w, http.StatusBadRequest, map[string]any{"error": map[string]any{
		"code": 400, "status": "INVALID_ARGUMENT", "message": "API key not valid. Please pass a valid API key.",
		"details": []any{map[string]any{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}}}})
}
