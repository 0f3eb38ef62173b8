package claude

import (
	"path/filepath"
	"time"

	"drover/internal/agent"
	"drover/internal/agent/facts"
)

// Name is the agent name jobs use.
const Name = facts.Claude

// Adapter is Claude Code as a drover agent.
func Adapter() agent.Adapter {
	return agent.Adapter{
		Name: Name, Command: Command, Parse: Parse,
		// Claude Code keeps its OAuth login in .credentials.json; an
		// expired access token is refreshed while a refresh token is there.
		LoggedIn: func(dir string, now time.Time) error {
			return agent.LoginFile(filepath.Join(dir, ".credentials.json"), now,
				[]string{"claudeAiOauth.accessToken", "claudeAiOauth.refreshToken"}, "claudeAiOauth.expiresAt", "claudeAiOauth.refreshToken")
		},
		Endpoint: agent.Endpoint{
			Upstream: "https://api.anthropic.com", Header: "x-api-key",
			KeyEnv: "ANTHROPIC_API_KEY", BaseURLEnv: "ANTHROPIC_BASE_URL", UpstreamEnv: "ANTHROPIC_BASE_URL", Versions: []string{"v1"},
			// The API, and the login's token refresh.
			Hosts: []string{"api.anthropic.com:443", "console.anthropic.com:443", "claude.ai:443"},
		},
	}
}

// Command builds Claude Code's command line for l. A new session gets
// l.NewSession as its id (so drover knows it before the CLI prints it); a
// resumed one continues l.Resume, which only works from the same working
// directory, because the session lives under the account's projects/<cwd>.
func Command(l agent.Launch) (agent.Command, error) {
	if err := l.Check(Name); err != nil {
		return agent.Command{}, err
	}
	argv := []string{"claude", "-p", l.Prompt,
		"--output-format", "stream-json", "--verbose",
		// Nobody can answer a permission prompt; the sandbox is the boundary.
		"--permission-mode", "bypassPermissions",
		// Questions go through drover's ask tool, never the terminal.
		"--disallowedTools", "AskUserQuestion",
	}
	argv = append(argv, l.SessionArgs()...)
	if l.MCPConfig != "" {
		argv = append(argv, "--mcp-config", l.MCPConfig, "--strict-mcp-config")
	}
	if l.Model != "" {
		argv = append(argv, "--model", l.Model)
	}
	env := []string{
		"HOME=" + l.Home,
		"XDG_CACHE_HOME=" + filepath.Join(l.Home, ".cache"),
		"CLAUDE_CONFIG_DIR=" + l.AccountDir,
		// bypassPermissions refuses to run as root outside a declared sandbox.
		"IS_SANDBOX=1",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		// drover decides about retries (and limits); the CLI's own back-off
		// would hide a rate limit for minutes.
		"CLAUDE_CODE_MAX_RETRIES=0",
		// How long the CLI waits for drover's MCP server (alwaysLoad in
		// tools.WriteMCPConfig) before its first turn: the CLI's 5 s
		// can pass on a busy host before the local server has answered.
		"MCP_CONNECT_TIMEOUT_MS=60000",
	}
	if l.BaseURL != "" {
		env = append(env, "ANTHROPIC_BASE_URL="+l.BaseURL, "ANTHROPIC_API_KEY="+agent.PlaceholderKey)
	}
	return agent.Command{Argv: argv, Env: env}, nil
}
