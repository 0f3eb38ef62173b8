package agent

import (
	"fmt"
	"strings"
)

// PlaceholderKey stands in for an API key inside the sandbox: the CLIs
// refuse to start without one, but the real key stays with the egress proxy,
// which replaces it on the way out.
const PlaceholderKey = "drover-placeholder-key"

// Launch is what an adapter needs to build its CLI's command line. Every
// path is as the CLI sees it inside the sandbox.
type Launch struct {
	Prompt string
	// Home is the attempt's own home directory (HOME, caches, generated
	// config); AccountDir the account's config directory, which holds the
	// CLI's login and sessions and so outlives the attempt.
	Home       string
	AccountDir string
	// NewSession is the id to give a new session, for CLIs that accept one;
	// Resume is the session to continue instead.
	NewSession string
	Resume     string
	// BaseURL is the model API's root (the egress proxy's credential
	// endpoint, or an operator's gateway), without /v1: the adapters add
	// the path each CLI expects. Empty keeps the CLI's default endpoint and
	// its own login in AccountDir, and sets no placeholder key that would
	// shadow that login.
	BaseURL string
	// Model overrides the CLI's default model; empty keeps it.
	Model string
	// ToolURL and ToolToken reach drover's MCP tool server. The token only
	// ever goes into a 0600 file, never argv or the environment.
	ToolURL   string
	ToolToken string
	// MCPConfig is the path of a file written by tools.WriteMCPConfig, for
	// CLIs that take one on the command line (Claude Code).
	MCPConfig string
}

// HasTools says whether the attempt has a tool server to configure.
func (l Launch) HasTools() bool { return l.ToolURL != "" && l.ToolToken != "" }

// JoinURL joins base and a path without doubling or dropping the slash.
func JoinURL(base, path string) string {
	return strings.TrimRight(base, "/") + "/" + strings.TrimLeft(path, "/")
}

// Check reports what l lacks to start cli: every adapter needs a prompt, a
// home and an account directory.
func (l Launch) Check(cli string) error {
	switch {
	case l.Prompt == "":
		return fmt.Errorf("%s: empty prompt", cli)
	case l.Home == "" || l.AccountDir == "":
		return fmt.Errorf("%s: no home or account directory", cli)
	}
	return nil
}

// SessionArgs are the flags Claude Code and Gemini CLI share for sessions:
// --resume ID continues one, --session-id ID names a new one.
func (l Launch) SessionArgs() []string {
	switch {
	case l.Resume != "":
		return []string{"--resume", l.Resume}
	case l.NewSession != "":
		return []string{"--session-id", l.NewSession}
	}
	return nil
}
