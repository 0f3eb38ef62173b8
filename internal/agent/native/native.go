// Package native is drover's own agent: a model loop in the runner's
// process, on any provider of package model, with small flat tools (a
// command per fresh sandboxed process, file tools on the worktree through
// os.Root, and drover's ask, checkpoint, deliver and context). The
// account's key stays in the runner: the model is called from here, and
// nothing of it enters the sandbox, a log line, an event or an error.
package native

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"drover/internal/agent"
	"drover/internal/agent/facts"
	"drover/internal/job"
	"drover/internal/model"
	"drover/internal/protocol"
)

// Name is the agent name jobs use.
const Name = facts.Native

// Config is what the runner's operator decides for the native agent.
type Config struct {
	// Model overrides the account's model (the runner's --agent-model
	// native=M).
	Model  string
	Limits Limits
	// NewProvider makes the model client; nil: model.New.
	NewProvider func(model.Config) (model.Provider, error)
}

// Agent is the native agent.
type Agent struct{ cfg Config }

// New returns the native agent.
func New(cfg Config) *Agent {
	if cfg.NewProvider == nil {
		cfg.NewProvider = model.New
	}
	return &Agent{cfg: cfg}
}

func (*Agent) Name() string                     { return Name }
func (*Agent) Capabilities() agent.Capabilities { return facts.Of(Name).Caps }

// systemText tells the model its tools and how the job ends; the prompt
// (agent.BuildPrompt) carries drover's rules, the repository's
// instructions and the job.
const systemText = `You are drover's coding agent, working unattended on a job in a git worktree (your tools' paths are relative to it).
Work in small steps: look before you change, change with edit_file or write_file, check with run_command (tests, builds).
Each run_command is a fresh process in a sandbox. When the job is done, call deliver with a summary; if you cannot go on without a decision, call ask. Then end your turn.`

func (g *Agent) Run(ctx context.Context, a agent.Attempt) (agent.Result, error) {
	switch {
	case a.Sandbox == nil:
		return agent.Result{}, errors.New("native agent: no sandbox")
	case a.Account == nil:
		return spawnFailed("no account for this agent on the runner"), nil
	case a.Prompt == "":
		return spawnFailed("empty prompt"), nil
	}
	acct := a.Account
	mcfg := model.Config{Provider: acct.Provider, BaseURL: acct.BaseURL, Model: acct.Model, Key: acct.Key}
	switch {
	case a.Spec.Model != "":
		mcfg.Model = a.Spec.Model
	case g.cfg.Model != "":
		mcfg.Model = g.cfg.Model
	}
	prov, err := g.cfg.NewProvider(mcfg)
	if err != nil {
		return spawnFailed("%v", err), nil
	}
	adapt := forAccount(prov, acct)
	adapt.log = a.Output
	session := a.Resume
	if session == "" {
		session = a.NewSession
	}
	if protocol.CheckSessionID(session) != nil {
		return spawnFailed("no usable session id"), nil
	}
	j, tr, err := g.openLog(ctx, a, &Transcript{Session: session, System: systemText})
	if err != nil {
		return spawnFailed("session %s: %v", session, err), nil
	}
	defer j.Close()
	if a.Resume != "" {
		fmt.Fprintf(a.Output, "drover: native resumes session %s after turn %d\n", session, tr.Turns)
	}
	tr.backfill(a.Prompt)
	// The prompt (and what the back-fill answered) is recorded before the
	// first model call: a resumed attempt is told only to continue.
	if err := j.save(ctx, tr); err != nil {
		return spawnFailed("session %s: %v", session, err), nil
	}
	box, err := a.Sandbox(agent.Extra{})
	if err != nil {
		return spawnFailed("sandbox: %v", err), nil
	}
	root, err := os.OpenRoot(a.Dir)
	if err != nil {
		return agent.Result{}, fmt.Errorf("native agent: open the worktree: %w", err)
	}
	defer root.Close()
	tb := &toolbox{files: files{root: root, dir: a.Dir}, cmds: commands{box: box, dir: a.Dir, env: a.Env, grace: a.Grace}}
	if a.Tools != nil && a.Tools.Local != nil {
		tb.drover = a.Tools.Local
	}
	lim := g.limits(acct, a.Spec.Timeout.D())
	l := &loop{model: adapt, tools: tb, limits: lim, log: a.Output, events: a.Events,
		save: j.save}
	if fb := a.Fallback; fb != nil {
		l.fallback = func() (model.Provider, error) {
			p, err := g.cfg.NewProvider(model.Config{Provider: fb.Provider, BaseURL: fb.BaseURL, Model: fb.Model, Key: fb.Key})
			if err != nil {
				return nil, err
			}
			return forAccount(p, fb), nil
		}
	}
	out := l.run(ctx, tr)
	res := result(out, tb.drover != nil, lim.withDefaults().MaxWait, time.Now())
	res.Session, res.Usage, res.Found = session, tr.Usage, adapt.Learned()
	if fb := l.fellBack; fb != nil {
		// The account it moved off sits out until a reset it stated; a
		// limit the fallback then hit is the fallback's.
		if fb.Kind == model.KindLimited && !fb.RetryAt.IsZero() {
			res.Passed = append(res.Passed, agent.Limit{Account: acct.ID, ResetsAt: fb.RetryAt, Message: fb.Message})
		}
		if res.Limit != nil {
			res.Limit.Account = a.Fallback.ID
		}
	}
	return res, nil
}

// limits are the attempt's limits on acct with the job's timeout.
func (g *Agent) limits(acct *agent.Account, timeout time.Duration) Limits {
	lim := g.cfg.Limits
	if acct.ContextLength > 0 {
		// What the server said it serves, not what the operator guessed:
		// past it a server may cut the prompt silently.
		lim.ContextWindow = acct.ContextLength
	}
	if timeout > 0 && (lim.MaxWall <= 0 || timeout < lim.MaxWall) {
		lim.MaxWall = timeout
	}
	return lim
}

// openLog opens where the attempt's transcript is recorded: the hub's
// event log when the runner gives one (any runner resumes it from there),
// else a file in the account's directory. With a.Resume it reads the
// transcript recorded so far.
func (g *Agent) openLog(ctx context.Context, a agent.Attempt, tr *Transcript) (transcriptLog, *Transcript, error) {
	if a.Turns != nil {
		return openHubLog(ctx, a.Turns, a.Output, tr, a.Resume != "")
	}
	dir := filepath.Join(a.Account.Dir, "native")
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, nil, fmt.Errorf("make its session folder: %w", err)
	}
	return openJournal(filepath.Join(dir, tr.Session+".jsonl"), tr, a.Resume != "")
}

// result is the attempt's result for a loop's outcome at now; tools says
// whether drover's tools (deliver, ask) were on offer. One rule for the
// exit code: 0 when the model ended the job's turn as it should (with
// deliver or ask where they were on offer), -1 when the attempt was
// stopped, else 1. A limit parks the job (the runner sits the account
// out, holding no slot) only until a reset the provider stated, and only
// one within the wait budget: drover never sleeps for a guessed time.
func result(o Outcome, tools bool, maxWait time.Duration, now time.Time) agent.Result {
	r := agent.Result{Reason: job.ReasonExited, Message: "native: " + o.Reason, ExitCode: 1}
	switch o.End {
	case EndDelivered, EndAsked:
		r.Message, r.ExitCode = "", 0
	case EndAnswered:
		if !tools {
			r.Message, r.ExitCode = "", 0
		} else {
			r.Message = "native: the model ended its turn without deliver or ask"
		}
	case EndCancelled:
		r.ExitCode, r.Reason = -1, job.ReasonCancelled
	case EndTimeout:
		r.ExitCode, r.Reason = -1, job.ReasonTimeout
	case EndModel:
		if o.Err != nil {
			switch o.Err.Kind {
			case model.KindAuth:
				r.Reason = job.ReasonAuthFailed
			case model.KindNoModel:
				r.Reason = job.ReasonModelNotFound
			case model.KindRefused, model.KindNoTools:
				if o.Err.AccountFault() {
					r.Reason = job.ReasonEndpointRefused
				}
			case model.KindLimited:
				switch at := o.Err.RetryAt; {
				case at.IsZero():
					r.Message += "; the provider stated no reset time, and drover waits for no guessed one: retry the job later"
				case at.Sub(now) > maxWait:
					r.Message += fmt.Sprintf("; its reset at %s is past the job's wait budget of %s", at.UTC().Format(time.RFC3339), maxWait)
				default:
					r.Limit = &agent.Limit{ResetsAt: at, Message: o.Err.Message}
				}
			case model.KindTransport, model.KindUnavailable:
				r.Reason = job.ReasonEndpointUnreachable
			}
		}
	}
	return r
}

func spawnFailed(format string, args ...any) agent.Result {
	return agent.Result{ExitCode: -1, Reason: job.ReasonSpawnFailed, Message: "native: " + fmt.Sprintf(format, args...)}
}
