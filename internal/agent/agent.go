// Package agent defines how a runner runs one attempt of a job: an Agent
// turns a job spec into processes started through a sandbox.Boundary and
// reports how they ended.
package agent

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"time"

	"drover/internal/agent/facts"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/sandbox"
	"drover/internal/tools"
)

// Attempt is everything an agent gets for one attempt. Env is the whole
// environment of the job; Output receives its combined output.
type Attempt struct {
	Ref      protocol.AttemptRef
	Spec     protocol.JobSpec
	Dir      string
	Env      []string
	Output   io.Writer
	Boundary sandbox.Boundary
	Grace    time.Duration // SIGTERM → SIGKILL delay when ctx is cancelled
	// Events receives what a structured-output agent read from its CLI;
	// nil drops them. Output still gets every byte the CLI printed.
	Events Events
	// Resume is the session to continue (from Result.Session of an earlier
	// attempt in the same worktree); empty starts a new one.
	Resume string

	// What a vendor CLI agent needs beyond that; the exec agent uses none.
	//
	// Sandbox builds the boundary the CLI runs in: the runner's policy for
	// the attempt plus what the CLI adds. The runner records the isolation
	// of the boundary it returns. Nil: only Boundary is available.
	Sandbox func(Extra) (sandbox.Boundary, error)
	// Prompt is the whole prompt (see BuildPrompt); on a resumed session
	// only what the CLI is told next.
	Prompt string
	// Home is a private directory of the attempt outside the worktree, for
	// generated config and caches.
	Home    string
	Account *Account
	// Fallback is the account a native job continues on when Account is
	// limited or unavailable; nil for none.
	Fallback *Account
	// Tools reaches drover's tool server; nil when the job has none.
	Tools *ToolEndpoint
	// NewSession is the id to give a new session (CLIs that accept one).
	NewSession string
	// Turns keeps the transcript of an agent that runs its model loop in
	// the runner's process (native) in the hub; nil: none is kept there.
	Turns TurnLog
}

// TurnLog keeps a model loop's transcript in the hub, record by record, so
// that any runner allowed to run the job resumes it.
type TurnLog interface {
	// Append records recs in order; it returns once the hub has them.
	Append(ctx context.Context, session string, recs []protocol.TurnRecord) error
	// Load reads every record of session.
	Load(ctx context.Context, session string) ([]protocol.TurnRecord, error)
}

// Extra is what a CLI adds to its attempt's sandbox policy.
type Extra struct {
	ReadOnly  []sandbox.Mount
	ReadWrite []sandbox.Mount
	Env       []string // variable names the CLI's environment holds
	Network   sandbox.Network
	// Evidence receives the egress proxy's events as JSON lines (see
	// sandbox.Policy.Evidence); nil: readable lines in the output.
	Evidence io.Writer
}

// Account is the account an attempt runs under. Key is a secret: it goes
// only into the egress proxy's credential rule, never into the sandbox.
type Account struct {
	ID      string
	Dir     string // the CLI's config directory (login, sessions)
	Key     string // API key; empty for an account logged in with the vendor
	BaseURL string // provider API root; empty: the operator's or vendor's default
	// Provider and Model are a native account's model API (package model).
	Provider string
	Model    string
	// What the doctor's probe found of a native account's model; the zero
	// value (never probed) takes it to do all.
	NoToolCalls         bool  // it answers in text only: the text protocol
	NoStreamedToolCalls bool  // its streamed tool calls break: whole answers
	ContextLength       int64 // the context its server serves; 0: unknown
}

// ToolEndpoint reaches the attempt's tool server. Token only ever goes
// into 0600 files.
type ToolEndpoint struct {
	URL       string
	Token     string
	MCPConfig string // a Claude-style MCP config file holding URL and token
	// Local calls the same tools in the runner's process, for an agent
	// that runs its model loop there (native).
	Local ToolCaller
}

// ToolCaller calls drover's tools (package tools) by name with JSON
// arguments; an error is a tool error to show the model. Status says
// whether ask or deliver has ended the attempt's turn.
type ToolCaller interface {
	Call(ctx context.Context, name string, args json.RawMessage) (string, error)
	Status() tools.Status
}

// Result is how an attempt ended. Reason is ReasonExited (see ExitCode),
// ReasonSpawnFailed, ReasonTimeout or ReasonCancelled (stopped because ctx
// was cancelled; the runner knows why and reports accordingly).
type Result struct {
	ExitCode int
	Reason   job.Reason
	Message  string
	// Session is the agent's session id, if it has one, for a later resume.
	Session string
	// Usage is what the attempt consumed, as far as the agent reports it.
	Usage Usage
	// Limit is set when the account ran into a usage or rate limit; the
	// account should sit out until Limit.Until.
	Limit *Limit
	// Passed are the limits of accounts the attempt moved off (a native
	// job to its fallback) and went on: each sits out until its reset.
	Passed []Limit
	// Found is what a native attempt learned of its account's model
	// server that its probe had not (it answers streamed requests whole,
	// or refuses tools); the runner records it on the account. nil:
	// nothing new.
	Found *Found
}

// Found is how a native account's model server takes tool calls, as an
// attempt found out.
type Found struct {
	NoToolCalls         bool // it refuses tools: the text protocol
	NoStreamedToolCalls bool // it answers streamed requests whole: whole answers
}

// Capabilities are what an agent can do beyond running an attempt: facts
// of the agent (package facts).
type Capabilities = facts.Capabilities

// CapabilitiesOf reports a's capabilities. Agents declare them with a
// Capabilities method, which keeps the Agent interface itself small; an
// agent without one has none.
func CapabilitiesOf(a Agent) Capabilities {
	if c, ok := a.(interface{ Capabilities() Capabilities }); ok {
		return c.Capabilities()
	}
	return Capabilities{}
}

// Agent runs attempts. Run returns only once everything it started is gone;
// an error means the agent itself failed, not the job.
type Agent interface {
	Name() string
	Run(ctx context.Context, a Attempt) (Result, error)
}

// Registry maps agent names to agents.
type Registry struct {
	agents map[string]Agent
}

// NewRegistry registers agents under their names.
func NewRegistry(agents ...Agent) (*Registry, error) {
	r := &Registry{agents: make(map[string]Agent, len(agents))}
	for _, a := range agents {
		if _, dup := r.agents[a.Name()]; dup {
			return nil, fmt.Errorf("agent %q registered twice", a.Name())
		}
		r.agents[a.Name()] = a
	}
	return r, nil
}

// Lookup returns the agent called name.
func (r *Registry) Lookup(name string) (Agent, bool) {
	a, ok := r.agents[name]
	return a, ok
}

// Names lists the registered agents, sorted.
func (r *Registry) Names() []string {
	names := make([]string, 0, len(r.agents))
	for n := range r.agents {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}
