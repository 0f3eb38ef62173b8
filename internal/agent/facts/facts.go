// Package facts is what drover knows of each agent as plain data: its name
// and kind, its npm package, where its API key is usually found, how an
// account logs in with its vendor, the instruction files its prompt holds,
// its capabilities, and the model providers of the native agent. It imports
// only the standard library, so the hub, the runner's accounts and the CLI
// read it without linking the agents' code (the model SDKs, the sandbox).
// The implementations (package catalog, on the runner's side) are keyed by
// its names; adding an agent adds its facts here and its code there.
package facts

import "slices"

// The agents' names, as jobs name them.
const (
	Exec     = "exec"
	Claude   = "claude"
	Codex    = "codex"
	OpenCode = "opencode"
	Gemini   = "gemini"
	Native   = "native"
)

// Kind is how an agent runs.
type Kind int

const (
	// KindCommand: the job's arguments are a command line, run as is; no
	// account.
	KindCommand Kind = iota
	// KindCLI: a vendor CLI, under one of the runner's accounts; the job's
	// arguments are its prompt.
	KindCLI
	// KindNative: drover's own model loop, under a native account (a model
	// provider); the job's arguments are its prompt.
	KindNative
)

// Capabilities are what an agent can do beyond running an attempt.
type Capabilities struct {
	// CanResume: the agent continues an earlier attempt's session rather
	// than starting over, so a resumed job need not replay its history.
	CanResume bool
	// Portable: its sessions live in the hub, not in an account's
	// directory, so any runner and account may resume one.
	Portable bool
}

// Login is how the owner of a login account logs a vendor CLI in, once, as
// the runner's user: Command, with Env set to the account's config
// directory (its subdirectory Sub when set). After says what to do in it.
type Login struct {
	Env, Sub, Command, After string
}

// Agent is what is known of one agent.
type Agent struct {
	Name string
	Kind Kind
	// Package is the npm package a vendor CLI ships in.
	Package string
	// KeyVar is the variable an API key for the agent is usually found in
	// (the demo reads it).
	KeyVar string
	// Login is how a vendor CLI's login account logs in; zero for others.
	Login Login
	// Root are the instruction files at the worktree's root the agent's
	// prompt holds besides AGENTS.md.
	Root []string
	Caps Capabilities
}

// Accounts says whether the agent runs under one of the runner's accounts.
func (a Agent) Accounts() bool { return a.Kind != KindCommand }

// Prompt says whether a job's arguments are a prompt (else a command).
func (a Agent) Prompt() bool { return a.Kind != KindCommand }

// All are the agents, in the order drover lists them: exec first, then the
// vendor CLIs, then native.
func All() []Agent {
	resume := Capabilities{CanResume: true}
	return []Agent{
		{Name: Exec, Kind: KindCommand},
		{Name: Claude, Kind: KindCLI, Package: "@anthropic-ai/claude-code", KeyVar: "ANTHROPIC_API_KEY",
			Login: Login{Env: "CLAUDE_CONFIG_DIR", Command: "claude auth login",
				After: "(or start 'claude' with that variable and type /login.)"},
			Root: []string{"CLAUDE.md"}, Caps: resume},
		{Name: Codex, Kind: KindCLI, Package: "@openai/codex", KeyVar: "OPENAI_API_KEY",
			Login: Login{Env: "CODEX_HOME", Command: "codex login",
				After: "(on a machine without a browser add --device-auth.)"},
			Caps: resume},
		{Name: OpenCode, Kind: KindCLI, Package: "opencode-ai", KeyVar: "OPENAI_API_KEY",
			Login: Login{Env: "XDG_DATA_HOME", Sub: "data", Command: "opencode auth login",
				After: "then choose the provider and follow its prompts."},
			Caps: resume},
		{Name: Gemini, Kind: KindCLI, Package: "@google/gemini-cli", KeyVar: "GEMINI_API_KEY",
			Login: Login{Env: "HOME", Command: "gemini",
				After: `then choose "Sign in with Google", finish the login and leave with /quit.`},
			Caps: resume},
		{Name: Native, Kind: KindNative, Root: []string{"CLAUDE.md"}, Caps: Capabilities{CanResume: true, Portable: true}},
	}
}

// Lookup is the agent called name.
func Lookup(name string) (Agent, bool) {
	all := All()
	i := slices.IndexFunc(all, func(a Agent) bool { return a.Name == name })
	if i < 0 {
		return Agent{}, false
	}
	return all[i], true
}

// Of is the agent called name; the zero Agent (a command, no capabilities)
// when there is none.
func Of(name string) Agent {
	a, _ := Lookup(name)
	return a
}

// Names are the names of the agents, in order.
func Names() []string { return names(func(Agent) bool { return true }) }

// AccountAgents are the agents that run under an account, in order.
func AccountAgents() []string { return names(Agent.Accounts) }

// CLIs are the vendor CLIs, in order.
func CLIs() []string { return names(func(a Agent) bool { return a.Kind == KindCLI }) }

func names(keep func(Agent) bool) []string {
	var out []string
	for _, a := range All() {
		if keep(a) {
			out = append(out, a.Name)
		}
	}
	return out
}

// Model providers (wire protocols) a native account may name.
const (
	Anthropic        = "anthropic"
	OpenAI           = "openai"
	OpenAICompatible = "openai-compatible"
)

// Providers are the model providers, in the order drover lists them.
func Providers() []string { return []string{Anthropic, OpenAI, OpenAICompatible} }

// DefaultModel is the model a native account of provider uses when it
// names none; "" for a provider without an obvious default.
func DefaultModel(provider string) string {
	switch provider {
	case Anthropic:
		return "claude-sonnet-4-5"
	case OpenAI:
		return "gpt-5"
	}
	return ""
}
