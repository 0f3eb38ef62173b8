// Package request is the rule of an attempt group's request, one rule for
// the CLI (which checks before it pushes anything) and the hub: a light
// package, so that the CLI of a runner host's build links none of the
// hub's.
package request

import (
	"fmt"
	"slices"
	"strings"

	"drover/internal/agent/facts"
	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/rules"
)

// Limits on a group.
const (
	MaxAttempts = 10
	// MaxDiff bounds each attempt's diff in a comparison.
	MaxDiff = 256 << 10
)

// Attempt is one attempt's agent, as a group's request names it.
type Attempt struct{ Agent, Account string }

// Check checks a group request as the hub will (the CLI checks before it
// pushes anything): nothing starts when any of it is wrong.
// It returns the attempts' agents, and the judge's (the zero Attempt for
// none).
func Check(req apitypes.GroupRequest) ([]Attempt, Attempt, error) {
	n := req.Attempts
	if n == 0 {
		n = len(req.Agents)
	}
	switch {
	case n < 1:
		return nil, Attempt{}, call.BadRequest("a group needs at least one attempt (--attempts N)")
	case n > MaxAttempts:
		return nil, Attempt{}, call.BadRequest("%d attempts; the limit is %d", n, MaxAttempts)
	case len(req.Agents) > 0 && len(req.Agents) != n:
		return nil, Attempt{}, call.BadRequest("%d agents for %d attempts: name one agent per attempt, or none", len(req.Agents), n)
	case len(req.Agents) == 0 && strings.TrimSpace(req.Agent) == "":
		return nil, Attempt{}, call.BadRequest("the attempts need an agent (--agent, or --agents one per attempt)")
	case strings.TrimSpace(req.Prompt) == "":
		return nil, Attempt{}, call.BadRequest("the attempts need a prompt")
	case req.PickByJudge && strings.TrimSpace(req.Judge) == "":
		return nil, Attempt{}, call.BadRequest("--pick-by-judge needs a judge (--judge AGENT)")
	case req.PickByJudge && strings.TrimSpace(req.Verify) == "":
		return nil, Attempt{}, call.BadRequest("--pick-by-judge needs --verify CMD: only an attempt whose verify passed is picked")
	}
	names := req.Agents
	if len(names) == 0 {
		names = slices.Repeat([]string{strings.TrimSpace(req.Agent)}, n)
	}
	out := make([]Attempt, n)
	for i, s := range names {
		a, err := agentOf(fmt.Sprintf("attempt %d", i+1), s)
		if err != nil {
			return nil, Attempt{}, err
		}
		out[i] = a
	}
	var judge Attempt
	if strings.TrimSpace(req.Judge) != "" {
		var err error
		if judge, err = agentOf("the judge", req.Judge); err != nil {
			return nil, Attempt{}, err
		}
	}
	return out, judge, nil
}

// agentOf is ParseAgent's reading of what's agent, its refusal naming what.
func agentOf(what, s string) (Attempt, error) {
	a, err := ParseAgent(s)
	if err != nil {
		return Attempt{}, call.BadRequest("%s: %s", what, err.Msg)
	}
	return a, nil
}

// ParseAgent reads an agent as a request names it, AGENT or AGENT:ACCOUNT
// (the account pins its jobs): an agent that takes a prompt (the one rule
// of attempt groups and evaluations).
func ParseAgent(s string) (Attempt, *call.Refusal) {
	ag, acct, _ := strings.Cut(strings.TrimSpace(s), ":")
	e, ok := facts.Lookup(ag)
	switch {
	case !ok:
		return Attempt{}, call.BadRequest("unknown agent %q (known: %s)", ag, strings.Join(facts.Names(), ", "))
	case !e.Prompt():
		return Attempt{}, call.BadRequest("agent %q takes no prompt", ag)
	case strings.Contains(s, ":") && rules.CheckPlainText("account", acct, false) != nil:
		return Attempt{}, call.BadRequest("account of %q: %v", s, rules.CheckPlainText("account", acct, false))
	}
	return Attempt{Agent: ag, Account: acct}, nil
}
