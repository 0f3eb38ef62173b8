// Package exec is the agent that runs a job's arguments as a command line.
package exec

import (
	"context"
	"errors"
	"fmt"

	"drover/internal/agent"
	"drover/internal/agent/facts"
	"drover/internal/job"
	"drover/internal/sandbox"
)

// Name is the agent name jobs use.
const Name = facts.Exec

// Agent runs Spec.Args as argv through the attempt's boundary.
type Agent struct{}

// New returns the exec agent.
func New() *Agent { return &Agent{} }

func (*Agent) Name() string { return Name }

func (*Agent) Run(ctx context.Context, a agent.Attempt) (agent.Result, error) {
	box := a.Boundary
	if box == nil && a.Sandbox != nil {
		var err error
		if box, err = a.Sandbox(agent.Extra{}); err != nil {
			return agent.Result{ExitCode: -1, Reason: job.ReasonSpawnFailed, Message: "sandbox: " + err.Error()}, nil
		}
	}
	if box == nil {
		return agent.Result{}, errors.New("exec agent: no sandbox boundary")
	}
	p, err := box.Start(ctx, sandbox.Spec{
		Dir:     a.Dir,
		Argv:    a.Spec.Args,
		Env:     a.Env,
		Output:  a.Output,
		Timeout: a.Spec.Timeout.D(),
		Grace:   a.Grace,
	})
	if err != nil {
		return agent.Result{ExitCode: -1, Reason: job.ReasonSpawnFailed, Message: err.Error()}, nil
	}
	ex, err := p.Wait()
	if err != nil {
		return agent.Result{}, fmt.Errorf("exec agent: %w", err)
	}
	r := agent.Result{ExitCode: ex.Code, Reason: job.ReasonExited}
	switch {
	case ex.TimedOut:
		r.Reason = job.ReasonTimeout
		r.Message = fmt.Sprintf("ran past its time limit of %s", a.Spec.Timeout.D())
	case ex.Stopped:
		r.Reason = job.ReasonCancelled
	}
	if ex.Signal != "" {
		if r.Message != "" {
			r.Message += "; "
		}
		r.Message += "killed by " + ex.Signal
	}
	return r, nil
}
