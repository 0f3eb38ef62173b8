package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"drover/internal/apitypes"
	"drover/internal/attemptgroup/request"
	"drover/internal/hub/call"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/rules"
	"drover/internal/store"
)

// advance brings a running evaluation's items up to date with their jobs,
// starts the queued ones that max_parallel and max_cost allow, and ends
// the evaluation when every item has.
func (e *Evals) advance(ctx context.Context, id string) error {
	var ev store.Eval
	var items []store.EvalItem
	err := e.cfg.Store.Read(ctx, func(tx store.Tx) error {
		var err error
		if ev, err = tx.Eval(id); err != nil {
			return err
		}
		items, err = tx.EvalItems(id)
		return err
	})
	if err != nil {
		return fmt.Errorf("read evaluation %s: %w", id, err)
	}
	c, err := e.core.Caller(ctx, ev.RequesterID)
	if err != nil {
		return fmt.Errorf("evaluation %s's requester: %w", id, err)
	}
	if ev.State == store.EvalCancelled {
		return e.stopItems(ctx, c, ev, items, ev.Reason)
	}
	if ev.State != store.EvalRunning {
		return nil
	}
	var p Params
	if err := json.Unmarshal([]byte(ev.Params), &p); err != nil {
		return fmt.Errorf("evaluation %s's settings: %w", id, err)
	}
	var busy []*store.EvalItem
	for i := range items {
		if s := items[i].State; s == store.ItemAgent || s == store.ItemGrading {
			busy = append(busy, &items[i])
		}
	}
	if err := e.move(ctx, busy, func(it *store.EvalItem) error {
		if it.State == store.ItemAgent {
			return e.agentDone(ctx, c, ev, p, it)
		}
		return e.graded(ctx, it)
	}); err != nil {
		return err
	}
	running, spent := 0, 0.0
	for i := range items {
		it := &items[i]
		if it.State == store.ItemAgent || it.State == store.ItemGrading {
			running++
		}
		spent += it.CostUSD
	}
	open := running
	var starts []*store.EvalItem
	for i := range items {
		it := &items[i]
		if it.State != store.ItemQueued {
			continue
		}
		if p.MaxCostUSD > 0 && spent >= p.MaxCostUSD {
			it.State, it.Reason = store.ItemSkipped, fmt.Sprintf("the evaluation's max cost of $%.2f was spent ($%.2f)", p.MaxCostUSD, spent)
			if err := e.put(ctx, it); err != nil {
				return err
			}
			continue
		}
		open++
		if running >= p.MaxParallel {
			continue
		}
		starts = append(starts, it)
		running++
	}
	if err := e.move(ctx, starts, func(it *store.EvalItem) error { return e.startAgent(ctx, c, ev, p, it) }); err != nil {
		return err
	}
	if open > 0 {
		return nil
	}
	ev.State, ev.UpdatedAt = store.EvalDone, e.cfg.Now()
	if err := e.cfg.Store.Write(ctx, func(tx store.Tx) error { return tx.UpdateEval(ev) }); err != nil {
		return fmt.Errorf("end evaluation %s: %w", id, err)
	}
	e.log.Info("evaluation done", "eval", id)
	return nil
}

// submitters bounds the items one pass moves at once.
const submitters = 8

// move runs f on every item, submitters at a time, and records those it
// moved to another state in one transaction; an item f failed on is left
// as it was, for the next pass. The items are apart, and moving one mostly
// waits (on a job's submission, a git process, a commit): one at a time,
// each recorded in a commit of its own, an evaluation went at the pace of
// one job at a time. A job is submitted with its key before its item
// records it, so a pass cut short finds the same job the next time.
func (e *Evals) move(ctx context.Context, its []*store.EvalItem, f func(*store.EvalItem) error) error {
	before := make([]store.EvalItem, len(its))
	errs := make([]error, len(its)+1)
	sem := make(chan struct{}, submitters)
	var wg sync.WaitGroup
	for i, it := range its {
		before[i] = *it
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			errs[i] = f(it)
		})
	}
	wg.Wait()
	var moved []store.EvalItem
	now := e.cfg.Now()
	for i, it := range its {
		switch {
		case errs[i] != nil:
			*it = before[i]
		case it.State != before[i].State:
			it.UpdatedAt = now
			moved = append(moved, *it)
		}
	}
	if len(moved) > 0 {
		errs[len(its)] = e.cfg.Store.Write(ctx, func(tx store.Tx) error {
			for _, it := range moved {
				if err := tx.PutEvalItem(it); err != nil {
					return err
				}
			}
			return nil
		})
		if errs[len(its)] != nil {
			errs[len(its)] = fmt.Errorf("record %d items of evaluation %s: %w", len(moved), moved[0].EvalID, errs[len(its)])
		}
	}
	return errors.Join(errs...)
}

// put records an item as it is now.
func (e *Evals) put(ctx context.Context, it *store.EvalItem) error {
	it.UpdatedAt = e.cfg.Now()
	if err := e.cfg.Store.Write(ctx, func(tx store.Tx) error { return tx.PutEvalItem(*it) }); err != nil {
		return fmt.Errorf("record item %s of evaluation %s: %w", it.Key, it.EvalID, err)
	}
	return nil
}

func instanceOf(it *store.EvalItem) (apitypes.EvalInstance, error) {
	var in apitypes.EvalInstance
	if err := json.Unmarshal([]byte(it.Instance), &in); err != nil {
		return in, fmt.Errorf("item %s's instance: %w", it.Key, err)
	}
	return in, nil
}

// jobKey is the idempotency key of an item's job of kind what.
func jobKey(it *store.EvalItem, what string) string {
	return fmt.Sprintf("%s%s:%s:%s", KeyPrefix, it.EvalID, it.Key, what)
}

// startAgent submits an item's agent job at its base, the problem
// statement its prompt. Like agentDone and graded, it moves the item and
// leaves recording it to move.
func (e *Evals) startAgent(ctx context.Context, c call.Caller, ev store.Eval, p Params, it *store.EvalItem) error {
	in, err := instanceOf(it)
	if err != nil {
		return err
	}
	req := apitypes.SubmitRequest{Agent: ev.Agent, Model: p.Model, Key: jobKey(it, "agent"),
		Repo: &apitypes.SubmitRepo{Project: in.Repo, Base: in.BaseCommit}, Args: []string{in.ProblemStatement}, Image: in.Image}
	if ev.Agent == "exec" {
		req.Model, req.Args = "", []string{"sh", "-c", p.Exec, "drover-eval", in.ProblemStatement}
	} else if a, err := request.ParseAgent(ev.Agent); err == nil {
		// AGENT:ACCOUNT pins the job to the account (checked at the start).
		req.Agent, req.Account = a.Agent, a.Account
	}
	v, err := e.core.Submit(ctx, c, req)
	if isRefusal(err) {
		it.State, it.Reason = store.ItemUnresolved, "its agent job was refused: "+rules.Clip(err.Error(), 300)
		return nil
	} else if err != nil {
		return fmt.Errorf("submit item %s's agent job: %w", it.Key, err)
	}
	it.State, it.AgentJob = store.ItemAgent, v.ID
	e.watchJob(v.ID, it.EvalID)
	// It may have ended before it was watched.
	e.wake(it.EvalID)
	return nil
}

// agentDone moves an item whose agent job ended: its patch is kept and
// its grading job started; an agent that failed leaves it unresolved. A
// job queued, parked on a usage window or running leaves it as it is.
func (e *Evals) agentDone(ctx context.Context, c call.Caller, ev store.Eval, p Params, it *store.EvalItem) error {
	v, err := e.core.Job(ctx, it.AgentJob)
	if err != nil {
		return fmt.Errorf("read item %s's agent job %s: %w", it.Key, it.AgentJob, err)
	}
	it.CostUSD, it.Tokens = v.Spent()
	if !v.State.Terminal() {
		e.watchJob(v.ID, it.EvalID)
		return nil
	}
	e.unwatch(v.ID)
	if v.State != job.Completed {
		it.State, it.Reason = store.ItemUnresolved, "the agent's job "+ended(v)
		return nil
	}
	in, err := instanceOf(it)
	if err != nil {
		return err
	}
	it.Head = v.Head
	if it.Head == "" {
		it.Head = in.BaseCommit
	}
	graded, patch, err := e.gradedCommit(ctx, c, ev, it, in)
	if err != nil && ctx.Err() == nil && (!errors.Is(err, errRecord) || isRefusal(err)) {
		// A result git cannot grade (or a project gone) is the sample's
		// end, not the evaluation's: it would fail again at every pass.
		e.log.Warn("could not make an evaluation item's graded commit", "eval", it.EvalID, "item", it.Key, "err", err)
		it.State, it.Reason = store.ItemUnresolved, "could not make the graded commit: "+rules.Clip(err.Error(), 300)
		return nil
	} else if err != nil {
		return err
	}
	it.Graded = graded
	if len(patch) <= MaxPatch {
		it.Patch = patch
	} else {
		it.Reason = fmt.Sprintf("model_patch of %d bytes not kept (over %d)", len(patch), MaxPatch)
	}
	req := apitypes.SubmitRequest{Agent: "exec", Key: jobKey(it, "grade"), Mode: protocol.ModeObserve, Network: []string{"none"},
		Repo: &apitypes.SubmitRepo{Project: in.Repo, Base: graded}, Args: gradeArgs(in, p.GradeWallS), Image: in.Image}
	g, err := e.core.Submit(ctx, c, req)
	if isRefusal(err) {
		it.State, it.Reason = store.ItemUnresolved, "its grading job was refused: "+rules.Clip(err.Error(), 300)
		return nil
	} else if err != nil {
		return fmt.Errorf("submit item %s's grading job: %w", it.Key, err)
	}
	it.State, it.GradeJob = store.ItemGrading, g.ID
	e.watchJob(g.ID, it.EvalID)
	e.wake(it.EvalID)
	return nil
}

// graded moves an item whose grading job ended: resolved when every test
// passed.
func (e *Evals) graded(ctx context.Context, it *store.EvalItem) error {
	v, err := e.core.Job(ctx, it.GradeJob)
	if err != nil {
		return fmt.Errorf("read item %s's grading job %s: %w", it.Key, it.GradeJob, err)
	}
	if !v.State.Terminal() {
		e.watchJob(v.ID, it.EvalID)
		return nil
	}
	e.unwatch(v.ID)
	switch {
	case v.State == job.Completed:
		it.State = store.ItemResolved
	case v.ExitCode != nil && *v.ExitCode == exitWall:
		it.State, it.Reason = store.ItemUnresolved, "a test ran past the grading wall limit"
	case v.ExitCode != nil && v.Reason == job.ReasonExited:
		it.State, it.Reason = store.ItemUnresolved, fmt.Sprintf("tests failed (exit %d)", *v.ExitCode)
	default:
		it.State, it.Reason = store.ItemUnresolved, "the grading job "+ended(v)
	}
	return nil
}

// stopItems cancels the jobs of an evaluation's items not over and skips
// them, for why.
func (e *Evals) stopItems(ctx context.Context, c call.Caller, ev store.Eval, items []store.EvalItem, why string) error {
	var errs []error
	for i := range items {
		it := &items[i]
		if it.State.Terminal() {
			continue
		}
		for _, id := range []string{it.AgentJob, it.GradeJob} {
			if id == "" {
				continue
			}
			if err := e.core.Cancel(ctx, c, id); err != nil && !isRefusal(err) {
				errs = append(errs, fmt.Errorf("cancel item %s's job %s: %w", it.Key, id, err))
			}
			e.unwatch(id)
		}
		it.State, it.Reason = store.ItemSkipped, why
		if err := e.put(ctx, it); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// ended says how a job that did not complete ended.
func ended(v apitypes.JobView) string {
	s := string(v.State)
	if v.Reason != "" {
		s += " (" + string(v.Reason) + ")"
	}
	if n := len(v.Attempts); n > 0 && v.Attempts[n-1].Message != "" {
		s += ": " + rules.Clip(v.Attempts[n-1].Message, 300)
	}
	return s
}

func isRefusal(err error) bool {
	var r *call.Refusal
	return errors.As(err, &r)
}
