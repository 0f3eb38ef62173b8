package gemini

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"drover/internal/agent"
	"drover/internal/agent/agenttest"
)

func TestParseSamples(t *testing.T) {
	tests := []struct{ file, session string }{
		{"gemini-stream-json.jsonl", "42e0a375-4a52-44d3-b477-7fa517727644"},
		{"gemini-resume.jsonl", "33333333-3333-4444-8555-666666666666"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			evs, sum := agenttest.ScanFile(t, filepath.Join("testdata", tt.file), Parse)
			if got, want := agenttest.Kinds(evs), "session tool_use tool_result text usage outcome"; got != want {
				t.Errorf("kinds = %q, want %q", got, want)
			}
			if sum.Session != tt.session || sum.Usage != (agent.Usage{InputTokens: 30, OutputTokens: 15}) ||
				sum.Outcome == nil || !sum.Outcome.OK || sum.Limit != nil {
				t.Errorf("summary = %+v", sum)
			}
			if use, res := evs[1], evs[2]; use.Tool != "run_shell_command" || !strings.Contains(string(use.Input), "hello.txt") ||
				res.ToolID != use.ToolID || res.IsError {
				t.Errorf("tool events = %+v %+v", use, res)
			}
			if evs[3].Text != "Done: created hello.txt containing hi." {
				t.Errorf("text = %+v", evs[3])
			}
		})
	}
}

func TestParseLines(t *testing.T) {
	tests := []struct{ name, line, kinds, msg string }{
		{"quota", `{"type":"result","status":"error","error":{"type":"FatalError","message":"429 RESOURCE_EXHAUSTED quota"},"stats":{"input_tokens":1}}`,
			"usage limit outcome", "gemini: 429 RESOURCE_EXHAUSTED quota"},
		{"auth", `{"type":"result","status":"error","error":{"message":"401 API key not valid"}}`, "outcome", "gemini: 401 API key not valid"},
		{"tool error", `{"type":"tool_result","tool_id":"t","status":"error","output":"","error":{"message":"refused"}}`, "tool_result", ""},
		{"warning", `{"type":"error","severity":"warning","message":"loop detected"}`, "raw", ""},
		{"malformed", `{{`, "raw", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs := Parse([]byte(tt.line))
			if got := agenttest.Kinds(evs); got != tt.kinds {
				t.Fatalf("kinds = %q, want %q", got, tt.kinds)
			}
			last := evs[len(evs)-1]
			if last.Outcome != nil && (last.Outcome.OK || last.Outcome.Message != tt.msg) {
				t.Errorf("outcome = %+v, want %q", last.Outcome, tt.msg)
			}
			if tt.name == "tool error" && (!last.IsError || last.Text != "refused") {
				t.Errorf("tool result = %+v", last)
			}
		})
	}
}

func TestCommand(t *testing.T) {
	base := agent.Launch{Prompt: "do it", Home: "/h", AccountDir: "/acct", BaseURL: "http://127.0.0.1:9",
		ToolURL: "http://10.0.0.1:7/mcp", ToolToken: "drover_tool_secret"}
	common := []string{"gemini", "-p", "do it", "--output-format", "stream-json", "--yolo", "--skip-trust"}
	tests := []struct {
		name string
		edit func(*agent.Launch)
		argv []string
		env  []string
		auth string
	}{
		{"new", func(l *agent.Launch) { l.NewSession = "sid" }, append(slices.Clone(common), "--session-id", "sid"),
			[]string{"HOME=/acct", "XDG_CACHE_HOME=/h/.cache", "GOOGLE_GEMINI_BASE_URL=http://127.0.0.1:9", "GEMINI_API_KEY=" + agent.PlaceholderKey},
			"gemini-api-key"},
		{"resume with login", func(l *agent.Launch) { l.NewSession = "sid"; l.Resume = "old"; l.BaseURL = "" },
			append(slices.Clone(common), "--resume", "old"), []string{"HOME=/acct", "XDG_CACHE_HOME=/h/.cache"}, "oauth-personal"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := base
			tt.edit(&l)
			c, err := Command(l)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(c.Argv, tt.argv) || !slices.Equal(c.Env, tt.env) {
				t.Errorf("argv %q env %q, want %q %q", c.Argv, c.Env, tt.argv, tt.env)
			}
			data := agenttest.CheckCommand(t, c, "secret", "/acct/.gemini/settings.json")
			var s settings
			if err := json.Unmarshal(data, &s); err != nil {
				t.Fatal(err)
			}
			mcp := s.MCPServers["drover"]
			if s.Security.Auth.SelectedType != tt.auth || mcp.HTTPURL != "http://10.0.0.1:7/mcp" ||
				mcp.Headers["Authorization"] != "Bearer drover_tool_secret" {
				t.Errorf("settings = %s", data)
			}
		})
	}
}
