package claude

import (
	"slices"
	"testing"

	"drover/internal/agent"
	"drover/internal/agent/agenttest"
)

func TestCommand(t *testing.T) {
	base := agent.Launch{Prompt: "do it", Home: "/h", AccountDir: "/acct", ToolToken: "drover_tool_secret",
		MCPConfig: "/h/mcp.json", BaseURL: "http://127.0.0.1:9/anthropic"}
	common := []string{"claude", "-p", "do it", "--output-format", "stream-json", "--verbose",
		"--permission-mode", "bypassPermissions", "--disallowedTools", "AskUserQuestion"}
	tests := []struct {
		name string
		edit func(*agent.Launch)
		argv []string
	}{
		{"new session", func(l *agent.Launch) { l.NewSession = "11111111-2222-4333-8444-555555555555" },
			append(slices.Clone(common), "--session-id", "11111111-2222-4333-8444-555555555555",
				"--mcp-config", "/h/mcp.json", "--strict-mcp-config")},
		{"resume wins", func(l *agent.Launch) { l.NewSession = "x"; l.Resume = "sess-1" },
			append(slices.Clone(common), "--resume", "sess-1", "--mcp-config", "/h/mcp.json", "--strict-mcp-config")},
		{"no tools, model", func(l *agent.Launch) { l.MCPConfig = ""; l.Model = "opus" },
			append(slices.Clone(common), "--model", "opus")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := base
			tt.edit(&l)
			c, err := Command(l)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(c.Argv, tt.argv) {
				t.Errorf("argv = %q\nwant   %q", c.Argv, tt.argv)
			}
			env := agenttest.Env(c.Env)
			want := map[string]string{
				"HOME": "/h", "XDG_CACHE_HOME": "/h/.cache", "CLAUDE_CONFIG_DIR": "/acct", "IS_SANDBOX": "1",
				"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1", "CLAUDE_CODE_MAX_RETRIES": "0",
				"MCP_CONNECT_TIMEOUT_MS": "60000",
				"ANTHROPIC_BASE_URL":     "http://127.0.0.1:9/anthropic", "ANTHROPIC_API_KEY": agent.PlaceholderKey,
			}
			for k, v := range want {
				if env[k] != v {
					t.Errorf("env %s = %q, want %q", k, env[k], v)
				}
			}
			if len(env) != len(want) {
				t.Errorf("env = %q, want exactly %v", c.Env, want)
			}
			agenttest.CheckCommand(t, c, "secret", "")
		})
	}
}

func TestCommandNoBaseURL(t *testing.T) {
	c, err := Command(agent.Launch{Prompt: "p", Home: "/h", AccountDir: "/a"})
	if err != nil {
		t.Fatal(err)
	}
	// A subscription login in the account directory: no key may shadow it.
	if env := agenttest.Env(c.Env); env["ANTHROPIC_API_KEY"] != "" || env["ANTHROPIC_BASE_URL"] != "" {
		t.Errorf("env = %q", c.Env)
	}
}

func TestCommandErrors(t *testing.T) {
	for _, l := range []agent.Launch{{Home: "/h", AccountDir: "/a"}, {Prompt: "p", AccountDir: "/a"}, {Prompt: "p", Home: "/h"}} {
		if _, err := Command(l); err == nil {
			t.Errorf("Command(%+v) = nil error", l)
		}
	}
}
