package attemptgroup

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"drover/internal/apitypes"
	"drover/internal/attemptgroup/request"
)

// view is a group from its pipeline: each attempt's step and verify step,
// their jobs, and the attempt's diff against the base.
func (g *Groups) view(ctx context.Context, pv apitypes.PipelineView) (apitypes.GroupView, error) {
	v := apitypes.GroupView{ID: pv.ID, Project: pv.Project, Base: pv.Base, Requester: pv.Requester, State: pv.State,
		Reason: pv.Reason, Verify: pv.Params["verify"], CreatedAt: pv.CreatedAt, CostUSD: pv.CostUSD, Tokens: pv.Tokens,
		Attempts: []apitypes.GroupAttempt{}}
	steps := map[string]apitypes.PipelineStepView{}
	for _, s := range pv.Steps {
		steps[s.ID] = s
	}
	picked, err := g.picked(ctx, pv.Project, pv.ID)
	if err != nil {
		return v, fmt.Errorf("read group %s's pick: %w", pv.ID, err)
	}
	if picked != "" {
		v.Result, v.Ref = picked, RefPrefix+pv.ID
	}
	for k := 1; ; k++ {
		s, ok := steps[stepID("attempt", k)]
		if !ok {
			break
		}
		a, err := g.attempt(ctx, pv, k, s, steps)
		if err != nil {
			return v, err
		}
		if v.Picked == 0 && picked != "" && a.Commit == picked && a.State == "done" {
			v.Picked = k
			if a.Job != "" {
				if j, err := g.core.Job(ctx, a.Job); err == nil {
					v.Publication = j.Publication
				}
			}
		}
		v.Attempts = append(v.Attempts, a)
	}
	if s, ok := steps[judgeStep]; ok {
		notes, err := g.notes(ctx, pv.ID)
		if err != nil {
			return v, err
		}
		v.Judge = judgeOf(pv, s, len(v.Attempts), notes)
	}
	return v, nil
}

// attempt is attempt k of a group, from its steps.
func (g *Groups) attempt(ctx context.Context, pv apitypes.PipelineView, k int, s apitypes.PipelineStepView, steps map[string]apitypes.PipelineStepView) (apitypes.GroupAttempt, error) {
	a := apitypes.GroupAttempt{Number: k, State: s.State, Reason: s.Reason, CostUSD: s.CostUSD, Tokens: s.Tokens, Verify: "none"}
	if n := len(s.Runs); n > 0 {
		a.Job = s.Runs[n-1].Job
	}
	if a.Job != "" {
		j, err := g.core.Job(ctx, a.Job)
		if err != nil {
			return a, fmt.Errorf("read attempt %d's job %s: %w", k, a.Job, err)
		}
		a.Agent, a.Account, a.WallSeconds = j.Agent, j.Account, wall(j, g.cfg.Now())
		if s.State == "done" {
			a.Commit = j.Head
		}
	}
	if vs, ok := steps[stepID("verify", k)]; ok {
		a.Verify = verifyState(vs.State)
		if n := len(vs.Runs); n > 0 {
			a.VerifyJob = vs.Runs[n-1].Job
		}
	}
	if a.Commit == "" || a.Commit == pv.Base {
		return a, nil
	}
	dir := g.core.Dir(pv.Project)
	stat, err := g.cfg.Git.Out(ctx, dir, "diff", "--no-ext-diff", "--no-textconv", "--numstat", pv.Base, a.Commit)
	if err != nil {
		return a, fmt.Errorf("diff attempt %d: %w", k, err)
	}
	for line := range strings.Lines(stat) {
		f := strings.Fields(line)
		if len(f) < 3 {
			continue
		}
		a.Files++
		// Binary files count "-": no lines.
		add, _ := strconv.Atoi(f[0])
		del, _ := strconv.Atoi(f[1])
		a.Added, a.Deleted = a.Added+add, a.Deleted+del
	}
	diff, err := g.cfg.Git.Out(ctx, dir, "diff", "--no-ext-diff", "--no-textconv", pv.Base, a.Commit)
	if err != nil {
		return a, fmt.Errorf("diff attempt %d: %w", k, err)
	}
	if len(diff) > request.MaxDiff {
		diff, a.DiffTruncated = strings.ToValidUTF8(diff[:request.MaxDiff], ""), true
	}
	a.Diff = diff
	return a, nil
}

// verifyState is what a verify step's state says of its attempt.
func verifyState(step string) string {
	switch step {
	case "done":
		return "passed"
	case "failed", "unknown", "needs_human", "cancelled":
		return "failed"
	case "skipped":
		return "skipped"
	case "running":
		return "running"
	}
	return "pending"
}

// wall is how long a job's attempts ran, each from its start to its end
// (to now while it runs).
func wall(j apitypes.JobView, now time.Time) float64 {
	var d time.Duration
	for _, at := range j.Attempts {
		if at.StartedAt == nil {
			continue
		}
		end := now
		if at.FinishedAt != nil {
			end = *at.FinishedAt
		} else if j.State.Terminal() {
			continue
		}
		d += end.Sub(*at.StartedAt)
	}
	return d.Seconds()
}
