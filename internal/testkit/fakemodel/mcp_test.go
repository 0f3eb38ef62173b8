package fakemodel_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"drover/internal/agent"
	"drover/internal/agent/claude"
	"drover/internal/testkit"
	"drover/internal/testkit/fakemodel"
	"drover/internal/tools"
)

const (
	mcpServer = "drover"
	mcpToken  = "mcp-token-42"
)

// fakeMCP is a minimal MCP server over streamable HTTP (JSON responses
// only) with one tool, echo, recording the calls it gets.
type fakeMCP struct {
	URL   string
	slow  time.Duration // how long initialize takes to answer
	mu    sync.Mutex
	calls []map[string]any // arguments of each tools/call of echo
}

func newFakeMCP(t *testing.T) *fakeMCP {
	m := &fakeMCP{}
	srv := httptest.NewServer(http.HandlerFunc(m.serve))
	t.Cleanup(srv.Close)
	m.URL = srv.URL + "/mcp"
	return m
}

func (m *fakeMCP) Calls() []map[string]any {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.calls)
}

func (m *fakeMCP) serve(w http.ResponseWriter, r *http.Request) {
	if r.Header.Get("Authorization") != "Bearer "+mcpToken {
		http.Error(w, "bad token", http.StatusUnauthorized)
		return
	}
	switch r.Method {
	case http.MethodPost:
	case http.MethodDelete:
		return
	default:
		// No server-to-client stream; clients accept 405 for the GET.
		http.Error(w, "no stream", http.StatusMethodNotAllowed)
		return
	}
	body, _ := io.ReadAll(r.Body)
	var msg struct {
		ID     json.RawMessage `json:"id"`
		Method string          `json:"method"`
		Params struct {
			ProtocolVersion string         `json:"protocolVersion"`
			Name            string         `json:"name"`
			Arguments       map[string]any `json:"arguments"`
		} `json:"params"`
	}
	if err := json.Unmarshal(body, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	if msg.ID == nil { // a notification
		w.WriteHeader(http.StatusAccepted)
		return
	}
	var result any
	switch msg.Method {
	case "initialize":
		time.Sleep(m.slow) // a busy host's server, not a wait for a condition
		w.Header().Set("Mcp-Session-Id", "fake-session")
		result = map[string]any{"protocolVersion": msg.Params.ProtocolVersion,
			"capabilities": map[string]any{"tools": map[string]any{}},
			"serverInfo":   map[string]any{"name": "fake", "version": "1.0.0"}}
	case "tools/list":
		result = map[string]any{"tools": []any{map[string]any{
			"name": "echo", "description": "Echoes the text back.",
			"inputSchema": map[string]any{"type": "object",
				"properties": map[string]any{"text": map[string]any{"type": "string"}}, "required": []string{"text"}}}}}
	case "tools/call":
		m.mu.Lock()
		m.calls = append(m.calls, msg.Params.Arguments)
		m.mu.Unlock()
		text, _ := msg.Params.Arguments["text"].(string)
		result = map[string]any{"content": []any{map[string]any{"type": "text", "text": "echoed:" + text}}}
	case "ping":
		result = map[string]any{}
	default:
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": msg.ID,
			"error": map[string]any{"code": -32601, "message": "method not found"}})
		return
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(map[string]any{"jsonrpc": "2.0", "id": msg.ID, "result": result})
}

// TestRealCLIsMCP configures each CLI with an HTTP MCP server the way
// drover's adapters do and has the model call its tool by the Claude Code
// name: the fake must find the CLI's own name for it (MCPToolName), and the
// call must reach the server and its result come back.
func TestRealCLIsMCP(t *testing.T) {
	for _, c := range cliCases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			bin := testkit.AgentCLI(t, c.name)
			mcp := newFakeMCP(t)
			turns := []fakemodel.Turn{
				fakemodel.CallTool("mcp__"+mcpServer+"__echo", map[string]any{"text": "ping"}),
				fakemodel.Text("done"),
			}
			f, r := c.start(t, setup{bin: bin, work: t.TempDir(), home: t.TempDir(), turns: turns, mcp: mcp})
			out := runCLI(t, r)
			var offered []string
			for _, req := range f.Requests() {
				for _, name := range req.Tools {
					if strings.Contains(name, "echo") && !slices.Contains(offered, name) {
						offered = append(offered, name)
					}
				}
			}
			want := fakemodel.MCPToolName(c.name, mcpServer, "echo")
			if !slices.Equal(offered, []string{want}) {
				t.Errorf("MCP tool offered as %q; want %q", offered, want)
			}
			checkEchoed(t, f, mcp, out)
		})
	}
}

// TestClaudeWaitsForDroversTools runs Claude Code as drover's adapter
// launches it (its command, tools.WriteMCPConfig's file) against an MCP
// server that takes seconds to answer initialize, as drover's can on a busy
// host: the tool the model calls in its first turn must reach the server.
// Connecting in the background, the CLI sent that turn without it, and a
// job whose agent delivered at once failed as not delivered.
func TestClaudeWaitsForDroversTools(t *testing.T) {
	t.Parallel()
	bin := testkit.AgentCLI(t, "claude")
	mcp := newFakeMCP(t)
	mcp.slow = 3 * time.Second
	f := fakemodel.NewFakeAnthropic(t, []fakemodel.Turn{
		fakemodel.CallTool("mcp__"+mcpServer+"__echo", map[string]any{"text": "ping"}),
		fakemodel.Text("done"),
	})
	home := t.TempDir()
	cfg := filepath.Join(home, "mcp.json")
	if err := tools.WriteMCPConfig(cfg, mcp.URL, mcpToken); err != nil {
		t.Fatal(err)
	}
	c, err := claude.Command(agent.Launch{Prompt: "do the task", Home: home,
		AccountDir: filepath.Join(home, "claude"), MCPConfig: cfg, BaseURL: f.URL})
	if err != nil {
		t.Fatal(err)
	}
	argv := append([]string{filepath.Join(bin, "claude")}, c.Argv[1:]...)
	out := runCLI(t, run{argv: argv, env: append(baseEnv(home), c.Env...), dir: t.TempDir()})
	checkEchoed(t, f, mcp, out)
}

// checkEchoed: the model's one call of echo reached the server, and the
// server's answer came back to the model.
func checkEchoed(t *testing.T, f *fakemodel.FakeServer, mcp *fakeMCP, out string) {
	t.Helper()
	if calls := mcp.Calls(); len(calls) != 1 || calls[0]["text"] != "ping" {
		t.Errorf("MCP server got calls %v; want one with text=ping", calls)
	}
	if res, ok := f.Result(0); !ok || !strings.Contains(res.Output, "echoed:ping") {
		t.Errorf("tool result = %+v, %v; want the server's answer", res, ok)
	}
	if t.Failed() {
		t.Logf("requests:\n%s\noutput:\n%s", f.Dump(), out)
	}
}
