package codex

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"drover/internal/agent"
	"drover/internal/agent/agenttest"
)

func TestParseSamples(t *testing.T) {
	tests := []struct {
		file    string
		kinds   string
		session string
		usage   agent.Usage
		outcome agent.Outcome
	}{
		{"codex-exec.jsonl", "session tool_use tool_result text usage outcome", "01a2298e-67a2-7ad3-a148-5a692aa3f86f",
			agent.Usage{InputTokens: 20, OutputTokens: 10}, agent.Outcome{OK: true}},
		{"codex-401-error.jsonl", "session raw outcome", "01a22992-2e48-7482-a73d-ddbaa4be7afe", agent.Usage{},
			agent.Outcome{Message: "codex: unexpected status 401 Unauthorized: fake authentication_error, url: http://127.0.0.1:18092/v1/responses", Refused: true}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			evs, sum := agenttest.ScanFile(t, filepath.Join("testdata", tt.file), Parse)
			if got := agenttest.Kinds(evs); got != tt.kinds {
				t.Errorf("kinds = %q, want %q", got, tt.kinds)
			}
			if sum.Session != tt.session || sum.Usage != tt.usage || sum.Outcome == nil || *sum.Outcome != tt.outcome || sum.Limit != nil {
				t.Errorf("summary = %+v (outcome %+v), want session %q usage %+v outcome %+v",
					sum, sum.Outcome, tt.session, tt.usage, tt.outcome)
			}
		})
	}
	evs, _ := agenttest.ScanFile(t, filepath.Join("testdata", "codex-exec.jsonl"), Parse)
	use, res := evs[1], evs[2]
	if use.Tool != "command_execution" || !strings.Contains(string(use.Input), "hello.txt") || res.ToolID != use.ToolID || res.IsError {
		t.Errorf("tool events = %+v, %+v", use, res)
	}
}

func TestParseLines(t *testing.T) {
	tests := []struct {
		name, line, kinds string
	}{
		{"usage limit", `{"type":"turn.failed","error":{"message":"You've hit your usage limit."}}`, "limit outcome"},
		{"429", `{"type":"turn.failed","error":{"message":"exceeded retry limit, last status: 429 Too Many Requests"}}`, "limit outcome"},
		{"failed command", `{"type":"item.completed","item":{"id":"i","type":"command_execution","command":"false","aggregated_output":"","exit_code":1,"status":"failed"}}`, "tool_result"},
		{"reasoning", `{"type":"item.completed","item":{"id":"i","type":"reasoning","text":"hm"}}`, ""},
		{"mcp call", `{"type":"item.started","item":{"id":"i","type":"mcp_tool_call","server":"drover","tool":"deliver","arguments":{"summary":"s"}}}`, "tool_use"},
		{"malformed", `{"type":`, "raw"},
		{"unknown", `{"type":"future.thing"}`, "raw"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs := Parse([]byte(tt.line))
			if got := agenttest.Kinds(evs); got != tt.kinds {
				t.Fatalf("kinds = %q, want %q", got, tt.kinds)
			}
			if tt.name == "failed command" && !evs[0].IsError {
				t.Error("failed command not marked as error")
			}
			if tt.name == "mcp call" && (evs[0].Tool != "drover.deliver" || string(evs[0].Input) != `{"summary":"s"}`) {
				t.Errorf("mcp call = %+v", evs[0])
			}
		})
	}
}

func TestCommand(t *testing.T) {
	base := agent.Launch{Prompt: "do it", Home: "/h", AccountDir: "/acct", BaseURL: "http://127.0.0.1:9/openai/",
		ToolURL: "http://10.0.0.1:7/mcp", ToolToken: "drover_tool_secret"}
	tests := []struct {
		name   string
		edit   func(*agent.Launch)
		argv   []string
		env    []string
		config []string // lines the config must hold
		not    []string // and must not
	}{
		{"new", func(*agent.Launch) {}, []string{"codex", "exec", "--json", "--skip-git-repo-check", "do it"},
			[]string{"HOME=/h", "CODEX_HOME=/acct", "DROVER_CODEX_API_KEY=" + agent.PlaceholderKey},
			[]string{`model_provider = "drover"`, `base_url = "http://127.0.0.1:9/openai/v1"`, `env_key = "DROVER_CODEX_API_KEY"`,
				`wire_api = "responses"`, "request_max_retries = 0", "stream_max_retries = 0", `approval_policy = "never"`,
				"check_for_update_on_startup = false", "[analytics]\nenabled = false", "[mcp_servers.drover]",
				`url = "http://10.0.0.1:7/mcp"`, `http_headers = { Authorization = "Bearer drover_tool_secret" }`},
			[]string{"model = "}},
		{"resume, default provider, model", func(l *agent.Launch) { l.Resume = "thr-1"; l.BaseURL = ""; l.Model = "gpt-x"; l.ToolToken = "" },
			[]string{"codex", "exec", "--json", "--skip-git-repo-check", "resume", "thr-1", "do it"},
			[]string{"HOME=/h", "CODEX_HOME=/acct"},
			[]string{`model = "gpt-x"`}, []string{"model_provider", "mcp_servers"}},
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
			cfg := string(agenttest.CheckCommand(t, c, "secret", "/acct/config.toml"))
			for _, s := range tt.config {
				if !strings.Contains(cfg, s) {
					t.Errorf("config lacks %q:\n%s", s, cfg)
				}
			}
			for _, s := range tt.not {
				if strings.Contains(cfg, s) {
					t.Errorf("config has %q:\n%s", s, cfg)
				}
			}
		})
	}
	if _, err := Command(agent.Launch{Home: "/h", AccountDir: "/a"}); err == nil {
		t.Error("empty prompt accepted")
	}
}
