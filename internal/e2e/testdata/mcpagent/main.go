// Command mcpagent is a scripted agent for tests: it talks to drover's tool
// server with the real MCP Go SDK client, configured only from the file in
// DROVER_MCP_CONFIG (URL and Authorization header), as Claude Code would be.
//
//	mcpagent [repo]   first turn: context, write first.txt, ask "which color?" [red, blue];
//	                  once the context shows an approved answer: write answer.txt, deliver
//	                  (repo: a job with a repository; checkpoint before asking, and
//	                  first.txt must still be there when resumed in the kept worktree)
//	mcpagent partial  write partial.txt and end the turn without ask or deliver
//	mcpagent sparse DIR EDIT DELETE
//	                  sparse_add of a folder the repository lacks (refused), then of DIR;
//	                  print the cone the agent's git sees, append to EDIT, remove DELETE, deliver
package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mcpagent:", err)
		os.Exit(1)
	}
}

type config struct {
	MCPServers map[string]struct {
		URL     string            `json:"url"`
		Headers map[string]string `json:"headers"`
	} `json:"mcpServers"`
}

// headers adds the configured headers to every request.
type headers struct {
	h    map[string]string
	next http.RoundTripper
}

func (h headers) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range h.h {
		r.Header.Set(k, v)
	}
	return h.next.RoundTrip(r)
}

func run(args []string) error {
	repo := len(args) > 0 && args[0] == "repo"
	if len(args) > 0 && args[0] == "partial" {
		fmt.Println("writing partial.txt and stopping without deliver")
		return os.WriteFile("partial.txt", []byte("partial work\n"), 0o644)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	b, err := os.ReadFile(os.Getenv("DROVER_MCP_CONFIG"))
	if err != nil {
		return fmt.Errorf("read the MCP config: %w", err)
	}
	var cfg config
	if err := json.Unmarshal(b, &cfg); err != nil {
		return fmt.Errorf("parse the MCP config: %w", err)
	}
	srv, ok := cfg.MCPServers["drover"]
	if !ok {
		return fmt.Errorf("no drover server in the MCP config")
	}
	if srv.URL != os.Getenv("DROVER_TOOLS_URL") {
		return fmt.Errorf("config URL %s differs from DROVER_TOOLS_URL %s", srv.URL, os.Getenv("DROVER_TOOLS_URL"))
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "mcpagent", Version: "0"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   srv.URL,
		HTTPClient: &http.Client{Transport: headers{srv.Headers, http.DefaultTransport}},
		MaxRetries: -1,
	}, nil)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer cs.Close()

	var jc struct {
		Questions []struct {
			Question string `json:"question"`
			Answer   *struct {
				Text string `json:"text"`
			} `json:"answer"`
		} `json:"questions"`
	}
	text, err := call(ctx, cs, "context", map[string]any{})
	if err != nil {
		return err
	}
	if err := json.Unmarshal([]byte(text), &jc); err != nil {
		return fmt.Errorf("context is not JSON: %w: %s", err, text)
	}
	fmt.Printf("context: %d question(s)\n", len(jc.Questions))
	if len(args) == 4 && args[0] == "sparse" {
		return widen(ctx, cs, args[1], args[2], args[3])
	}
	if h := os.Getenv("DROVER_HISTORY"); h != "" {
		b, err := os.ReadFile(h)
		if err != nil {
			return fmt.Errorf("read DROVER_HISTORY: %w", err)
		}
		fmt.Printf("history: %d bytes\n", len(b))
	}
	for _, q := range jc.Questions {
		if q.Answer == nil {
			continue
		}
		if _, err := os.Stat("first.txt"); err != nil && repo {
			return fmt.Errorf("the first turn's file is gone: %w", err)
		}
		if err := os.WriteFile("answer.txt", []byte(q.Answer.Text+"\n"), 0o644); err != nil {
			return err
		}
		fmt.Printf("answer: %s\n", q.Answer.Text)
		_, err := call(ctx, cs, "deliver", map[string]any{"summary": "done"})
		return err
	}
	if err := os.WriteFile("first.txt", []byte("first turn\n"), 0o644); err != nil {
		return err
	}
	if repo {
		if _, err := call(ctx, cs, "checkpoint", map[string]any{"message": "first file"}); err != nil {
			return err
		}
	}
	_, err = call(ctx, cs, "ask", map[string]any{"question": "which color?", "choices": []string{"red", "blue"}})
	return err
}

// widen is the sparse mode's turn.
func widen(ctx context.Context, cs *mcp.ClientSession, dir, edit, del string) error {
	if _, err := call(ctx, cs, "sparse_add", map[string]any{"paths": []string{"no/such/folder"}}); err != nil {
		fmt.Printf("sparse_add no/such/folder: %v\n", err)
	} else {
		return fmt.Errorf("sparse_add of a folder the repository lacks was accepted")
	}
	text, err := call(ctx, cs, "sparse_add", map[string]any{"paths": []string{dir}})
	if err != nil {
		return err
	}
	fmt.Println(text)
	out, err := exec.CommandContext(ctx, "git", "sparse-checkout", "list").CombinedOutput()
	fmt.Printf("agent cone: %s (%v)\n", strings.Join(strings.Fields(string(out)), " "), err)
	f, err := os.OpenFile(edit, os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("the widened part lacks %s: %w", edit, err)
	}
	_, err = f.WriteString("edited by the agent\n")
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if err := os.Remove(del); err != nil {
		return err
	}
	_, err = call(ctx, cs, "deliver", map[string]any{"summary": "widened and edited"})
	return err
}

// call calls a tool and returns its text; a tool error is an error.
func call(ctx context.Context, cs *mcp.ClientSession, name string, args map[string]any) (string, error) {
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "", fmt.Errorf("%s: %w", name, err)
	}
	var text string
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			text += t.Text
		}
	}
	if res.IsError {
		return "", fmt.Errorf("%s: tool error: %s", name, text)
	}
	fmt.Printf("%s: ok\n", name)
	return text, nil
}
