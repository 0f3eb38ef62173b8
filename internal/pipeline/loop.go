package pipeline

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"drover/internal/pipeline/spec"
	"drover/internal/store"
)

// loop advances a step that runs in rounds until its verdict approves.
// Before each round after the first, the steps it repeats run again on
// their own last commit with the last verdict as feedback. The loop stops
// for a person, never as approved, at max_rounds, max_cost or max_wall,
// on a finding an earlier round already made, or on a round that changed
// nothing; a delivery that is not a verdict fails the step.
func (ps *pass) loop(ctx context.Context, s *spec.Step) error {
	l := s.Loop
	var rounds []*store.PipelineRun
	for n := 1; ; n++ {
		r := ps.runs[runKey(s.ID, -1, n)]
		if r == nil {
			break
		}
		rounds = append(rounds, r)
	}
	if len(rounds) == 0 {
		in, err := ps.input(ctx, s, nil)
		if err != nil || in == "" {
			return err
		}
		_, err = ps.ensure(ctx, s, -1, "", 1, in, "")
		return err
	}
	last := rounds[len(rounds)-1]
	// A later round a person granted waits as a run with no job yet.
	granted := last.State == store.RunWaiting && last.JobID == ""
	if granted {
		if len(rounds) < 2 {
			return fmt.Errorf("step %s: a granted round with no round before it", s.ID)
		}
		last = rounds[len(rounds)-2]
	}
	if !ps.settled(s, last) {
		return nil
	}
	v, err := spec.ParseVerdict([]byte(last.Summary))
	if err != nil {
		ps.failed = fmt.Sprintf("step %s round %d delivered no verdict the loop can read (%v): silence is not approval", s.ID, last.Round, err)
		return nil
	}
	if v.Approved && !granted {
		ps.out[s.ID] = &output{commit: last.Commit, summary: last.Summary}
		return nil
	}
	next := last.Round + 1
	started := granted
	for _, id := range l.Repeat {
		started = started || ps.runs[runKey(id, -1, next)] != nil
	}
	if !started {
		if why := ps.stop(s, rounds, v); why != "" {
			ps.human = fmt.Sprintf("step %s stopped after round %d: %s%s", s.ID, last.Round, why, findings(v))
			return nil
		}
	}
	over := map[string]string{}
	for _, id := range ps.repeatOrder(l.Repeat) {
		rs := ps.byID[id]
		prev := ps.roundBefore(id, next)
		if prev == nil {
			return fmt.Errorf("step %s: repeated step %s has no round before %d", s.ID, id, next)
		}
		r, err := ps.ensure(ctx, rs, -1, "", next, prev.Commit, last.Summary)
		if err != nil || r == nil {
			return err
		}
		if !ps.settled(rs, r) {
			return nil
		}
		over[id] = r.Commit
	}
	in, err := ps.input(ctx, s, over)
	if err != nil || in == "" {
		return err
	}
	if !granted && ps.runs[runKey(s.ID, -1, next)] == nil && in == last.Input {
		ps.human = fmt.Sprintf("step %s stopped: round %d changed nothing (still %s)%s", s.ID, next, short(in), findings(v))
		return nil
	}
	_, err = ps.ensure(ctx, s, -1, "", next, in, "")
	return err
}

// stop says why a loop must not start another round, "" when it may.
func (ps *pass) stop(s *spec.Step, rounds []*store.PipelineRun, v spec.Verdict) string {
	l := s.Loop
	last := rounds[len(rounds)-1]
	if last.Round >= l.MaxRounds {
		return fmt.Sprintf("not approved in %d rounds (max_rounds %d)", last.Round, l.MaxRounds)
	}
	for _, r := range rounds[:len(rounds)-1] {
		earlier, err := spec.ParseVerdict([]byte(r.Summary))
		if err != nil {
			continue
		}
		if rep := v.Repeats(earlier); len(rep) > 0 {
			return fmt.Sprintf("round %d repeats a finding of round %d (%q)", last.Round, r.Round, rep[0].Text)
		}
	}
	if l.MaxCost > 0 {
		cost := 0.0
		for _, r := range ps.runs {
			if r.Step == s.ID || slices.Contains(l.Repeat, r.Step) {
				cost += r.CostUSD
			}
		}
		if cost >= l.MaxCost {
			return fmt.Sprintf("spent $%.4f, max_cost $%.4f", cost, l.MaxCost)
		}
	}
	if l.MaxWall > 0 {
		if took := ps.e.cfg.Now().Sub(rounds[0].CreatedAt); took >= l.MaxWall {
			return fmt.Sprintf("ran %s, max_wall %s", took.Round(1e9), l.MaxWall)
		}
	}
	return ""
}

// findings is the last verdict's findings, for the reason a loop stopped.
func findings(v spec.Verdict) string {
	if len(v.Findings) == 0 {
		return ""
	}
	texts := make([]string, 0, 3)
	for i, f := range v.Findings {
		if i == 3 {
			texts = append(texts, fmt.Sprintf("and %d more", len(v.Findings)-3))
			break
		}
		texts = append(texts, f.Text)
	}
	return "; findings: " + strings.Join(texts, "; ")
}

// repeatOrder is a loop's repeated steps in the graph's order.
func (ps *pass) repeatOrder(ids []string) []string {
	var out []string
	for _, id := range ps.order() {
		if slices.Contains(ids, id) {
			out = append(out, id)
		}
	}
	return out
}

// roundBefore is step id's latest run before round n.
func (ps *pass) roundBefore(id string, n int) *store.PipelineRun {
	for k := n - 1; k >= 1; k-- {
		if r := ps.runs[runKey(id, -1, k)]; r != nil {
			return r
		}
	}
	return nil
}
