package hub

import (
	"context"

	"drover/internal/apitypes"
	"drover/internal/eval"
	"drover/internal/hub/call"
	"drover/internal/pipeline"
)

// evalCore adapts the core to eval.Core: evaluations are a package of
// their own (internal/eval) whose agent and grading jobs are ordinary
// jobs. It is pipelineCore's operations, the same rules.
type evalCore struct{ pipelineCore }

var _ eval.Core = evalCore{}

// Record makes a completed job of c at a commit the hub made: an
// evaluation's graded commit.
func (a evalCore) Record(ctx context.Context, c call.Caller, r eval.Recorded) (apitypes.JobView, error) {
	return a.pipelineCore.Record(ctx, c, pipeline.Recorded{Key: r.Key, Project: r.Project, Base: r.Base, Head: r.Head,
		Agent: "eval", Summary: r.Summary})
}
