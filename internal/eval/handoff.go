package eval

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/job"
	"drover/internal/store"
)

// A job's hand-off: when a runner's finish ends one of an evaluation's
// jobs, the write that ends it moves its sample too, as a client submits
// its next job once it sees the end: the grading job after an agent job
// that left the base as it was, or, when the sample ended (graded, or its
// agent failed), the next queued sample's agent job. A job's end waited
// for the pass under way and then for its own pass (8-11 ms at p50,
// against a plain client's 0.4-1.5: BenchmarkEvalOverhead), and the
// passes' reads cost the hub as much again. What needs git (the graded
// commit of an agent's changes) or a check outside the write, a job that
// ended otherwise (cancelled, expired), max_cost's count and the sweep
// stay with the pass; its write reads the items again, so the two never
// move one item twice nor run more than max_parallel.

// Ending is the write that ends one of an evaluation's jobs, as its
// hand-off sees the core there.
type Ending interface {
	// Tx is the write.
	Tx() store.Tx
	// Caller is Core.Caller, read in the write.
	Caller(userID string) (call.Caller, error)
	// Job is the ended job as Core.Jobs reads it, in the write.
	Job() (apitypes.JobView, error)
	// Prepare is Core.Prepare in the write: ErrOutsideWrite when a check
	// would run git (or ask a forge), which a write must not wait on.
	Prepare(ctx context.Context, c call.Caller, req apitypes.SubmitRequest) (Submission, error)
}

// ErrOutsideWrite is a submission Ending.Prepare cannot check in the
// write: the pass submits it.
var ErrOutsideWrite = errors.New("the job's checks run outside a write")

// JobEnded moves, in the write x that ends job jobID (its idempotency key
// key), the evaluation's sample it was for, and starts the next queued
// one when that ended; after, if not nil, is to run once the write
// committed. It leaves to the pass what it cannot do in the write: then
// it writes nothing, and after wakes the pass. An error is the write's
// (it fails, and runs again).
//
// Only the leader hands off, as only it runs the passes: the jobs it
// submits are watched where a pass runs.
func (e *Evals) JobEnded(ctx context.Context, x Ending, jobID, key string) (after func(context.Context), err error) {
	evalID, itemKey, what, ok := parseJobKey(key)
	if !ok || (what != "agent" && what != "grade") || !e.core.Leading() {
		return nil, nil
	}
	tx := x.Tx()
	ev, err := tx.Eval(evalID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("read evaluation %s: %w", evalID, err)
	}
	var p Params
	if ev.State != store.EvalRunning || json.Unmarshal([]byte(ev.Params), &p) != nil {
		return nil, nil // the pass reports it, and skips a cancelled one's items
	}
	queued := 1
	if p.MaxCostUSD > 0 {
		queued = 0 // the pass counts what was spent before it starts one
	}
	cur, err := tx.EvalItem(evalID, itemKey)
	if errors.Is(err, store.ErrNotFound) {
		return nil, nil
	} else if err != nil {
		return nil, fmt.Errorf("read item %s of evaluation %s: %w", itemKey, evalID, err)
	}
	if !(cur.State == store.ItemAgent && cur.AgentJob == jobID || cur.State == store.ItemGrading && cur.GradeJob == jobID) {
		return nil, nil // moved already
	}
	it := &cur
	running, queue, err := tx.EvalRunning(evalID, queued)
	if err != nil {
		return nil, fmt.Errorf("read evaluation %s's running items: %w", evalID, err)
	}
	var next *store.EvalItem
	if len(queue) > 0 {
		next = &queue[0]
	}
	v, err := x.Job()
	if err != nil {
		return nil, fmt.Errorf("read evaluation %s's job %s: %w", evalID, jobID, err)
	}
	if !v.State.Terminal() {
		return nil, nil
	}
	if it.State == store.ItemAgent {
		if in, err := instanceOf(it); err != nil || v.State == job.Completed && v.Head != "" && v.Head != in.BaseCommit {
			return e.leave(evalID, jobID), nil // its graded commit needs git
		}
	}
	// A write whose read failed fails as a whole (the finish runs again);
	// a refusal, a record it cannot read or a check outside the write is
	// the pass's.
	c, err := x.Caller(ev.RequesterID)
	if err != nil {
		return e.leave(evalID, jobID), nil
	}
	if it.State == store.ItemAgent {
		it.CostUSD, it.Tokens = v.Spent()
	}
	var moves []move
	g, err := e.endedBy(ctx, c, ev, p, it, v, x.Prepare)
	if err != nil {
		e.log.Debug("an evaluation's hand-off left to its pass", "eval", evalID, "item", it.Key, "err", err)
		return e.leave(evalID, jobID), nil
	}
	moves = append(moves, move{it, g})
	pass := false // a place left for the pass to fill
	if it.State.Terminal() {
		running--
		switch {
		case queued == 0:
			pass = true // max_cost: the pass starts the next one
		case next == nil && running == 0:
			ev.State = store.EvalDone // its last sample ended
		case next != nil && running < p.MaxParallel:
			first := *next
			s, err := e.startAgent(ctx, c, ev, p, next, x.Prepare)
			switch {
			case err != nil:
				e.log.Debug("an evaluation's hand-off left a start to its pass", "eval", evalID, "item", next.Key, "err", err)
				*next, pass = first, true
			default:
				moves = append(moves, move{next, s})
				pass = next.State.Terminal() // refused: the pass starts the one after
			}
		}
	}
	now := e.cfg.Now()
	var subs []Submission
	for _, m := range moves {
		if m.job != nil {
			id, created, err := m.job.sub.Insert(tx)
			if err != nil {
				return nil, fmt.Errorf("item %s's job: %w", m.it.Key, err)
			}
			// Watched from its insert, as a pass's: a change after the
			// commit is not lost (a write that fails leaves an id that
			// never changes).
			e.watchNew(id, evalID, created)
			m.job.took(m.it, id)
			subs = append(subs, m.job.sub)
			pass = pass || !created // found by its key: the pass reads it
		}
		m.it.UpdatedAt = now
		if err := tx.MoveEvalItem(*m.it); err != nil {
			return nil, fmt.Errorf("record item %s of evaluation %s: %w", m.it.Key, evalID, err)
		}
	}
	if ev.State == store.EvalDone {
		ev.UpdatedAt = now
		if err := tx.UpdateEval(ev); err != nil {
			return nil, fmt.Errorf("end evaluation %s: %w", evalID, err)
		}
	}
	return func(ctx context.Context) {
		// Before the job's change is told: it wakes no pass.
		e.unwatch(jobID)
		if len(subs) > 0 {
			// The finish kicks the dispatcher itself.
			e.mu.Lock()
			e.untold = append(e.untold, subs...)
			e.mu.Unlock()
			e.tell.Wake("")
		}
		if ev.State == store.EvalDone {
			e.log.Info("evaluation done", "eval", evalID)
		}
		if pass {
			e.wake(evalID)
		}
	}, nil
}

// leave is a hand-off's after when it leaves the job's end to the pass:
// the pass reads the job, woken at once, not within Config.Lazy.
func (e *Evals) leave(evalID, jobID string) func(context.Context) {
	return func(context.Context) { e.reread(jobID); e.wake(evalID) }
}

// move is one item a hand-off moves, and the job it submits, if any.
type move struct {
	it  *store.EvalItem
	job *pending
}

// parseJobKey splits a job key of jobKey's making.
func parseJobKey(key string) (evalID, itemKey, what string, ok bool) {
	rest, ok := strings.CutPrefix(key, KeyPrefix)
	if !ok {
		return "", "", "", false
	}
	evalID, rest, ok1 := strings.Cut(rest, ":")
	i := strings.LastIndexByte(rest, ':')
	if !ok1 || i < 0 {
		return "", "", "", false
	}
	return evalID, rest[:i], rest[i+1:], true
}
