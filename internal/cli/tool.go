package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"
	"github.com/spf13/cobra"

	"drover/internal/tools"
)

// `drover tool` is a tiny client of an attempt's tool server, for exec
// agents (shell scripts) inside the sandbox. It reads the server's URL and
// token from the file in $DROVER_MCP_CONFIG, as an MCP-speaking agent does:
// the token is never an argument or an environment variable.

// exitAsked is what `drover tool ask` exits with after asking, so that a
// script under `set -e` ends its turn there.
const exitAsked = 3

// toolTimeout bounds one tool call; a publication is part of ask,
// checkpoint and deliver.
const toolTimeout = 5 * time.Minute

func (a *app) toolCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tool ask|checkpoint|deliver|context|sparse",
		Short: "Call drover's tools from inside a job (for exec agents' scripts)",
		Long: `Call the tools of the attempt this command runs in: a job submitted with
--tools has drover on its PATH and its tool server in $DROVER_MCP_CONFIG (the
file holds the token; it is never an argument). A resumed attempt runs the
script again from the start, so ask is made to be called again: when the same
question already has an approved answer, it prints the answer and exits 0;
otherwise it asks, says so on stderr and exits 3, which ends a 'set -e'
script's turn: the job waits for 'drover answer' and then runs again.

  answer=$(drover tool ask "Add a changelog entry?" --choice yes --choice no)
  drover tool checkpoint "work in progress"
  drover tool sparse add services/api
  drover tool deliver "what was done"`,
		Args: noArgs,
		RunE: showHelp,
	}
	var choices []string
	var expiresIn time.Duration
	ask := &cobra.Command{
		Use:   "ask QUESTION [--choice C]... [--expires-in D]",
		Short: "Print the approved answer to QUESTION, or ask it and exit 3",
		Args:  exactArgs("QUESTION"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if expiresIn < 0 || expiresIn%time.Second != 0 {
				return usagef("--expires-in %s: want a whole number of seconds, 0 for no expiry", expiresIn)
			}
			return a.toolAsk(cmd.Context(), args[0], choices, int64(expiresIn/time.Second))
		},
	}
	ask.Flags().StringArrayVar(&choices, "choice", nil, "a choice to offer (repeatable)")
	ask.Flags().DurationVar(&expiresIn, "expires-in", 0, "fail the job if nobody answers within this time (e.g. 2h; default: no expiry)")
	one := func(name, use, short, key string) *cobra.Command {
		return &cobra.Command{
			Use:   use,
			Short: short,
			Args:  exactArgs(strings.ToUpper(key)),
			RunE: func(cmd *cobra.Command, args []string) error {
				text, err := a.callTool(cmd.Context(), name, map[string]any{key: args[0]})
				if err != nil {
					return err
				}
				fprintf(a.env.Stderr, "drover tool %s: %s\n", name, oneLine(text))
				return nil
			},
		}
	}
	sparse := &cobra.Command{
		Use:   "sparse add PATH...",
		Short: "Widen the job's sparse checkout",
		Args:  noArgs,
		RunE:  showHelp,
	}
	sparse.AddCommand(&cobra.Command{
		Use:   "add PATH...",
		Short: "Check out more folders of the repository (a job submitted with --sparse)",
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usagef("want PATH..., the folders to add")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			text, err := a.callTool(cmd.Context(), tools.ToolSparseAdd, map[string]any{"paths": args})
			if err != nil {
				return err
			}
			fprintf(a.env.Stderr, "drover tool sparse add: %s\n", oneLine(text))
			return nil
		},
	})
	cmd.AddCommand(ask, sparse,
		one(tools.ToolCheckpoint, "checkpoint MESSAGE", "Publish the work in progress as a commit of the job", "message"),
		one(tools.ToolDeliver, "deliver SUMMARY", "Publish the work and complete the job with SUMMARY", "summary"),
		&cobra.Command{
			Use:   "context",
			Short: "Print the job as it stands (prompt, repository, questions and answers) as JSON",
			Args:  noArgs,
			RunE: func(cmd *cobra.Command, _ []string) error {
				text, err := a.callTool(cmd.Context(), tools.ToolContext, map[string]any{})
				if err != nil {
					return err
				}
				return toolData(a.env.Stdout, string(jsonSafe([]byte(text))))
			},
		})
	return cmd
}

// toolAsk prints the approved answer to question if the job has one, else
// asks it.
func (a *app) toolAsk(ctx context.Context, question string, choices []string, expiresInSeconds int64) error {
	text, err := a.callTool(ctx, tools.ToolContext, map[string]any{})
	if err != nil {
		return err
	}
	var jc tools.JobContext
	if err := json.Unmarshal([]byte(text), &jc); err != nil {
		return fmt.Errorf("read the job's context: %w", err)
	}
	for i := len(jc.Questions) - 1; i >= 0; i-- {
		if q := jc.Questions[i]; q.Question == question && q.Answer != nil && q.Answer.Approved {
			return toolData(a.env.Stdout, q.Answer.Text)
		}
	}
	args := map[string]any{"question": question}
	if len(choices) > 0 {
		args["choices"] = choices
	}
	if expiresInSeconds > 0 {
		args["expires_in_seconds"] = expiresInSeconds
	}
	if _, err := a.callTool(ctx, tools.ToolAsk, args); err != nil {
		return err
	}
	fprintf(a.env.Stderr, "drover tool ask: asked %q; the job waits for an answer and runs again with it\n", question)
	return exitCode(exitAsked)
}

// toolData prints what a tool answered for the script that called it, as
// it is: an answer is the script's data, not text for a terminal.
func toolData(w io.Writer, s string) error {
	_, err := fmt.Fprintf(w, "%s\n", s)
	return err
}

// callTool calls one tool of the attempt's server and returns its text; a
// tool's error is an error.
func (a *app) callTool(ctx context.Context, name string, args map[string]any) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, toolTimeout)
	defer cancel()
	srv, err := a.toolServer()
	if err != nil {
		return "", err
	}
	c := mcp.NewClient(&mcp.Implementation{Name: "drover-tool", Version: "dev"}, nil)
	cs, err := c.Connect(ctx, &mcp.StreamableClientTransport{
		Endpoint:   srv.URL,
		HTTPClient: &http.Client{Transport: headerTransport{srv.Headers, http.DefaultTransport}},
		MaxRetries: -1,
	}, nil)
	if err != nil {
		return "", fmt.Errorf("connect to the tools at %s: %w", srv.URL, err)
	}
	defer cs.Close()
	res, err := cs.CallTool(ctx, &mcp.CallToolParams{Name: name, Arguments: args})
	if err != nil {
		return "", fmt.Errorf("call the %s tool: %w", name, err)
	}
	var text strings.Builder
	for _, c := range res.Content {
		if t, ok := c.(*mcp.TextContent); ok {
			text.WriteString(t.Text)
		}
	}
	if res.IsError {
		return "", fmt.Errorf("the %s tool refused: %s", name, text.String())
	}
	return text.String(), nil
}

// toolServerConfig is the one server of the MCP config the runner writes.
type toolServerConfig struct {
	URL     string            `json:"url"`
	Headers map[string]string `json:"headers"`
}

func (a *app) toolServer() (toolServerConfig, error) {
	path := a.env.Getenv("DROVER_MCP_CONFIG")
	if path == "" {
		return toolServerConfig{}, errors.New("$DROVER_MCP_CONFIG is not set: drover tool works inside a job submitted with --tools")
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return toolServerConfig{}, fmt.Errorf("read the tools' config: %w", err)
	}
	var cfg struct {
		MCPServers map[string]toolServerConfig `json:"mcpServers"`
	}
	if err := json.Unmarshal(b, &cfg); err != nil {
		return toolServerConfig{}, fmt.Errorf("read the tools' config %s: %w", path, err)
	}
	srv, ok := cfg.MCPServers[tools.ServerName]
	if !ok || srv.URL == "" {
		return toolServerConfig{}, fmt.Errorf("the tools' config %s names no %s server", path, tools.ServerName)
	}
	return srv, nil
}

// headerTransport adds the configured headers (the token) to every request.
type headerTransport struct {
	h    map[string]string
	next http.RoundTripper
}

func (t headerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	r = r.Clone(r.Context())
	for k, v := range t.h {
		r.Header.Set(k, v)
	}
	return t.next.RoundTrip(r)
}
