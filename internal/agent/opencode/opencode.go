// Package opencode adapts opencode (`opencode run --format json`) to drover:
// its generated opencode.json, command line and the events it prints.
package opencode

import (
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"drover/internal/agent"
	"drover/internal/agent/facts"
	"drover/internal/tools"
)

// Name is the agent name jobs use.
const Name = facts.OpenCode

// keyEnv holds the key the generated provider sends (opencode reads it
// through {env:...} in its config): inside a sandbox only a placeholder.
const keyEnv = "DROVER_OPENCODE_API_KEY"

// Adapter is opencode as a drover agent.
func Adapter() agent.Adapter {
	return agent.Adapter{
		Name: Name, Command: Command, Parse: Parse,
		// `opencode auth login` keeps each provider's login in
		// $XDG_DATA_HOME/opencode/auth.json.
		LoggedIn: func(dir string, _ time.Time) error {
			return agent.HasLoginFile(filepath.Join(dir, "data", "opencode", "auth.json"))
		},
		Endpoint: agent.Endpoint{
			Upstream: "https://api.openai.com", Header: "Authorization", Prefix: "Bearer ",
			KeyEnv: keyEnv, BaseURLEnv: "DROVER_OPENCODE_BASE_URL", UpstreamEnv: "OPENAI_BASE_URL", Versions: []string{"v1"},
			Hosts: []string{"api.openai.com:443", "api.anthropic.com:443"},
		},
	}
}

type line struct {
	Type      string `json:"type"`
	SessionID string `json:"sessionID"`
	Part      struct {
		Text   string `json:"text"`
		Tool   string `json:"tool"`
		CallID string `json:"callID"`
		Reason string `json:"reason"`
		State  struct {
			Status string          `json:"status"`
			Input  json.RawMessage `json:"input"`
			Output string          `json:"output"`
			Error  string          `json:"error"`
		} `json:"state"`
		Tokens *struct {
			Input  int64 `json:"input"`
			Output int64 `json:"output"`
			Cache  struct {
				Read  int64 `json:"read"`
				Write int64 `json:"write"`
			} `json:"cache"`
		} `json:"tokens"`
		Cost float64 `json:"cost"`
	} `json:"part"`
	Error *struct {
		Name string `json:"name"`
		Data struct {
			Message    string `json:"message"`
			StatusCode int    `json:"statusCode"`
		} `json:"data"`
	} `json:"error"`
}

// Parse maps one `opencode run --format json` line to events.
func Parse(raw []byte) []agent.Event {
	var l line
	if err := json.Unmarshal(raw, &l); err != nil {
		return agent.Raw(raw)
	}
	p := l.Part
	switch l.Type {
	case "step_start":
		if l.SessionID != "" {
			return []agent.Event{{Kind: agent.EventSession, Session: l.SessionID}}
		}
		return nil
	case "text":
		return []agent.Event{{Kind: agent.EventText, Text: p.Text}}
	case "tool_use":
		// opencode prints a tool once, when it has finished.
		evs := []agent.Event{{Kind: agent.EventToolUse, Tool: p.Tool, ToolID: p.CallID, Input: p.State.Input}}
		if p.State.Status == "completed" || p.State.Status == "error" {
			out := p.State.Output
			if p.State.Status == "error" {
				out = p.State.Error
			}
			evs = append(evs, agent.Event{Kind: agent.EventToolResult, Tool: p.Tool, ToolID: p.CallID,
				Text: out, IsError: p.State.Status == "error"})
		}
		return evs
	case "step_finish":
		var evs []agent.Event
		if p.Tokens != nil {
			evs = append(evs, agent.Event{Kind: agent.EventUsage, Usage: &agent.Usage{
				InputTokens: p.Tokens.Input, OutputTokens: p.Tokens.Output,
				CacheReadTokens: p.Tokens.Cache.Read, CacheWriteTokens: p.Tokens.Cache.Write, CostUSD: p.Cost}})
		}
		if p.Reason == "stop" {
			evs = append(evs, agent.Event{Kind: agent.EventOutcome, Outcome: &agent.Outcome{OK: true}})
		}
		return evs
	case "error":
		if l.Error != nil {
			msg := l.Error.Data.Message
			if msg == "" {
				msg = l.Error.Name
			}
			if l.Error.Data.StatusCode != 0 {
				msg = fmt.Sprintf("API error %d: %s", l.Error.Data.StatusCode, msg)
			}
			return agent.Failed(Name, msg)
		}
	}
	return agent.Raw(raw)
}

// Command builds opencode's command line and its opencode.json. The config
// goes to the attempt's home (through OPENCODE_CONFIG), not the worktree,
// where it would end up in the job's commit; sessions live under the
// account directory so that -s finds them again.
func Command(l agent.Launch) (agent.Command, error) {
	if err := l.Check(Name); err != nil {
		return agent.Command{}, err
	}
	cfg, err := Config(l)
	if err != nil {
		return agent.Command{}, err
	}
	argv := []string{"opencode", "run", "--format", "json"}
	if l.Resume != "" {
		argv = append(argv, "-s", l.Resume)
	}
	argv = append(argv, l.Prompt)
	path := filepath.Join(l.Home, "opencode.json")
	env := []string{
		"HOME=" + l.Home,
		"XDG_CACHE_HOME=" + filepath.Join(l.Home, ".cache"),
		"XDG_DATA_HOME=" + filepath.Join(l.AccountDir, "data"),
		"OPENCODE_CONFIG=" + path,
		"OPENCODE_DISABLE_AUTOUPDATE=1",
		"OPENCODE_DISABLE_MODELS_FETCH=1",
	}
	return agent.Command{Argv: argv, Env: env, Files: []agent.File{{Path: path, Data: cfg}}}, nil
}

type config struct {
	Schema     string               `json:"$schema"`
	AutoUpdate bool                 `json:"autoupdate"`
	Share      string               `json:"share"`
	Permission map[string]string    `json:"permission"`
	Model      string               `json:"model,omitempty"`
	Provider   map[string]provider  `json:"provider,omitempty"`
	MCP        map[string]remoteMCP `json:"mcp,omitempty"`
}

type provider struct {
	NPM     string              `json:"npm"`
	Options map[string]string   `json:"options"`
	Models  map[string]struct{} `json:"models"`
}

type remoteMCP struct {
	Type    string            `json:"type"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

// Config is opencode.json for l: everything allowed (nobody can approve a
// prompt; the sandbox is the boundary), no updates or sharing, and with a
// base URL an OpenAI-compatible provider, whose key is only a placeholder.
func Config(l agent.Launch) ([]byte, error) {
	c := config{
		Schema: "https://opencode.ai/config.json",
		Share:  "disabled",
		// Nobody can approve a prompt, and a refused one ends the run: the
		// sandbox decides what the agent reaches (paths outside the worktree
		// included).
		Permission: map[string]string{"edit": "allow", "bash": "allow", "external_directory": "allow", "doom_loop": "allow", "webfetch": "allow"},
	}
	if l.BaseURL != "" {
		if l.Model == "" {
			return nil, errors.New("opencode: a custom endpoint needs a model name")
		}
		c.Provider = map[string]provider{"drover": {
			NPM:     "@ai-sdk/openai-compatible",
			Options: map[string]string{"baseURL": agent.JoinURL(l.BaseURL, "v1"), "apiKey": "{env:" + keyEnv + "}"},
			Models:  map[string]struct{}{l.Model: {}},
		}}
		c.Model = "drover/" + l.Model
	} else {
		c.Model = l.Model
	}
	if l.HasTools() {
		c.MCP = map[string]remoteMCP{tools.ServerName: {Type: "remote", URL: l.ToolURL,
			Headers: map[string]string{"Authorization": "Bearer " + l.ToolToken}}}
	}
	data, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return nil, fmt.Errorf("opencode: encode config: %w", err)
	}
	return append(data, '\n'), nil
}
