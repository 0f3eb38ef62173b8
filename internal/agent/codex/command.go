package codex

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"drover/internal/agent"
	"drover/internal/agent/facts"
	"drover/internal/tools"
)

// Name is the agent name jobs use.
const Name = facts.Codex

// Adapter is Codex as a drover agent.
func Adapter() agent.Adapter {
	return agent.Adapter{
		Name: Name, Command: Command, Parse: Parse,
		// `codex login` writes auth.json: a ChatGPT login's tokens or an
		// API key.
		LoggedIn: func(dir string, now time.Time) error {
			return agent.LoginFile(filepath.Join(dir, "auth.json"), now,
				[]string{"tokens.refresh_token", "tokens.access_token", "OPENAI_API_KEY"}, "", "")
		},
		Endpoint: agent.Endpoint{
			Upstream: "https://api.openai.com", Header: "Authorization", Prefix: "Bearer ",
			KeyEnv: keyEnv, BaseURLEnv: "DROVER_CODEX_BASE_URL", UpstreamEnv: "OPENAI_BASE_URL", Versions: []string{"v1"},
			// The API, and a ChatGPT login's backend and token refresh.
			Hosts: []string{"api.openai.com:443", "chatgpt.com:443", "auth.openai.com:443"},
		},
	}
}

// keyEnv is the variable the generated provider reads its key from; it only
// ever holds agent.PlaceholderKey.
const keyEnv = "DROVER_CODEX_API_KEY"

// Command builds the Codex command line and its config.toml (in
// l.AccountDir, which is CODEX_HOME: threads live there, so a resume must
// use the same account). Stdin must be closed (the sandbox gives the
// process /dev/null) or codex waits for more prompt.
func Command(l agent.Launch) (agent.Command, error) {
	if err := l.Check(Name); err != nil {
		return agent.Command{}, err
	}
	// drover decides where a job runs: a job without a repository works
	// in a plain directory, which codex otherwise refuses.
	argv := []string{"codex", "exec", "--json", "--skip-git-repo-check"}
	if l.Resume != "" {
		argv = append(argv, "resume", l.Resume)
	}
	argv = append(argv, l.Prompt)
	env := []string{"HOME=" + l.Home, "CODEX_HOME=" + l.AccountDir}
	if l.BaseURL != "" {
		env = append(env, keyEnv+"="+agent.PlaceholderKey)
	}
	return agent.Command{
		Argv:  argv,
		Env:   env,
		Files: []agent.File{{Path: filepath.Join(l.AccountDir, "config.toml"), Data: []byte(Config(l))}},
	}, nil
}

// Config is the config.toml for l: no approvals (nobody can give them), no
// update checks or analytics, and with a base URL a custom provider whose
// retries are off so that drover sees a limit at once.
func Config(l agent.Launch) string {
	var b strings.Builder
	b.WriteString("approval_policy = \"never\"\n")
	// drover's sandbox is the boundary; codex's own nested one cannot start
	// inside it.
	b.WriteString("sandbox_mode = \"danger-full-access\"\n")
	b.WriteString("check_for_update_on_startup = false\n")
	if l.Model != "" {
		fmt.Fprintf(&b, "model = %s\n", quote(l.Model))
	}
	if l.BaseURL != "" {
		b.WriteString("model_provider = \"drover\"\n")
	}
	b.WriteString("\n[analytics]\nenabled = false\n")
	if l.BaseURL != "" {
		fmt.Fprintf(&b, "\n[model_providers.drover]\nname = \"drover\"\nbase_url = %s\nenv_key = %s\n"+
			"wire_api = \"responses\"\nrequest_max_retries = 0\nstream_max_retries = 0\n",
			quote(agent.JoinURL(l.BaseURL, "v1")), quote(keyEnv))
	}
	if l.HasTools() {
		fmt.Fprintf(&b, "\n[mcp_servers.%s]\nurl = %s\nhttp_headers = { Authorization = %s }\n",
			tools.ServerName, quote(l.ToolURL), quote("Bearer "+l.ToolToken))
	}
	return b.String()
}

// quote writes s as a TOML basic string: JSON's escapes are a subset of
// TOML's.
func quote(s string) string {
	q, _ := json.Marshal(s) // a string always encodes
	return string(q)
}
