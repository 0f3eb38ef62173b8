package hub

import (
	"context"

	"drover/internal/store"
)

// jobEnder is a capability that acts on a job's end in the write that
// ends it (a runner's finish): the job it submits next goes in the same
// commit, as a client submits its next job once it sees the end, with no
// pass of its own to wait for (an evaluation's next sample:
// BenchmarkEvalOverhead).
type jobEnder interface {
	// JobEnded is told in tx that job j ended, its attempt a finished.
	// After, if not nil, runs once tx committed, before the job's change
	// is told (notify). An error fails the write; tx may run again.
	JobEnded(ctx context.Context, tx store.Tx, j store.Job, a store.Attempt) (after func(context.Context), err error)
}

// jobEnded tells h's enders, in tx, that job j ended, if it did, as its
// attempt a finished; what it returns runs once tx committed.
func (h *Hub) jobEnded(ctx context.Context, tx store.Tx, j store.Job, a store.Attempt) (func(context.Context), error) {
	if !j.State.Terminal() {
		return nil, nil
	}
	var afters []func(context.Context)
	for _, e := range h.enders {
		after, err := e.JobEnded(ctx, tx, j, a)
		if err != nil {
			return nil, err
		}
		if after != nil {
			afters = append(afters, after)
		}
	}
	if len(afters) == 0 {
		return nil, nil
	}
	return func(ctx context.Context) {
		for _, a := range afters {
			a(ctx)
		}
	}, nil
}
