// Package gemini adapts Gemini CLI (`gemini -p --output-format
// stream-json`) to drover: its settings file, command line and the events
// it prints.
package gemini

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"time"

	"drover/internal/agent"
	"drover/internal/agent/facts"
	"drover/internal/tools"
)

// Name is the agent name jobs use.
const Name = facts.Gemini

// Adapter is Gemini CLI as a drover agent.
func Adapter() agent.Adapter {
	return agent.Adapter{
		Name: Name, Command: Command, Parse: Parse,
		Endpoint: agent.Endpoint{
			Upstream: "https://generativelanguage.googleapis.com", Header: "x-goog-api-key",
			KeyEnv: "GEMINI_API_KEY", BaseURLEnv: "GOOGLE_GEMINI_BASE_URL", UpstreamEnv: "GOOGLE_GEMINI_BASE_URL", Versions: []string{"v1beta", "v1"},
			Hosts: []string{"generativelanguage.googleapis.com:443", "oauth2.googleapis.com:443", "cloudcode-pa.googleapis.com:443"},
		},
		HomeDirs: []string{".gemini"},
		// "Sign in with Google" leaves ~/.gemini/oauth_creds.json (HOME is
		// the account directory).
		LoggedIn: func(dir string, now time.Time) error {
			return agent.LoginFile(filepath.Join(dir, ".gemini", "oauth_creds.json"), now,
				[]string{"refresh_token", "access_token"}, "expiry_date", "refresh_token")
		},
	}
}

type line struct {
	Type       string          `json:"type"`
	SessionID  string          `json:"session_id"`
	Role       string          `json:"role"`
	Content    string          `json:"content"`
	ToolName   string          `json:"tool_name"`
	ToolID     string          `json:"tool_id"`
	Parameters json.RawMessage `json:"parameters"`
	Status     string          `json:"status"`
	Output     string          `json:"output"`
	Error      *struct {
		Type    string `json:"type"`
		Message string `json:"message"`
	} `json:"error"`
	Stats *struct {
		InputTokens  int64 `json:"input_tokens"`
		OutputTokens int64 `json:"output_tokens"`
		Cached       int64 `json:"cached"`
	} `json:"stats"`
}

// Parse maps one stream-json line to events.
func Parse(raw []byte) []agent.Event {
	var l line
	if err := json.Unmarshal(raw, &l); err != nil {
		return agent.Raw(raw)
	}
	switch l.Type {
	case "init":
		if l.SessionID != "" {
			return []agent.Event{{Kind: agent.EventSession, Session: l.SessionID}}
		}
		return nil
	case "message":
		if l.Role == "assistant" {
			return []agent.Event{{Kind: agent.EventText, Text: l.Content}}
		}
		return nil // the prompt, echoed
	case "tool_use":
		return []agent.Event{{Kind: agent.EventToolUse, Tool: l.ToolName, ToolID: l.ToolID, Input: l.Parameters}}
	case "tool_result":
		e := agent.Event{Kind: agent.EventToolResult, ToolID: l.ToolID, Text: l.Output, IsError: l.Status == "error"}
		if l.Error != nil && l.Output == "" {
			e.Text = l.Error.Message
		}
		return []agent.Event{e}
	case "result":
		return resultEvents(l)
	}
	// Includes "error" lines: warnings and the message of a failed result,
	// which follows them.
	return agent.Raw(raw)
}

func resultEvents(l line) []agent.Event {
	var evs []agent.Event
	if l.Stats != nil {
		evs = append(evs, agent.Event{Kind: agent.EventUsage, Usage: &agent.Usage{
			InputTokens: l.Stats.InputTokens, OutputTokens: l.Stats.OutputTokens, CacheReadTokens: l.Stats.Cached}})
	}
	if l.Status == "success" {
		return append(evs, agent.Event{Kind: agent.EventOutcome, Outcome: &agent.Outcome{OK: true}})
	}
	msg := "result " + l.Status
	if l.Error != nil && l.Error.Message != "" {
		msg = l.Error.Message
	}
	return append(evs, agent.Failed(Name, msg)...)
}

// Command builds Gemini CLI's command line and settings file. HOME is the
// account directory because Gemini keeps its login, settings and sessions
// under ~/.gemini; --resume needs the same account.
func Command(l agent.Launch) (agent.Command, error) {
	if err := l.Check(Name); err != nil {
		return agent.Command{}, err
	}
	settings, err := Settings(l)
	if err != nil {
		return agent.Command{}, err
	}
	// --yolo: nobody can approve a tool call; the sandbox is the boundary.
	argv := []string{"gemini", "-p", l.Prompt, "--output-format", "stream-json", "--yolo", "--skip-trust"}
	argv = append(argv, l.SessionArgs()...)
	if l.Model != "" {
		argv = append(argv, "--model", l.Model)
	}
	env := []string{"HOME=" + l.AccountDir, "XDG_CACHE_HOME=" + filepath.Join(l.Home, ".cache")}
	if l.BaseURL != "" {
		env = append(env, "GOOGLE_GEMINI_BASE_URL="+l.BaseURL, "GEMINI_API_KEY="+agent.PlaceholderKey)
	}
	return agent.Command{Argv: argv, Env: env, Files: []agent.File{
		{Path: filepath.Join(l.AccountDir, ".gemini", "settings.json"), Data: settings}}}, nil
}

type settings struct {
	Security struct {
		Auth struct {
			SelectedType string `json:"selectedType"`
		} `json:"auth"`
	} `json:"security"`
	MCPServers map[string]httpMCP `json:"mcpServers,omitempty"`
}

type httpMCP struct {
	HTTPURL string            `json:"httpUrl"`
	Headers map[string]string `json:"headers"`
	Trust   bool              `json:"trust"`
}

// Settings is ~/.gemini/settings.json for l. Without a selected auth type
// Gemini CLI exits 41 in headless mode: an endpoint means the (placeholder)
// API key, otherwise the account's own Google login.
func Settings(l agent.Launch) ([]byte, error) {
	var s settings
	s.Security.Auth.SelectedType = "oauth-personal"
	if l.BaseURL != "" {
		s.Security.Auth.SelectedType = "gemini-api-key"
	}
	if l.HasTools() {
		s.MCPServers = map[string]httpMCP{tools.ServerName: {HTTPURL: l.ToolURL,
			Headers: map[string]string{"Authorization": "Bearer " + l.ToolToken}, Trust: true}}
	}
	data, err := json.MarshalIndent(s, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("gemini: encode settings: %w", err)
	}
	return append(data, '\n'), nil
}
