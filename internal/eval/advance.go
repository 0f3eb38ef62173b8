package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
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
// the evaluation when every item has. It reads only the items it may move
// (EvalOpenItems): it runs at every change of the evaluation's jobs.
//
// A pass commits once: it first reads the jobs of its running items (no
// commit), so it knows which end and how many keep running, then submits
// the grading jobs of those whose agent ended and the agent jobs of the
// queued items that may start, all at once, and records every item it
// moved in one write. A pass recorded the ended ones, then submitted the
// next ones and recorded them: four commits one after the other, while
// every change of the evaluation's jobs waited for the pass to end.
func (e *Evals) advance(ctx context.Context, id string) error {
	var ev store.Eval
	var items []store.EvalItem
	err := e.cfg.Store.Read(ctx, func(tx store.Tx) (err error) {
		if ev, err = tx.Eval(id); err != nil || ev.State != store.EvalRunning {
			return err
		}
		var p Params
		if err := json.Unmarshal([]byte(ev.Params), &p); err != nil {
			return nil // reported below
		}
		// At most max_parallel queued items can start in one pass.
		items, err = tx.EvalOpenItems(id, p.MaxParallel)
		return err
	})
	if err != nil {
		return fmt.Errorf("read evaluation %s and its open items: %w", id, err)
	}
	if ev.State != store.EvalRunning && ev.State != store.EvalCancelled {
		return nil
	}
	c, err := e.core.Caller(ctx, ev.RequesterID)
	if err != nil {
		return fmt.Errorf("evaluation %s's requester: %w", id, err)
	}
	if ev.State == store.EvalCancelled {
		return e.skip(ctx, c, id, "the evaluation was "+ev.Reason, true, nil)
	}
	var p Params
	if err := json.Unmarshal([]byte(ev.Params), &p); err != nil {
		return fmt.Errorf("evaluation %s's settings: %w", id, err)
	}
	// Only the running items whose job changed since a pass read it are
	// read again: a pass runs at every change of one of them.
	full := e.fullPass(id)
	var busy, check, queued []*store.EvalItem
	for i := range items {
		it := &items[i]
		switch it.State {
		case store.ItemQueued:
			queued = append(queued, it)
		case store.ItemAgent:
			busy = append(busy, it)
			if e.toRead(it.AgentJob, id, full) {
				check = append(check, it)
			}
		default:
			busy = append(busy, it)
			if e.toRead(it.GradeJob, id, full) {
				check = append(check, it)
			}
		}
	}
	ending, readErr := e.ended(ctx, c, ev, p, check)
	running := len(busy)
	for _, it := range busy {
		if s, ok := ending[it]; ok && !s.runs {
			running--
		}
	}
	do := func(it *store.EvalItem) (*pending, error) {
		if s, ok := ending[it]; ok {
			return s.move(it)
		}
		return e.startAgent(ctx, c, ev, p, it, e.core.Prepare)
	}
	var moving []*store.EvalItem
	for _, it := range busy {
		if _, ok := ending[it]; ok {
			moving = append(moving, it)
		}
	}
	if len(queued) > 0 && p.MaxCostUSD > 0 {
		spent, err := e.spent(ctx, id, busy)
		if err != nil {
			return errors.Join(readErr, err)
		}
		if spent >= p.MaxCostUSD {
			if err := e.move(ctx, moving, do, p.MaxParallel); err != nil {
				return errors.Join(readErr, err)
			}
			if err := e.skip(ctx, c, id, fmt.Sprintf("the evaluation's max cost of $%.2f was spent ($%.2f)", p.MaxCostUSD, spent), false, nil); err != nil {
				return errors.Join(readErr, err)
			}
			e.wake(id) // the running ones end it
			return readErr
		}
	}
	open := running + len(queued)
	if n := p.MaxParallel - running; n < len(queued) {
		queued = queued[:max(n, 0)]
	}
	if err := e.move(ctx, append(moving, queued...), do, p.MaxParallel); err != nil || readErr != nil {
		return errors.Join(readErr, err)
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

// step is how a pass moves a running item whose job ended.
type step struct {
	move func(*store.EvalItem) (*pending, error)
	// runs says whether the item is still running after it: its grading
	// starts.
	runs bool
}

// ended reads the jobs of running items, in one read, and returns the
// steps of those whose job ended. An item whose job could not be read is
// left for the next pass.
func (e *Evals) ended(ctx context.Context, c call.Caller, ev store.Eval, p Params, its []*store.EvalItem) (map[*store.EvalItem]step, error) {
	ids := make([]string, len(its))
	for i, it := range its {
		ids[i] = it.GradeJob
		if it.State == store.ItemAgent {
			ids[i] = it.AgentJob
		}
	}
	if len(ids) == 0 {
		return nil, nil
	}
	views, err := e.core.Jobs(ctx, ids)
	if err != nil {
		e.reread(ids...)
		return nil, fmt.Errorf("read %d jobs of evaluation %s: %w", len(ids), ev.ID, err)
	}
	errs := make([]error, len(its))
	for i, it := range its {
		if views[i].ID == "" {
			e.reread(ids[i])
			errs[i] = fmt.Errorf("item %s's job %s: %w", it.Key, ids[i], store.ErrNotFound)
		}
	}
	ending := map[*store.EvalItem]step{}
	for i, it := range its {
		v := views[i]
		if errs[i] != nil {
			continue
		}
		if it.State == store.ItemAgent {
			it.CostUSD, it.Tokens = v.Spent()
		}
		if !v.State.Terminal() {
			continue
		}
		e.unwatch(v.ID)
		if it.State == store.ItemAgent && v.State == job.Completed {
			ending[it] = step{move: func(it *store.EvalItem) (*pending, error) { return e.agentDone(ctx, c, ev, p, it, v) }, runs: true}
		} else {
			ending[it] = step{move: func(it *store.EvalItem) (*pending, error) { return e.endedBy(ctx, c, ev, p, it, v, nil) }}
		}
	}
	return ending, errors.Join(errs...)
}

// preparer checks a job c submits: Core.Prepare, or Ending.Prepare in the
// write that ends a job.
type preparer func(ctx context.Context, c call.Caller, req apitypes.SubmitRequest) (Submission, error)

// endedBy moves item it, whose job v ended: graded, ended unresolved, or
// on to its grading, the job it returns (prepared by prep). A pass and a
// job's hand-off (JobEnded) move an item alike.
func (e *Evals) endedBy(ctx context.Context, c call.Caller, ev store.Eval, p Params, it *store.EvalItem, v apitypes.JobView, prep preparer) (*pending, error) {
	switch {
	case it.State != store.ItemAgent:
		gradedBy(it, v)
		return nil, nil
	case v.State != job.Completed:
		it.State, it.Reason = store.ItemUnresolved, "the agent's job "+ended(v)
		return nil, nil
	}
	return e.grade(ctx, c, ev, p, it, v, prep)
}

// spent is what an evaluation's items cost so far: the recorded cost of
// those not running, and what the running ones (busy, as this pass left
// them) have spent until now.
func (e *Evals) spent(ctx context.Context, id string, busy []*store.EvalItem) (float64, error) {
	var tallies []store.EvalTally
	if err := e.cfg.Store.Read(ctx, func(tx store.Tx) (err error) { tallies, err = tx.EvalTallies(id); return err }); err != nil {
		return 0, fmt.Errorf("read what evaluation %s spent: %w", id, err)
	}
	spent := 0.0
	for _, t := range tallies {
		if t.State.Terminal() || t.State == store.ItemQueued {
			spent += t.CostUSD
		}
	}
	for _, it := range busy {
		if !it.State.Terminal() {
			spent += it.CostUSD
		}
	}
	return spent, nil
}

// submitters bounds the items one pass moves at once.
const submitters = 8

// pending is a job a move submits: the write that records the move
// writes it too.
type pending struct {
	sub Submission
	// took moves the item to the job, once written.
	took func(it *store.EvalItem, jobID string)
}

// move runs f on every item, submitters at a time, and writes the jobs f
// submits and records the items it moved to another state in one
// transaction; an item f failed on is left as it was, for the next pass.
// The write reads the items again: one a job's hand-off (JobEnded) moved
// since the pass read it is left as that moved it, and a queued one starts
// only while fewer than maxParallel run (the hand-offs start some too).
// The items are apart, and moving one mostly waits (on a job's checks, a
// git process): one at a time, an evaluation went at the pace of one job
// at a time. A job goes in with its key in the write that records its
// item, so a pass cut short leaves neither, and a job found by its key is
// never submitted twice. Each job its own commit made a pass several
// commits long, and every job end waited for it (BenchmarkEvalOverhead).
func (e *Evals) move(ctx context.Context, its []*store.EvalItem, f func(*store.EvalItem) (*pending, error), maxParallel int) error {
	before := make([]store.EvalItem, len(its))
	pend := make([]*pending, len(its))
	errs := make([]error, len(its)+1)
	sem := make(chan struct{}, submitters)
	var wg sync.WaitGroup
	for i, it := range its {
		before[i] = *it
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			pend[i], errs[i] = f(it)
		})
	}
	wg.Wait()
	var evalID string
	for i, it := range its {
		if errs[i] != nil {
			*it, pend[i] = before[i], nil
		} else if pend[i] != nil || it.State != before[i].State {
			evalID = it.EvalID
		}
	}
	if evalID == "" {
		return errors.Join(errs...)
	}
	at := e.cfg.Now()
	recorded := make([]*store.EvalItem, len(its))
	var inserted []string
	found := false // a job found by its key: the next pass reads it
	err := e.cfg.Store.Write(ctx, func(tx store.Tx) error {
		inserted, found = inserted[:0], false
		ev, err := tx.Eval(evalID)
		if err != nil {
			return err
		}
		starts := 0
		for i := range its {
			if before[i].State == store.ItemQueued {
				starts++
			}
		}
		open, err := tx.EvalOpenItems(evalID, starts)
		if err != nil {
			return err
		}
		now := make(map[string]store.EvalItem, len(open))
		running := 0
		for _, it := range open {
			now[it.Key] = it
			if it.State != store.ItemQueued {
				running++
			}
		}
		for i, it := range its {
			recorded[i] = nil
			cur := *it
			if n, ok := now[it.Key]; errs[i] != nil || !ok || n.State != before[i].State || n.AgentJob != before[i].AgentJob || n.GradeJob != before[i].GradeJob {
				continue // moved meanwhile, by a hand-off
			}
			if pend[i] != nil && before[i].State == store.ItemQueued && running >= maxParallel {
				continue // a hand-off started another in its place
			}
			if ev.State != store.EvalRunning && (pend[i] != nil || cur.State.Terminal()) {
				// Cancelled meanwhile: the cancel skipped the item (or the
				// next pass does); what this pass saw of its jobs ending
				// is the cancel's doing, not a result, and it starts none.
				continue
			}
			if pend[i] != nil {
				id, created, err := pend[i].sub.Insert(tx)
				if err != nil {
					return fmt.Errorf("item %s's job: %w", it.Key, err)
				}
				e.watchNew(id, evalID, created)
				inserted, found = append(inserted, id), found || !created
				pend[i].took(&cur, id)
			}
			if cur.State == before[i].State {
				continue
			}
			cur.UpdatedAt = at
			if err := tx.PutEvalItem(cur); err != nil {
				return err
			}
			running += runs(cur) - runs(before[i])
			recorded[i] = &cur
		}
		return nil
	})
	if err != nil {
		errs[len(its)] = fmt.Errorf("record the items of evaluation %s: %w", evalID, err)
		for i, it := range its {
			*it = before[i]
		}
		for _, id := range inserted {
			e.unwatch(id) // not written: no item names it
		}
		return errors.Join(errs...)
	}
	for i, it := range its {
		if recorded[i] != nil {
			*it = *recorded[i]
		}
		if pend[i] != nil && recorded[i] != nil {
			pend[i].sub.Submitted(ctx)
		}
	}
	if found {
		e.wake(evalID)
	}
	return errors.Join(errs...)
}

// runs is 1 for an item at its agent or grading.
func runs(it store.EvalItem) int {
	if it.State == store.ItemAgent || it.State == store.ItemGrading {
		return 1
	}
	return 0
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
// leaves writing the job and recording the item to move.
func (e *Evals) startAgent(ctx context.Context, c call.Caller, ev store.Eval, p Params, it *store.EvalItem, prep preparer) (*pending, error) {
	in, err := instanceOf(it)
	if err != nil {
		return nil, err
	}
	req := apitypes.SubmitRequest{Agent: ev.Agent, Model: p.Model, Key: jobKey(it, "agent"),
		Repo: &apitypes.SubmitRepo{Project: in.Repo, Base: in.BaseCommit}, Args: []string{in.ProblemStatement}, Image: in.Image}
	if ev.Agent == "exec" {
		req.Model, req.Args = "", []string{"sh", "-c", p.Exec, "drover-eval", in.ProblemStatement}
	} else if a, err := request.ParseAgent(ev.Agent); err == nil {
		// AGENT:ACCOUNT pins the job to the account (checked at the start).
		req.Agent, req.Account = a.Agent, a.Account
	}
	sub, err := prep(ctx, c, req)
	if isRefusal(err) {
		it.State, it.Reason = store.ItemUnresolved, "its agent job was refused: "+rules.Clip(err.Error(), 300)
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("submit item %s's agent job: %w", it.Key, err)
	}
	return &pending{sub: sub, took: func(it *store.EvalItem, id string) { it.State, it.AgentJob = store.ItemAgent, id }}, nil
}

// agentDone moves an item whose agent job v completed: its patch is kept
// and its grading job started. When it cannot be graded it ends
// unresolved, and the evaluation is woken, a place freed that its pass
// counted as taken.
func (e *Evals) agentDone(ctx context.Context, c call.Caller, ev store.Eval, p Params, it *store.EvalItem, v apitypes.JobView) (*pending, error) {
	g, err := e.grade(ctx, c, ev, p, it, v, e.core.Prepare)
	if err == nil && it.State.Terminal() {
		e.wake(it.EvalID)
	}
	return g, err
}

func (e *Evals) grade(ctx context.Context, c call.Caller, ev store.Eval, p Params, it *store.EvalItem, v apitypes.JobView, prep preparer) (*pending, error) {
	in, err := instanceOf(it)
	if err != nil {
		return nil, err
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
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	it.Graded = graded
	if len(patch) <= MaxPatch {
		it.Patch = patch
	} else {
		it.Reason = fmt.Sprintf("model_patch of %d bytes not kept (over %d)", len(patch), MaxPatch)
	}
	req := apitypes.SubmitRequest{Agent: "exec", Key: jobKey(it, "grade"), Mode: protocol.ModeObserve, Network: []string{"none"},
		Repo: &apitypes.SubmitRepo{Project: in.Repo, Base: graded}, Args: gradeArgs(in, p.GradeWallS), Image: in.Image}
	sub, err := prep(ctx, c, req)
	if isRefusal(err) {
		it.State, it.Reason = store.ItemUnresolved, "its grading job was refused: "+rules.Clip(err.Error(), 300)
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("submit item %s's grading job: %w", it.Key, err)
	}
	return &pending{sub: sub, took: func(it *store.EvalItem, id string) { it.State, it.GradeJob = store.ItemGrading, id }}, nil
}

// gradedBy moves an item whose grading job v ended: resolved when every
// test passed.
func gradedBy(it *store.EvalItem, v apitypes.JobView) {
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
}

// skip skips an evaluation's queued items, and with running those at
// their agent or grading too, cancelling their jobs, for why. It reads
// the items in the write that skips them (after first, if given): a pass
// recording at the same moment is either seen here, or finds the
// evaluation no longer running and leaves the rest to the pass after it.
func (e *Evals) skip(ctx context.Context, c call.Caller, id, why string, running bool, first func(store.Tx) error) error {
	var jobs []string
	now := e.cfg.Now()
	err := e.cfg.Store.Write(ctx, func(tx store.Tx) error {
		jobs = jobs[:0]
		if first != nil {
			if err := first(tx); err != nil {
				return err
			}
		}
		items, err := tx.EvalOpenItems(id, math.MaxInt32)
		if err != nil {
			return err
		}
		for _, it := range items {
			if it.State != store.ItemQueued && !running {
				continue
			}
			jobs = append(jobs, it.AgentJob, it.GradeJob)
			it.State, it.Reason, it.UpdatedAt = store.ItemSkipped, why, now
			if err := tx.PutEvalItem(it); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("skip the items of evaluation %s: %w", id, err)
	}
	var errs []error
	for _, j := range jobs {
		if j == "" {
			continue
		}
		if err := e.core.Cancel(ctx, c, j); err != nil && !isRefusal(err) {
			errs = append(errs, fmt.Errorf("cancel job %s of evaluation %s: %w", j, id, err))
		}
		e.unwatch(j)
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
