package hub

import (
	"context"

	"drover/internal/apitypes"
	"drover/internal/attemptgroup"
	"drover/internal/hub/call"
)

// groupCore adapts the core to attemptgroup.Core: a group of attempts is
// a pipeline run the pipeline engine carries out.
type groupCore struct{ h *Hub }

var _ attemptgroup.Core = groupCore{}

func (a groupCore) RunPipeline(ctx context.Context, c call.Caller, req apitypes.PipelineRunRequest) (apitypes.PipelineView, bool, error) {
	return a.h.pipelines.RunPipeline(ctx, c, req)
}

func (a groupCore) ShowPipeline(ctx context.Context, c call.Caller, id string) (apitypes.PipelineView, error) {
	return a.h.pipelines.ShowPipeline(ctx, c, id)
}

func (a groupCore) Job(ctx context.Context, id string) (apitypes.JobView, error) {
	return a.h.jobView(ctx, call.Caller{Admin: true, Name: "hub"}, id)
}

func (a groupCore) Dir(project string) string { return a.h.repos.Dir(project) }

func (a groupCore) CreateRef(ctx context.Context, project, ref, commit string) error {
	return a.h.repos.UpdateRef(ctx, project, ref, commit, "")
}

func (a groupCore) Publish(ctx context.Context, c call.Caller, jobID string) (apitypes.PublicationView, error) {
	return a.h.publisher.PublishJob(ctx, c, jobID, apitypes.PublishRequest{})
}

// Settle lets a group act on its judge before its pipeline ends (pick by
// the judge's ranking); any other pipeline settles as it is.
func (a pipelineCore) Settle(ctx context.Context, c call.Caller, id, file string) error {
	return a.h.groups.Settle(ctx, c, id, file)
}
