// Package cliagent runs a vendor CLI (through its agent.Adapter) as a
// drover agent: the same way for every CLI, it finds the binary, builds the
// command line and generated config, asks the runner for a sandbox that
// shows the CLI, its account and nothing else, with network only to its API
// through the egress proxy (which holds the key), and turns what the CLI
// prints into events and a result.
package cliagent

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"drover/internal/agent"
	"drover/internal/agent/facts"
	"drover/internal/job"
	"drover/internal/sandbox"
	"drover/internal/sandbox/egress"
)

// DefaultTimeout bounds an attempt whose job names no timeout: a CLI that
// hangs must not hold a slot forever.
const DefaultTimeout = 2 * time.Hour

// Config is what the runner's operator decides for a CLI.
type Config struct {
	// Path is the search path for the CLI's executable (PATH-style).
	Path string
	// Upstream overrides the vendor's API root for API-key accounts that
	// name none (a gateway, a local model server); from the runner's
	// environment, e.g. ANTHROPIC_BASE_URL.
	Upstream string
	// Model overrides the CLI's default model; needed by CLIs configured
	// with a custom provider (opencode).
	Model string
}

// Agent is one CLI as a drover agent.
type Agent struct {
	ad  agent.Adapter
	cfg Config
	now func() time.Time
}

// New returns the agent for ad.
func New(ad agent.Adapter, cfg Config) *Agent {
	return &Agent{ad: ad, cfg: cfg, now: time.Now}
}

func (g *Agent) Name() string                     { return g.ad.Name }
func (g *Agent) Capabilities() agent.Capabilities { return facts.Of(g.ad.Name).Caps }

// RootFiles are the instruction files the prompt holds besides AGENTS.md.
func (g *Agent) RootFiles() []string { return facts.Of(g.ad.Name).Root }

// Locate finds the CLI's executable on the configured path.
func (g *Agent) Locate() (agent.Binary, error) { return agent.Locate(g.ad.Name, g.cfg.Path) }

// spawnFailed is the result of an attempt whose CLI never started.
func (g *Agent) spawnFailed(format string, args ...any) (agent.Result, error) {
	return agent.Result{ExitCode: -1, Reason: job.ReasonSpawnFailed, Message: g.ad.Name + ": " + fmt.Sprintf(format, args...)}, nil
}

func (g *Agent) Run(ctx context.Context, a agent.Attempt) (agent.Result, error) {
	switch {
	case a.Sandbox == nil:
		return agent.Result{}, fmt.Errorf("%s agent: no sandbox", g.ad.Name)
	case a.Account == nil:
		return g.spawnFailed("no account for this agent on the runner")
	case a.Home == "":
		return agent.Result{}, fmt.Errorf("%s agent: no home directory", g.ad.Name)
	}
	bin, err := g.Locate()
	if err != nil {
		return g.spawnFailed("%v", err)
	}
	l := agent.Launch{
		Prompt: a.Prompt, Home: a.Home, AccountDir: a.Account.Dir,
		NewSession: a.NewSession, Resume: a.Resume, Model: g.cfg.Model,
	}
	extra := agent.Extra{ReadWrite: []sandbox.Mount{{Src: a.Home}, {Src: a.Account.Dir}}}
	for _, m := range bin.Mounts {
		extra.ReadOnly = append(extra.ReadOnly, sandbox.Mount{Src: m})
	}
	for _, d := range g.ad.HomeDirs {
		extra.ReadWrite = append(extra.ReadWrite, sandbox.Mount{Src: filepath.Join(a.Account.Dir, d), Dst: filepath.Join(sandbox.Home, d)})
	}
	upstream, err := g.network(a.Account, &l, &extra)
	if err != nil {
		return g.spawnFailed("%v", err)
	}
	ev := &evidence{out: a.Output}
	extra.Evidence = sandbox.EventWriter(ev.take)
	if t := a.Tools; t != nil {
		l.ToolURL, l.ToolToken, l.MCPConfig = t.URL, t.Token, t.MCPConfig
	}
	cmd, err := g.ad.Command(l)
	if err != nil {
		return g.spawnFailed("%v", err)
	}
	cmd.Argv[0] = bin.Path
	// The bridge sets the key's placeholder and the credential URL itself;
	// a name the policy may not hold (a key) is never asked for.
	env := slices.DeleteFunc(slices.Clone(cmd.Env), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return name == g.ad.Endpoint.KeyEnv || name == g.ad.Endpoint.BaseURLEnv
	})
	for _, kv := range env {
		name, _, _ := strings.Cut(kv, "=")
		extra.Env = append(extra.Env, name)
	}
	for _, m := range extra.ReadWrite {
		// Generated config may live here; the CLI may write state.
		if err := mkdirPrivate(m.Src); err != nil {
			return agent.Result{}, fmt.Errorf("%s agent: %w", g.ad.Name, err)
		}
	}
	if err := cmd.WriteFiles(); err != nil {
		return agent.Result{}, fmt.Errorf("%s agent: write its config: %w", g.ad.Name, err)
	}
	box, err := a.Sandbox(extra)
	if err != nil {
		return g.spawnFailed("sandbox: %v", err)
	}
	timeout := a.Spec.Timeout.D()
	if timeout <= 0 {
		timeout = DefaultTimeout
	}
	pr, pw := io.Pipe()
	scanned := make(chan scanResult, 1)
	go func() {
		s, err := agent.Scan(pr, g.ad.Parse, a.Events)
		scanned <- scanResult{s, err}
	}()
	p, err := box.Start(ctx, sandbox.Spec{
		Dir:     a.Dir,
		Argv:    cmd.Argv,
		Env:     mergeEnv(a.Env, env),
		Output:  io.MultiWriter(a.Output, pw),
		Timeout: timeout,
		Grace:   a.Grace,
	})
	if err != nil {
		pw.Close()
		<-scanned
		return g.spawnFailed("%v", err)
	}
	ex, err := p.Wait()
	pw.Close()
	sc := <-scanned
	if err != nil {
		return agent.Result{}, fmt.Errorf("%s agent: %w", g.ad.Name, err)
	}
	r := g.result(ex, sc, timeout)
	if r.Reason == job.ReasonExited && r.Limit == nil {
		g.refused(&r, ev.lastCall(), upstream)
		if o := sc.sum.Outcome; r.Reason == job.ReasonExited && o != nil && o.Refused {
			// No call the proxy could read (a vendor login's tunnel), but
			// the CLI says its provider refused the account.
			r.Reason = job.ReasonAuthFailed
			if r.ExitCode == 0 {
				r.ExitCode = 1
			}
		}
	}
	if r.Limit != nil {
		// The CLI named no reset (or a past one): the provider's headers,
		// as the egress proxy saw them, may have.
		if at := ev.retry(); at.After(g.now()) && !sc.statedReset() {
			r.Limit.ResetsAt = at
		}
	}
	return r, nil
}

// refused settles an attempt whose last call to the provider, as the
// egress proxy saw it, was refused for its credentials (401/403: the
// account needs attention) or never reached the provider: that is why the
// run ended, whatever the CLI made of it (opencode exits 0), not a model's
// failure to deliver.
func (g *Agent) refused(r *agent.Result, last egress.Event, upstream string) {
	switch {
	case last.Status == http.StatusUnauthorized || last.Status == http.StatusForbidden:
		r.Reason = job.ReasonAuthFailed
		r.Message = fmt.Sprintf("%s: the provider at %s refused the account's key (HTTP %d %s)",
			g.ad.Name, upstream, last.Status, http.StatusText(last.Status))
	case last.Error != "":
		r.Reason = job.ReasonEndpointUnreachable
		r.Message = fmt.Sprintf("%s: cannot reach the model API at %s: %s", g.ad.Name, upstream, last.Error)
	default:
		return
	}
	if r.ExitCode == 0 {
		r.ExitCode = 1
	}
}

// statedReset says whether the CLI's own limit named a reset time.
func (s scanResult) statedReset() bool {
	return s.sum.Limit != nil && !s.sum.Limit.ResetsAt.IsZero()
}

// evidence takes the egress proxy's events (sandbox.EventWriter): each
// goes to the log as a readable line, and a rate-limited response's retry
// time is kept.
type evidence struct {
	out     io.Writer
	mu      sync.Mutex
	retryAt time.Time
	last    egress.Event // the last call through a credential rule
}

func (e *evidence) take(ev egress.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, _ = io.WriteString(e.out, sandbox.EvidenceLine(ev))
	if ev.Status == http.StatusTooManyRequests && ev.RetryAt.After(e.retryAt) {
		e.retryAt = ev.RetryAt
	}
	if ev.Kind == "credential" && ev.Allowed {
		e.last = ev
	}
}

func (e *evidence) lastCall() egress.Event {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.last
}

func (e *evidence) retry() time.Time {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.retryAt
}

type scanResult struct {
	sum agent.Summary
	err error
}

// result settles how the attempt ended from the exit and what the CLI
// printed. A CLI that exits 0 without its final line did not finish its
// run, whatever its status says.
func (g *Agent) result(ex sandbox.Exit, sc scanResult, timeout time.Duration) agent.Result {
	r := agent.Result{ExitCode: ex.Code, Reason: job.ReasonExited}
	var why []string
	switch {
	case ex.TimedOut:
		r.Reason = job.ReasonTimeout
		why = append(why, fmt.Sprintf("ran past its time limit of %s", timeout))
	case ex.Stopped:
		r.Reason = job.ReasonCancelled
	}
	if ex.Signal != "" {
		why = append(why, "killed by "+ex.Signal)
	}
	if sc.err != nil {
		why = append(why, sc.err.Error())
		if r.ExitCode == 0 {
			r.ExitCode = 1
		}
	}
	if o := sc.sum.Outcome; o == nil && r.Reason == job.ReasonExited {
		why = append(why, fmt.Sprintf("exited with status %d without a final result line", ex.Code))
		if r.ExitCode == 0 {
			r.ExitCode = 1
		}
	} else if o != nil && !o.OK && r.ExitCode == 0 {
		r.ExitCode = 1 // the CLI's own verdict
	}
	if len(why) > 0 {
		r.Message = g.ad.Name + ": " + strings.Join(why, "; ")
	}
	sc.sum.Fill(&r, g.now())
	return r
}

// network gives the CLI its way to the model API. An API-key account's key
// stays with the egress proxy, which the CLI reaches at a credential URL;
// an account logged in with the vendor reaches the vendor's hosts (or the
// operator's endpoint) through the allowlist.
// It returns the API root as drover resolved it.
func (g *Agent) network(acct *agent.Account, l *agent.Launch, extra *agent.Extra) (string, error) {
	ep := g.ad.Endpoint
	upstream, _, err := ep.ResolveBaseURL(acct.BaseURL, g.cfg.Upstream)
	if err != nil {
		return "", err
	}
	if acct.Key == "" {
		if upstream == ep.Upstream {
			extra.Network.Allow = ep.Hosts
			return upstream, nil
		}
		hp, err := hostPort(upstream)
		if err != nil {
			return "", err
		}
		extra.Network.Allow = []string{hp}
		l.BaseURL = upstream
		return upstream, nil
	}
	extra.Network.Credentials = []egress.Credential{{
		Name: g.ad.Name, Upstream: upstream, Header: ep.Header, Prefix: ep.Prefix, Key: acct.Key,
		KeyEnv: ep.KeyEnv, BaseURLEnv: ep.BaseURLEnv,
	}}
	l.BaseURL = sandbox.CredentialURL(0)
	return upstream, nil
}

func hostPort(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return "", fmt.Errorf("API endpoint %q is not an http(s) URL", raw)
	}
	if u.Port() != "" {
		return u.Host, nil
	}
	if u.Scheme == "http" {
		return u.Host + ":80", nil
	}
	return u.Host + ":443", nil
}

// mergeEnv returns base with over's entries replacing those of the same name.
func mergeEnv(base, over []string) []string {
	names := map[string]bool{}
	for _, kv := range over {
		name, _, _ := strings.Cut(kv, "=")
		names[name] = true
	}
	out := slices.DeleteFunc(slices.Clone(base), func(kv string) bool {
		name, _, _ := strings.Cut(kv, "=")
		return names[name]
	})
	return append(out, over...)
}

func mkdirPrivate(dir string) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("make %s: %w", dir, err)
	}
	return nil
}
