package hub

import (
	"context"
	"errors"
	"fmt"

	"drover/internal/apitypes"
	"drover/internal/eval"
	"drover/internal/hub/call"
	"drover/internal/pipeline"
	"drover/internal/store"
)

// evalCore adapts the core to eval.Core: evaluations are a package of
// their own (internal/eval) whose agent and grading jobs are ordinary
// jobs. It is pipelineCore's operations, the same rules.
type evalCore struct{ pipelineCore }

var _ eval.Core = evalCore{}

// Prepare checks req for c, outside any write: its job is written by the
// evaluation's write that records its item (Insert), so that a pass's
// submissions and records are one commit, not one each.
func (a evalCore) Prepare(ctx context.Context, c call.Caller, req apitypes.SubmitRequest) (eval.Submission, error) {
	s, err := a.h.prepareSubmit(ctx, nil, c, req)
	if err != nil {
		return nil, err
	}
	return evalSubmission{a.h, s}, nil
}

// evalSubmission is a job an evaluation writes in its own transaction.
type evalSubmission struct {
	h *Hub
	s *submission
}

func (s evalSubmission) Insert(tx store.Tx) (string, bool, error) {
	if err := s.s.insert(tx); err != nil {
		return "", false, fmt.Errorf("submit job: %w", err)
	}
	return s.s.j.ID, s.s.created, nil
}

func (s evalSubmission) Submitted(ctx context.Context) { s.h.afterSubmit(ctx, s.s) }

// Record makes a completed job of c at a commit the hub made: an
// evaluation's graded commit.
func (a evalCore) Record(ctx context.Context, c call.Caller, r eval.Recorded) (apitypes.JobView, error) {
	return a.pipelineCore.Record(ctx, c, pipeline.Recorded{Key: r.Key, Project: r.Project, Base: r.Base, Head: r.Head,
		Agent: "eval", Summary: r.Summary})
}

// Jobs reads jobs ids in one transaction, as much of each as an
// evaluation's pass reads: its state and result, and its attempts' usage
// and messages. A pass read each job's whole view (its runners' and
// requester's names, its publication and questions) in a transaction of
// its own, the most of what an evaluation cost the hub beside the same
// jobs plain (BenchmarkEvalOverhead).
func (a evalCore) Jobs(ctx context.Context, ids []string) ([]apitypes.JobView, error) {
	vs := make([]apitypes.JobView, len(ids))
	err := a.h.store.Read(ctx, func(tx store.Tx) error {
		for i, id := range ids {
			j, err := tx.Job(id)
			if errors.Is(err, store.ErrNotFound) {
				vs[i] = apitypes.JobView{}
				continue
			} else if err != nil {
				return fmt.Errorf("read job %s: %w", id, err)
			}
			if vs[i], err = evalJobView(tx, j); err != nil {
				return err
			}
		}
		return nil
	})
	return vs, err
}

// evalJobView is as much of job j's view as an evaluation reads.
func evalJobView(tx store.Tx, j store.Job) (apitypes.JobView, error) {
	atts, err := tx.Attempts(j.ID)
	if err != nil {
		return apitypes.JobView{}, fmt.Errorf("read job %s's attempts: %w", j.ID, err)
	}
	return attemptsView(j, atts), nil
}

// attemptsView is evalJobView of job j with its attempts atts.
func attemptsView(j store.Job, atts []store.Attempt) apitypes.JobView {
	v := apitypes.JobView{ID: j.ID, State: j.State, Reason: j.Reason, ExitCode: j.ExitCode, Head: j.Head,
		Attempts: make([]apitypes.AttemptView, len(atts))}
	for k, at := range atts {
		v.Attempts[k] = apitypes.AttemptView{ID: at.ID, Number: at.Epoch, State: at.State, Reason: at.Reason,
			Message: at.Message, Usage: attemptUsage(at)}
	}
	return v
}

// evalEnder hands the end of an evaluation's job to internal/eval in the
// write that ends it (eval.Evals.JobEnded): its sample's next job goes in
// the same commit.
type evalEnder struct{ h *Hub }

func (a evalEnder) JobEnded(ctx context.Context, tx store.Tx, j store.Job, at store.Attempt) (func(context.Context), error) {
	if !eval.OwnsKey(j.Key) {
		return nil, nil
	}
	return a.h.evals.JobEnded(ctx, evalEnding{a.h, tx, j, at}, j.ID, j.Key)
}

// evalEnding is the core in the write that ends job j, its attempt at
// finished.
type evalEnding struct {
	h  *Hub
	tx store.Tx
	j  store.Job
	at store.Attempt
}

var _ eval.Ending = evalEnding{}

func (x evalEnding) Tx() store.Tx { return x.tx }

func (x evalEnding) Caller(userID string) (call.Caller, error) { return userPrincipal(x.tx, userID) }

// Job is the job's view; a job's first attempt (attempts are numbered by
// their epochs) is its only one, as the write holds it: the attempts'
// read was 7 % of a hand-off's CPU (BenchmarkEvalOverhead).
func (x evalEnding) Job() (apitypes.JobView, error) {
	if x.at.Epoch == 1 && x.at.JobID == x.j.ID {
		return attemptsView(x.j, []store.Attempt{x.at}), nil
	}
	return evalJobView(x.tx, x.j)
}

// Prepare checks req as a submit does, in the write; what would run git
// there is left to the evaluation's pass.
func (x evalEnding) Prepare(ctx context.Context, c call.Caller, req apitypes.SubmitRequest) (eval.Submission, error) {
	s, err := x.h.prepareSubmit(ctx, x.tx, c, req)
	if errors.Is(err, errOutsideWrite) {
		return nil, eval.ErrOutsideWrite
	} else if err != nil {
		return nil, err
	}
	return evalSubmission{x.h, s}, nil
}
