// Package eval runs evaluations on the hub: a dataset of SWE-bench-shaped
// instances, each run by one agent (attempts × repeats samples), each
// sample's result graded by a job of its own. It is a capability over the
// hub's core: it declares what it needs (Core), keeps its records in the
// store (evals and their items), and the hub mounts its operations.
//
// Nothing runs twice. Every job is submitted with an idempotency key made
// of the evaluation, the instance, the repeat and the attempt, before the
// item records it, so a hub that dies between the two finds the same job
// when it carries on. The grade cannot be moved by the agent: the graded
// commit is the base with the agent's changes to files other than tests
// (its changes to tests are dropped), and the grading job is an exec job
// with no network and no agent that runs the base's tests there.
package eval

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"time"

	"drover/internal/apitypes"
	"drover/internal/coalesce"
	"drover/internal/gitcmd"
	"drover/internal/hub/call"
	"drover/internal/store"
	"drover/internal/tick"
)

// Core is what evaluations need of the hub's core.
type Core interface {
	// Caller is user userID as a caller: the requester, on whose behalf
	// the evaluation's jobs run.
	Caller(ctx context.Context, userID string) (call.Caller, error)
	// Source checks that c may run jobs on project at base, and returns
	// the hub's bare repository of the project.
	Source(ctx context.Context, c call.Caller, project, base string) (repoDir string, err error)
	// Prepare checks a job c submits, outside any write; a refusal is
	// a *call.Refusal.
	Prepare(ctx context.Context, c call.Caller, req apitypes.SubmitRequest) (Submission, error)
	// Record makes a completed job of c at a commit the hub made (the
	// graded commit), or finds the one with the same key; the job's ref
	// keeps the commit.
	Record(ctx context.Context, c call.Caller, r Recorded) (apitypes.JobView, error)
	// Jobs reads jobs, in the order of ids, as much of each as a pass
	// needs: its state, reason, exit code and head, and its attempts'
	// usage and messages. A job that does not exist has an empty ID.
	Jobs(ctx context.Context, ids []string) ([]apitypes.JobView, error)
	// Cancel cancels a job as c, fenced.
	Cancel(ctx context.Context, c call.Caller, id string) error
	// Leading says whether this hub runs the hub-wide duties now: only
	// the leader advances evaluations.
	Leading() bool
}

// Submission is a job checked for its submit, written by the evaluation's
// own write: a pass's jobs and the items that record them are one commit
// (each job a commit of its own made a pass, and every job end waiting
// on it, several commits long).
type Submission interface {
	// Insert queues the job in tx, or finds the one submitted with the
	// same key, and says its id and whether it is new. It may run again,
	// in a retried write.
	Insert(tx store.Tx) (jobID string, created bool, err error)
	// Submitted tells the hub of the job once the write committed.
	Submitted(ctx context.Context)
}

// Recorded is a commit the hub made: Head, from Base on Project.
type Recorded struct {
	Key, Project, Base, Head, Summary string
}

// Config is what an Evals needs besides the core.
type Config struct {
	Store  store.Store
	Git    gitcmd.Git
	Logger *slog.Logger
	Now    func() time.Time
	// Sweep is how often the leader looks at every running evaluation,
	// besides when one of its jobs changes; 0 is DefaultSweep.
	Sweep time.Duration
	// Lazy is how soon a change of an evaluation's job is taken up by a
	// pass; 0 is LazyWake.
	Lazy time.Duration
}

// DefaultSweep bounds how long an evaluation waits on a change this hub
// did not see.
const DefaultSweep = 5 * time.Second

// KeyPrefix starts the idempotency keys of the jobs evaluations submit;
// such a job publishes nothing.
const KeyPrefix = "eval:"

// OwnsKey says whether a job's idempotency key is an evaluation's.
func OwnsKey(key string) bool { return strings.HasPrefix(key, KeyPrefix) }

// Evals runs the hub's evaluations and answers the API's calls on them.
type Evals struct {
	core Core
	cfg  Config
	log  *slog.Logger
	ctx  context.Context
	wg   sync.WaitGroup

	// adv advances an evaluation, one pass at a time.
	adv *coalesce.Runner
	// tell tells the hub of the jobs hand-offs submitted (untold), in the
	// background: its git process (the job's ref) held up the runner's
	// finish.
	tell   *coalesce.Runner
	untold []Submission

	mu sync.Mutex
	// watch maps the jobs of running items to their evaluations, from the
	// pass that first read them; changed holds those of them that changed
	// since a pass last read them, full the evaluations whose next pass
	// reads every running item's job (the sweep's).
	watch   map[string]string
	changed map[string]bool
	full    map[string]bool
	// lazy holds the evaluations a pass is due for within LazyWake.
	lazy map[string]bool
}

// New is an Evals over core, whose background work lives as long as ctx.
func New(ctx context.Context, core Core, cfg Config) *Evals {
	if cfg.Sweep == 0 {
		cfg.Sweep = DefaultSweep
	}
	if cfg.Lazy == 0 {
		cfg.Lazy = LazyWake
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	e := &Evals{core: core, cfg: cfg, log: cfg.Logger, ctx: ctx,
		watch: map[string]string{}, changed: map[string]bool{}, full: map[string]bool{}, lazy: map[string]bool{}}
	e.adv = coalesce.New(ctx, func(ctx context.Context, id string) {
		if err := e.advance(ctx, id); err != nil && ctx.Err() == nil {
			e.log.Warn("could not advance an evaluation; the sweep tries again", "eval", id, "err", err)
		}
	})
	e.tell = coalesce.New(ctx, func(ctx context.Context, _ string) {
		for {
			e.mu.Lock()
			subs := e.untold
			e.untold = nil
			e.mu.Unlock()
			if len(subs) == 0 {
				return
			}
			for _, s := range subs {
				s.Submitted(ctx)
			}
		}
	})
	e.wg.Add(1)
	go func() { defer e.wg.Done(); e.sweepLoop(ctx) }()
	return e
}

// Wait waits for the background work once the hub's context ended.
func (e *Evals) Wait() {
	e.wg.Wait()
	e.adv.Wait()
	e.tell.Wait()
}

// LazyWake is how soon a change of one of an evaluation's jobs is taken
// up by a pass. A runner's finish hands the job's sample on at once
// (JobEnded), and wakes the pass itself when it leaves it something: the
// pass is for the other changes (a job cancelled or expired, one finished
// on another hub), and at every offer and start it only read, as many
// passes as jobs (BenchmarkEvalOverhead).
const LazyWake = 500 * time.Millisecond

// JobChanged has the evaluation a job belongs to, if any, advanced within
// Config.Lazy.
func (e *Evals) JobChanged(jobID string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	id, ok := e.watch[jobID]
	if !ok {
		return
	}
	e.changed[jobID] = true
	if e.lazy[id] {
		return
	}
	e.lazy[id] = true
	time.AfterFunc(e.cfg.Lazy, func() {
		e.mu.Lock()
		delete(e.lazy, id)
		e.mu.Unlock()
		e.wake(id)
	})
}

// watchNew watches job jobID of evaluation evalID from its insert on,
// before its write commits: no pass need read a job just queued, and a
// change after the commit is not lost. One found by its key (a pass cut
// short, a hub restarted) may have changed already: the next pass reads
// it.
func (e *Evals) watchNew(jobID, evalID string, created bool) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.watch[jobID] = evalID
	if created {
		delete(e.changed, jobID)
	} else {
		e.changed[jobID] = true
	}
}

// toRead says whether a pass of evaluation evalID must read job jobID: a
// job no pass has read yet (just submitted, or this hub has just started
// to lead), one that changed since, or any on a full pass. It watches the
// job before the pass reads it, so a change after that read is not lost.
func (e *Evals) toRead(jobID, evalID string, full bool) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	_, watched := e.watch[jobID]
	changed := e.changed[jobID]
	e.watch[jobID] = evalID
	delete(e.changed, jobID)
	return full || !watched || changed
}

// fullPass takes whether evaluation id's pass is to read every running
// item's job.
func (e *Evals) fullPass(id string) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	full := e.full[id]
	delete(e.full, id)
	return full
}

// reread has the next pass read jobs a pass could not.
func (e *Evals) reread(jobIDs ...string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, id := range jobIDs {
		if _, ok := e.watch[id]; ok {
			e.changed[id] = true
		}
	}
}

func (e *Evals) unwatch(jobID string) {
	e.mu.Lock()
	delete(e.watch, jobID)
	delete(e.changed, jobID)
	e.mu.Unlock()
}

// wake advances evaluation id in the background, once more if it is
// being advanced now.
func (e *Evals) wake(id string) {
	if e.core.Leading() {
		e.adv.Wake(id)
	}
}

// sweepLoop advances every running evaluation now and then while this
// hub leads: at its start (a restarted hub carries on), and for changes
// it was not told of.
func (e *Evals) sweepLoop(ctx context.Context) {
	e.sweep(ctx)
	// On whole multiples of the interval (internal/tick): in the wakeup the
	// hub's other periodic work and the runners' heartbeats already cause,
	// not in one of its own.
	tick.Every(ctx, e.cfg.Sweep, func() bool { e.sweep(ctx); return true })
}

// sweep marks every running evaluation for a full read and wakes it, if
// this hub leads.
func (e *Evals) sweep(ctx context.Context) {
	if !e.core.Leading() {
		return
	}
	var evs []store.Eval
	err := e.cfg.Store.Read(ctx, func(tx store.Tx) error {
		var err error
		evs, err = tx.Evals(store.EvalRunning, 0)
		return err
	})
	if err != nil && ctx.Err() == nil {
		e.log.Warn("could not list the running evaluations", "err", err)
	}
	for _, ev := range evs {
		e.mu.Lock()
		e.full[ev.ID] = true // for changes it was not told of
		e.mu.Unlock()
		e.wake(ev.ID)
	}
}
