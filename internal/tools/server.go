package tools

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"drover/internal/auth"
)

// ServerName is the MCP server's name; agents prefix the tools with it.
const ServerName = "drover"

// Path is where the MCP endpoint is served.
const Path = "/mcp"

// TokenPrefix marks a per-attempt tool token.
const TokenPrefix = "drv_t_"

// NewToken returns a fresh per-attempt tool token.
func NewToken() string { return auth.NewToken(TokenPrefix) }

// maxBody bounds a request body: the largest arguments (a 64 KiB summary,
// escaped) fit many times over, and the SDK answers 413 beyond it.
const maxBody = 1 << 20

// shutdownGrace bounds how long Serve waits for requests in flight to end.
const shutdownGrace = 5 * time.Second

// Options tune a Server; the zero value is fine.
type Options struct {
	Logger  *slog.Logger // nil discards; the token is never logged
	Version string       // reported to clients; "dev" when empty
}

// Server serves one attempt's tools as the MCP server "drover" over
// streamable HTTP, to clients that present the attempt's bearer token.
type Server struct {
	tools     *Tools
	tokenHash [sha256.Size]byte
	log       *slog.Logger
	handler   http.Handler
}

// NewServer returns the MCP server for t, accepting only token.
func NewServer(t *Tools, token string, opts Options) (*Server, error) {
	if t == nil {
		return nil, errors.New("tools: nil Tools")
	}
	// auth.BearerToken refuses longer tokens, so such a token could never match.
	if token == "" || len(token) > 256 {
		return nil, errors.New("tools: token must be 1 to 256 bytes")
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	version := opts.Version
	if version == "" {
		version = "dev"
	}
	ms := mcp.NewServer(&mcp.Implementation{Name: ServerName, Version: version}, &mcp.ServerOptions{
		Logger: log,
		Instructions: "drover runs this job unattended: nobody reads your messages while it runs. " +
			"Use checkpoint to publish work in progress, ask when you need a person's decision (then stop), " +
			"and deliver when the job is done; a turn that ends without deliver or ask fails.",
	})
	for _, d := range Definitions() {
		ms.AddTool(&mcp.Tool{
			Name:        d.Name,
			Description: d.Description,
			InputSchema: d.InputSchema,
			Annotations: annotations(d),
		}, toolHandler(t, d.Name))
	}
	// Stateless: the attempt's state lives in Tools, not in MCP sessions,
	// so there is nothing to expire or lose when a client reconnects.
	h := mcp.NewStreamableHTTPHandler(func(*http.Request) *mcp.Server { return ms }, &mcp.StreamableHTTPOptions{
		Stateless:           true,
		Logger:              log,
		MaxRequestBodyBytes: maxBody,
	})
	s := &Server{tools: t, tokenHash: sha256.Sum256([]byte(token)), log: log}
	s.handler = s.authorize(h)
	return s, nil
}

// Handler returns the HTTP handler: the bearer check, then MCP at Path.
func (s *Server) Handler() http.Handler { return s.handler }

// Serve serves on ln until ctx ends, then stops: requests in flight see
// their context cancelled and get shutdownGrace to finish. It closes ln and
// returns nil after a stop caused by ctx.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s.handler,
		ReadHeaderTimeout: 10 * time.Second,
		BaseContext:       func(net.Listener) context.Context { return ctx },
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return fmt.Errorf("tools: serve: %w", err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), shutdownGrace)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	if err := <-done; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("tools: serve: %w", err)
	}
	return nil
}

// authorize refuses, before anything else runs, a request without the
// attempt's token. Hashing both sides makes the comparison constant-time
// in the token's length too.
func (s *Server) authorize(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tok, err := auth.BearerToken(r.Header.Get("Authorization"))
		if err == nil {
			got := sha256.Sum256([]byte(tok))
			if subtle.ConstantTimeCompare(got[:], s.tokenHash[:]) != 1 {
				err = errors.New("wrong token")
			}
		}
		if err != nil {
			s.log.Warn("tool request refused", "remote", r.RemoteAddr, "method", r.Method, "path", r.URL.Path, "why", err.Error())
			w.Header().Set("WWW-Authenticate", `Bearer realm="drover"`)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if r.URL.Path != Path {
			http.NotFound(w, r)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// toolHandler adapts Tools.Call to MCP: its errors become tool errors
// (isError results the agent reads), never protocol failures.
func toolHandler(t *Tools, name string) mcp.ToolHandler {
	return func(ctx context.Context, req *mcp.CallToolRequest) (*mcp.CallToolResult, error) {
		text, err := t.Call(ctx, name, req.Params.Arguments)
		if err != nil {
			res := &mcp.CallToolResult{}
			res.SetError(err)
			return res, nil
		}
		return &mcp.CallToolResult{Content: []mcp.Content{&mcp.TextContent{Text: text}}}, nil
	}
}

func annotations(d Definition) *mcp.ToolAnnotations {
	no := false
	return &mcp.ToolAnnotations{
		ReadOnlyHint:    d.ReadOnly,
		IdempotentHint:  d.ReadOnly,
		DestructiveHint: &no, // nothing is lost: publications only add commits
		OpenWorldHint:   &no,
	}
}
