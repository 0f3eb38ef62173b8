package pipeline

import (
	"context"
	"sync"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
)

// Engine runs the hub's pipelines and answers the API's calls on them.
type Engine struct {
	core Core
	cfg  Config
	// ctx lives as long as the hub.
	ctx context.Context
	wg  sync.WaitGroup
}

// New is an Engine over core, whose background work lives as long as ctx.
func New(ctx context.Context, core Core, cfg Config) *Engine {
	if cfg.Sweep == 0 {
		cfg.Sweep = DefaultSweep
	}
	return &Engine{core: core, cfg: cfg, ctx: ctx}
}

// Wait waits for the background work once the hub's context ended.
func (s *Engine) Wait() { s.wg.Wait() }

func (s *Engine) RunPipeline(ctx context.Context, p call.Caller, req apitypes.PipelineRunRequest) (apitypes.PipelineView, bool, error) {
	return apitypes.PipelineView{}, false, call.BadRequest("pipelines are not available yet")
}

func (s *Engine) ListPipelines(ctx context.Context, p call.Caller, limit int) (apitypes.PipelineList, error) {
	return apitypes.PipelineList{Pipelines: []apitypes.PipelineView{}}, nil
}

func (s *Engine) ShowPipeline(ctx context.Context, p call.Caller, id string) (apitypes.PipelineView, error) {
	return apitypes.PipelineView{}, call.NotFound("no pipeline %s", id)
}

func (s *Engine) CancelPipeline(ctx context.Context, p call.Caller, id string) (apitypes.PipelineView, error) {
	return apitypes.PipelineView{}, call.NotFound("no pipeline %s", id)
}

func (s *Engine) RetryPipeline(ctx context.Context, p call.Caller, id string, req apitypes.PipelineRetryRequest) (apitypes.PipelineView, error) {
	return apitypes.PipelineView{}, call.NotFound("no pipeline %s", id)
}

func (s *Engine) PipelineEvents(ctx context.Context, p call.Caller, id string, after int64) (apitypes.PipelineEventList, error) {
	return apitypes.PipelineEventList{}, call.NotFound("no pipeline %s", id)
}
