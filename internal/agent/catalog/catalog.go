// Package catalog is the one list of the agents drover knows: exec, the
// vendor CLIs and the native agent. The hub, the runner, the runner's
// accounts and the CLI all read it, so that adding an agent touches this
// file (and the agent's own package) only.
package catalog

import (
	"slices"

	"drover/internal/agent"
	"drover/internal/agent/claude"
	"drover/internal/agent/cliagent"
	"drover/internal/agent/codex"
	agentexec "drover/internal/agent/exec"
	"drover/internal/agent/gemini"
	"drover/internal/agent/native"
	"drover/internal/agent/opencode"
)

// Kind is how an agent runs.
type Kind int

const (
	// Command: the job's arguments are a command line, run as is; no
	// account.
	Command Kind = iota
	// CLI: a vendor CLI (package cliagent), under one of the runner's
	// accounts; the job's arguments are its prompt.
	CLI
	// Native: drover's own model loop (package native), under a native
	// account (a model provider); the job's arguments are its prompt.
	Native
)

// Entry is one agent of the catalogue.
type Entry struct {
	Name string
	Kind Kind
	// Adapter is the vendor CLI's adapter (Kind CLI only).
	Adapter *agent.Adapter
	// Package is the npm package a vendor CLI ships in.
	Package string
	// KeyVar is the variable an API key for the agent is usually found in
	// (the demo reads it).
	KeyVar string
	// Root are the instruction files at the worktree's root the agent's
	// prompt holds besides AGENTS.md.
	Root []string
	Caps agent.Capabilities
}

// Accounts says whether the agent runs under one of the runner's accounts.
func (e Entry) Accounts() bool { return e.Kind != Command }

// Prompt says whether a job's arguments are a prompt (else a command).
func (e Entry) Prompt() bool { return e.Kind != Command }

// RootFiles are the instruction files at the worktree's root the agent's
// prompt holds besides AGENTS.md.
func (e Entry) RootFiles() []string { return e.Root }

// Capabilities are what the agent can do beyond running an attempt.
func (e Entry) Capabilities() agent.Capabilities { return e.Caps }

// Available says whether a runner whose agents are searched for on path
// can run the agent: a vendor CLI must be installed there.
func (e Entry) Available(path string) error {
	if e.Kind == CLI {
		_, err := agent.Locate(e.Name, path)
		return err
	}
	return nil
}

// Config is what a runner's operator decides for its agents.
type Config struct {
	// Path is the search path for the vendor CLIs (PATH-style).
	Path string
	// Env holds the operator's endpoint variables (Endpoint.UpstreamEnv,
	// e.g. ANTHROPIC_BASE_URL) by name.
	Env map[string]string
	// Models overrides the model per agent name.
	Models map[string]string
}

// New is the agent of e as cfg configures it.
func (e Entry) New(cfg Config) agent.Agent {
	switch e.Kind {
	case Native:
		return native.New(native.Config{Model: cfg.Models[e.Name]})
	case CLI:
		return cliagent.New(*e.Adapter, cliagent.Config{
			Path:     cfg.Path,
			Upstream: cfg.Env[e.Adapter.Endpoint.UpstreamEnv],
			Model:    cfg.Models[e.Name],
		})
	}
	return agentexec.New()
}

func cli(ad agent.Adapter, pkg, keyVar string) Entry {
	return Entry{Name: ad.Name, Kind: CLI, Adapter: &ad, Package: pkg, KeyVar: keyVar, Root: ad.RootFiles, Caps: ad.Caps}
}

// All is the catalogue, in the order drover lists agents: exec first, then
// the vendor CLIs, then native.
func All() []Entry {
	return []Entry{
		{Name: agentexec.Name, Kind: Command},
		cli(claude.Adapter(), "@anthropic-ai/claude-code", "ANTHROPIC_API_KEY"),
		cli(codex.Adapter(), "@openai/codex", "OPENAI_API_KEY"),
		cli(opencode.Adapter(), "opencode-ai", "OPENAI_API_KEY"),
		cli(gemini.Adapter(), "@google/gemini-cli", "GEMINI_API_KEY"),
		{Name: native.Name, Kind: Native, Root: native.RootFiles(), Caps: native.Capabilities()},
	}
}

// Lookup is the entry called name.
func Lookup(name string) (Entry, bool) {
	all := All() // built once: the dispatcher asks per runner per job
	i := slices.IndexFunc(all, func(e Entry) bool { return e.Name == name })
	if i < 0 {
		return Entry{}, false
	}
	return all[i], true
}

// Names are the names of the catalogue's agents, in its order.
func Names() []string { return names(func(Entry) bool { return true }) }

// AccountAgents are the agents that run under an account, in order.
func AccountAgents() []string { return names(Entry.Accounts) }

// CLIs are the vendor CLIs' adapters, in order.
func CLIs() []agent.Adapter {
	var out []agent.Adapter
	for _, e := range All() {
		if e.Adapter != nil {
			out = append(out, *e.Adapter)
		}
	}
	return out
}

func names(keep func(Entry) bool) []string {
	var out []string
	for _, e := range All() {
		if keep(e) {
			out = append(out, e.Name)
		}
	}
	return out
}

// Registry registers every agent of the catalogue as cfg configures it.
func Registry(cfg Config) (*agent.Registry, error) {
	var list []agent.Agent
	for _, e := range All() {
		list = append(list, e.New(cfg))
	}
	return agent.NewRegistry(list...)
}
