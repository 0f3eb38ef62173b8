package tools

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"

	"drover/internal/fsutil"
)

// mcpConfig is Claude Code's --mcp-config format, reduced to one HTTP server.
type mcpConfig struct {
	MCPServers map[string]mcpServer `json:"mcpServers"`
}

type mcpServer struct {
	Type    string            `json:"type"`
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
	// AlwaysLoad makes Claude Code connect the server before its first
	// model request. Without it, -p connects in the background, and on a
	// busy host the model's first turn could come before drover's tools
	// (deliver, ask) were offered: the job then failed as not delivered.
	AlwaysLoad bool `json:"alwaysLoad"`
}

// WriteMCPConfig writes the agent's MCP configuration for the server at
// serverURL (for example http://127.0.0.1:PORT/mcp) to path, mode 0600. The
// token travels in this file only, never in argv, the environment or logs,
// so other users' ps and the job's output cannot show it. The file is
// written to a temporary name and renamed, so an agent never reads half of it.
func WriteMCPConfig(path, serverURL, token string) error {
	u, err := url.Parse(serverURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("tools: MCP server URL %q is not an http(s) URL", serverURL)
	}
	if token == "" {
		return errors.New("tools: empty token")
	}
	data, err := json.MarshalIndent(mcpConfig{MCPServers: map[string]mcpServer{
		ServerName: {Type: "http", URL: serverURL, Headers: map[string]string{"Authorization": "Bearer " + token}, AlwaysLoad: true},
	}}, "", "  ")
	if err != nil {
		return fmt.Errorf("tools: encode MCP config: %w", err)
	}
	if err := fsutil.WriteFileAtomic(path, append(data, '\n')); err != nil {
		return fmt.Errorf("tools: write MCP config: %w", err)
	}
	return nil
}
