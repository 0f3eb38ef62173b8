package pipeline

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/pipeline/spec"
	"drover/internal/store"
)

// RetryPipeline starts a step of a stopped pipeline again: a step whose
// job failed or ended unknown is retried (the same job, a new attempt), a
// loop that stopped for a person gets one more round.
func (e *Engine) RetryPipeline(ctx context.Context, c call.Caller, id string, req apitypes.PipelineRetryRequest) (apitypes.PipelineView, error) {
	p, err := e.load(ctx, c, id)
	if err != nil {
		return apitypes.PipelineView{}, err
	}
	if err := mayControl(c, p); err != nil {
		return apitypes.PipelineView{}, err
	}
	if p.State == store.PipelineDone || p.State == store.PipelineCancelled {
		return apitypes.PipelineView{}, call.Conflict("pipeline %s is %s: run it again instead (its finished steps replay at no cost)", id, p.State)
	}
	var pl spec.Pipeline
	if err := json.Unmarshal([]byte(p.Spec), &pl); err != nil {
		return apitypes.PipelineView{}, fmt.Errorf("read pipeline %s: %w", id, err)
	}
	i := slices.IndexFunc(pl.Steps, func(s spec.Step) bool { return s.ID == req.Step })
	if i < 0 {
		return apitypes.PipelineView{}, call.BadRequest("pipeline %s has no step %q", id, req.Step)
	}
	s := pl.Steps[i]
	var runs []store.PipelineRun
	if err := e.cfg.Store.Read(ctx, func(tx store.Tx) error {
		runs, err = tx.PipelineRuns(id)
		return err
	}); err != nil {
		return apitypes.PipelineView{}, fmt.Errorf("read pipeline %s's steps: %w", id, err)
	}
	var mine []store.PipelineRun
	for _, r := range runs {
		if r.Step == s.ID {
			mine = append(mine, r)
		}
	}
	did := ""
	for _, r := range mine {
		retriable := r.State == store.RunFailed || r.State == store.RunUnknown || (r.State == store.RunNeedsHuman && s.Kind != spec.KindIntegrate)
		if retriable && r.JobID != "" && s.Kind != spec.KindPublish {
			if err := e.core.Retry(ctx, c, r.JobID); err != nil {
				return apitypes.PipelineView{}, err
			}
			did = fmt.Sprintf("step %s's job %s retried by %s", r.Key, r.JobID, c.Name)
		}
	}
	// The jobs the pipeline stopped when it failed start again with it.
	if did != "" {
		for _, r := range runs {
			if r.Step != s.ID && r.State == store.RunFailed && strings.HasPrefix(r.Reason, stoppedPrefix) && r.JobID != "" {
				if err := e.core.Retry(ctx, c, r.JobID); err != nil {
					return apitypes.PipelineView{}, err
				}
			}
		}
	}
	if did == "" && s.Loop != nil && p.State == store.PipelineNeedsHuman && len(mine) > 0 {
		last := mine[0]
		for _, r := range mine {
			if r.Round > last.Round {
				last = r
			}
		}
		if last.State != store.RunDone {
			return apitypes.PipelineView{}, call.Conflict("step %s's round %d is %s: there is no round to add", s.ID, last.Round, last.State)
		}
		now := e.cfg.Now()
		next := store.PipelineRun{PipelineID: id, Key: runKey(s.ID, -1, last.Round+1), Step: s.ID, Round: last.Round + 1, Item: -1,
			State: store.RunWaiting, Reason: "granted by " + c.Name, CreatedAt: now, UpdatedAt: now}
		if err := e.cfg.Store.Write(ctx, func(tx store.Tx) error { return tx.PutPipelineRun(next) }); err != nil {
			return apitypes.PipelineView{}, fmt.Errorf("grant step %s a round: %w", s.ID, err)
		}
		did = fmt.Sprintf("step %s granted round %d by %s", s.ID, next.Round, c.Name)
	}
	if did == "" {
		return apitypes.PipelineView{}, call.Conflict("step %s has nothing to retry (a merge conflict does not go away: change the work and run the pipeline again)", s.ID)
	}
	if err := e.reopen(ctx, id, did, c.Name); err != nil {
		return apitypes.PipelineView{}, err
	}
	e.poke(id)
	return e.ShowPipeline(ctx, c, id)
}

// reopen sets a stopped pipeline running again.
func (e *Engine) reopen(ctx context.Context, id, msg, actor string) error {
	err := e.cfg.Store.Write(ctx, func(tx store.Tx) error {
		p, err := tx.Pipeline(id)
		if err != nil {
			return err
		}
		now := e.cfg.Now()
		p.State, p.Reason, p.UpdatedAt = store.PipelineRunning, "", now
		if err := tx.UpdatePipeline(p); err != nil {
			return err
		}
		_, err = tx.AddPipelineEvent(store.PipelineEvent{PipelineID: id, At: now, Kind: "retried", Actor: actor, Message: msg})
		return err
	})
	if err != nil {
		return fmt.Errorf("reopen pipeline %s: %w", id, err)
	}
	return nil
}

// view is a pipeline as the API shows it; with steps, each step and its
// runs (their jobs read for their attempts).
func (e *Engine) view(ctx context.Context, p store.Pipeline, steps bool) (apitypes.PipelineView, error) {
	v := apitypes.PipelineView{ID: p.ID, Name: p.Name, File: p.File, Project: p.Project, Base: p.Base, Staged: p.Staged,
		State: string(p.State), Reason: p.Reason, Result: p.Result, CreatedAt: p.CreatedAt.UTC(), UpdatedAt: p.UpdatedAt.UTC()}
	var runs []store.PipelineRun
	err := e.cfg.Store.Read(ctx, func(tx store.Tx) error {
		if u, err := tx.User(p.RequesterID); err == nil {
			v.Requester = u.Name
		}
		var err error
		runs, err = tx.PipelineRuns(p.ID)
		return err
	})
	if err != nil {
		return v, fmt.Errorf("read pipeline %s: %w", p.ID, err)
	}
	_ = json.Unmarshal([]byte(p.Params), &v.Params)
	for _, r := range runs {
		v.CostUSD += r.CostUSD
		v.Tokens += r.Tokens
	}
	var pl spec.Pipeline
	if err := json.Unmarshal([]byte(p.Spec), &pl); err != nil {
		return v, fmt.Errorf("read pipeline %s: %w", p.ID, err)
	}
	slices.SortStableFunc(runs, func(a, b store.PipelineRun) int {
		if a.Item != b.Item {
			return a.Item - b.Item
		}
		return a.Round - b.Round
	})
	for _, s := range pl.Steps {
		sv := apitypes.PipelineStepView{ID: s.ID, Kind: s.Kind, DependsOn: s.DependsOn, Reads: s.Reads, State: "pending"}
		if s.Loop != nil {
			sv.MaxRounds = s.Loop.MaxRounds
		}
		var mine []store.PipelineRun
		for _, r := range runs {
			if r.Step == s.ID {
				mine = append(mine, r)
			}
		}
		for _, r := range mine {
			rv := apitypes.PipelineRunView{Key: r.Key, Round: r.Round, ItemValue: r.ItemValue, Hash: r.Hash, State: string(r.State),
				Job: r.JobID, Tries: r.Tries, Replayed: r.Replayed, Input: r.Input, Commit: r.Commit, Summary: r.Summary,
				Reason: r.Reason, CostUSD: r.CostUSD, Tokens: r.Tokens}
			if r.Item >= 0 {
				item := r.Item
				rv.Item = &item
			}
			if r.JobID != "" && steps {
				if jv, err := e.core.Job(ctx, r.JobID); err == nil {
					rv.JobState, rv.Attempts = string(jv.State), len(jv.Attempts)
				}
			}
			sv.Runs = append(sv.Runs, rv)
			sv.CostUSD += r.CostUSD
			sv.Tokens += r.Tokens
			sv.Rounds = max(sv.Rounds, r.Round)
		}
		sv.State, sv.Reason, sv.Commit = stepState(p, s, mine)
		if n := len(mine); n > 0 {
			if last := mine[n-1]; json.Valid([]byte(last.Summary)) && s.Kind != spec.KindPublish {
				if _, err := spec.ParseVerdict([]byte(last.Summary)); err == nil {
					sv.Verdict = json.RawMessage(last.Summary)
				}
			}
			if s.Kind == spec.KindPublish && steps {
				sv.Publication = e.publication(ctx, mine[n-1])
			}
		}
		v.StepsTotal++
		if sv.State == "done" || sv.State == "skipped" {
			v.StepsDone++
		}
		if steps {
			v.Steps = append(v.Steps, sv)
		}
	}
	return v, nil
}

// stepState sums up a step's runs: the worst of them, or done.
func stepState(p store.Pipeline, s spec.Step, runs []store.PipelineRun) (state, reason, commit string) {
	if len(runs) == 0 {
		return "pending", "", ""
	}
	last := runs[len(runs)-1]
	if p.State == store.PipelineCancelled {
		for _, r := range runs {
			if r.State == store.RunFailed && strings.HasPrefix(r.Reason, stoppedPrefix) {
				return "cancelled", r.Reason, ""
			}
		}
	}
	for _, want := range []store.PipelineRunState{store.RunFailed, store.RunUnknown, store.RunNeedsHuman, store.RunRunning, store.RunWaiting} {
		for _, r := range runs {
			if r.State == want && (r.State != store.RunFailed || r.Key == last.Key || s.ForEach != nil) {
				if want == store.RunWaiting {
					return "running", r.Reason, ""
				}
				return string(want), r.Reason, ""
			}
		}
	}
	if last.State == store.RunSkipped {
		return "skipped", last.Reason, last.Commit
	}
	switch {
	case s.ForEach != nil && len(s.ForEach.Items) > 0 && len(runs) < len(s.ForEach.Items):
		return "running", "", ""
	case s.Loop != nil:
		if v, err := spec.ParseVerdict([]byte(last.Summary)); err != nil || !v.Approved {
			if p.State == store.PipelineNeedsHuman && strings.Contains(p.Reason, "step "+s.ID+" ") {
				return "needs_human", p.Reason, last.Commit
			}
			if p.State == store.PipelineFailed && strings.Contains(p.Reason, "step "+s.ID+" ") {
				return "failed", p.Reason, last.Commit
			}
			if p.State == store.PipelineRunning {
				return "running", "", ""
			}
			return "stopped", "", last.Commit
		}
	}
	if p.State == store.PipelineCancelled && last.State != store.RunDone {
		return "cancelled", "", ""
	}
	return "done", "", last.Commit
}

// publication is a publish step's outcome.
func (e *Engine) publication(ctx context.Context, r store.PipelineRun) *apitypes.PipelineStaged {
	out := &apitypes.PipelineStaged{Job: r.JobID, Commit: r.Commit}
	if r.State == store.RunSkipped && strings.HasPrefix(r.Reason, "staged") {
		out.Staged, out.Branch = true, "drover/"+r.JobID
		return out
	}
	if r.JobID != "" {
		if jv, err := e.core.Job(ctx, r.JobID); err == nil && jv.Publication != nil {
			out.Done, out.Mode, out.Branch = jv.Publication, jv.Publication.Mode, jv.Publication.Branch
		}
	}
	return out
}
