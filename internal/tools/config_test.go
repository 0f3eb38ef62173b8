package tools_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"drover/internal/tools"
)

func TestWriteMCPConfig(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "mcp.json")
	// An older, looser file is replaced, not reused with its mode.
	if err := os.WriteFile(path, []byte("{}"), 0o644); err != nil {
		t.Fatal(err)
	}
	token := tools.NewToken()
	url := "http://127.0.0.1:41234/mcp"
	if err := tools.WriteMCPConfig(path, url, token); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var cfg struct {
		MCPServers map[string]struct {
			Type       string            `json:"type"`
			URL        string            `json:"url"`
			Headers    map[string]string `json:"headers"`
			AlwaysLoad bool              `json:"alwaysLoad"`
		} `json:"mcpServers"`
	}
	if err := json.Unmarshal(data, &cfg); err != nil {
		t.Fatalf("config is not JSON: %v", err)
	}
	s, ok := cfg.MCPServers["drover"]
	if len(cfg.MCPServers) != 1 || !ok || s.Type != "http" || s.URL != url || s.Headers["Authorization"] != "Bearer "+token || !s.AlwaysLoad {
		t.Fatalf("config %s", data)
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Fatalf("leftover files: %v", entries)
	}
}

func TestWriteMCPConfigRefusesBadInput(t *testing.T) {
	dir := t.TempDir()
	token := tools.NewToken()
	for _, c := range []struct{ url, token string }{
		{"127.0.0.1:1/mcp", token}, {"ftp://127.0.0.1/mcp", token}, {"http:///mcp", token}, {"http://127.0.0.1:1/mcp", ""},
	} {
		err := tools.WriteMCPConfig(filepath.Join(dir, "mcp.json"), c.url, c.token)
		if err == nil {
			t.Errorf("%q accepted", c.url)
		} else if strings.Contains(err.Error(), token) {
			t.Errorf("error shows the token: %v", err)
		}
	}
	if err := tools.WriteMCPConfig(filepath.Join(dir, "missing", "mcp.json"), "http://127.0.0.1:1/mcp", token); err == nil ||
		strings.Contains(err.Error(), token) {
		t.Errorf("missing dir: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Fatalf("files left: %v", entries)
	}
}
