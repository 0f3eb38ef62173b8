package opencode

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"drover/internal/agent"
	"drover/internal/agent/agenttest"
)

func TestParseSample(t *testing.T) {
	evs, sum := agenttest.ScanFile(t, filepath.Join("testdata", "opencode-run.jsonl"), Parse)
	if got, want := agenttest.Kinds(evs), "session tool_use tool_result usage session text usage outcome"; got != want {
		t.Errorf("kinds = %q, want %q", got, want)
	}
	if sum.Session != "ses_dd66e5b47ffe0iYPLuWGM8Urcu" || sum.Usage != (agent.Usage{InputTokens: 20, OutputTokens: 10}) ||
		sum.Outcome == nil || !sum.Outcome.OK {
		t.Errorf("summary = %+v", sum)
	}
	if use, res := evs[1], evs[2]; use.Tool != "bash" || use.ToolID != "call_b6a2eeac3fa7" ||
		!strings.Contains(string(use.Input), "hello.txt") || res.Text != "(no output)" || res.IsError {
		t.Errorf("tool events = %+v %+v", use, res)
	}
	if evs[5].Text != "Done: created hello.txt containing hi." {
		t.Errorf("text = %+v", evs[5])
	}
}

func TestParseLines(t *testing.T) {
	tests := []struct{ name, line, kinds string }{
		{"tool error", `{"type":"tool_use","part":{"tool":"bash","callID":"c","state":{"status":"error","input":{},"error":"boom"}}}`, "tool_use tool_result"},
		{"rate limit", `{"type":"error","error":{"name":"APIError","data":{"message":"Too Many Requests","statusCode":429}}}`, "limit outcome"},
		{"auth error", `{"type":"error","error":{"name":"APIError","data":{"message":"Unauthorized","statusCode":401}}}`, "outcome"},
		{"malformed", `not json`, "raw"},
		{"unknown", `{"type":"reasoning","part":{}}`, "raw"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs := Parse([]byte(tt.line))
			if got := agenttest.Kinds(evs); got != tt.kinds {
				t.Fatalf("kinds = %q, want %q", got, tt.kinds)
			}
			last := evs[len(evs)-1]
			switch tt.name {
			case "tool error":
				if !last.IsError || last.Text != "boom" {
					t.Errorf("result = %+v", last)
				}
			case "auth error":
				if last.Outcome.OK || last.Outcome.Message != "opencode: API error 401: Unauthorized" {
					t.Errorf("outcome = %+v", last.Outcome)
				}
			}
		})
	}
}

func TestCommand(t *testing.T) {
	l := agent.Launch{Prompt: "do it", Home: "/h", AccountDir: "/acct", BaseURL: "http://127.0.0.1:9", Model: "m1",
		ToolURL: "http://10.0.0.1:7/mcp", ToolToken: "drover_tool_secret", Resume: "ses_1"}
	c, err := Command(l)
	if err != nil {
		t.Fatal(err)
	}
	if want := []string{"opencode", "run", "--format", "json", "-s", "ses_1", "do it"}; !slices.Equal(c.Argv, want) {
		t.Errorf("argv = %q, want %q", c.Argv, want)
	}
	wantEnv := []string{"HOME=/h", "XDG_CACHE_HOME=/h/.cache", "XDG_DATA_HOME=/acct/data", "OPENCODE_CONFIG=/h/opencode.json",
		"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_MODELS_FETCH=1"}
	if !slices.Equal(c.Env, wantEnv) {
		t.Errorf("env = %q, want %q", c.Env, wantEnv)
	}
	var got map[string]any
	if err := json.Unmarshal(agenttest.CheckCommand(t, c, "secret", "/h/opencode.json"), &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"$schema": "https://opencode.ai/config.json", "autoupdate": false, "share": "disabled",
		"permission": map[string]any{"edit": "allow", "bash": "allow", "external_directory": "allow", "doom_loop": "allow", "webfetch": "allow"},
		"model":      "drover/m1",
		"provider": map[string]any{"drover": map[string]any{"npm": "@ai-sdk/openai-compatible",
			"options": map[string]any{"baseURL": "http://127.0.0.1:9/v1", "apiKey": "{env:DROVER_OPENCODE_API_KEY}"},
			"models":  map[string]any{"m1": map[string]any{}}}},
		"mcp": map[string]any{"drover": map[string]any{"type": "remote", "url": "http://10.0.0.1:7/mcp",
			"headers": map[string]any{"Authorization": "Bearer drover_tool_secret"}}},
	}
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if string(gj) != string(wj) {
		t.Errorf("config = %s\nwant     %s", gj, wj)
	}
	for _, bad := range []agent.Launch{{Home: "/h", AccountDir: "/a"}, {Prompt: "p", Home: "/h", AccountDir: "/a", BaseURL: "http://x"}} {
		if _, err := Command(bad); err == nil {
			t.Errorf("Command(%+v) = nil error", bad)
		}
	}
}
