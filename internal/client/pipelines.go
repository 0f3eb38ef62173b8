package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"drover/internal/apitypes"
)

// RunPipeline starts a pipeline. started is false when the request's Key
// matched a pipeline the caller started before (that one is returned); a
// keyed request is sent again when the hub was not reached, since the hub
// answers a repeat with the same pipeline.
func (c *Client) RunPipeline(ctx context.Context, req apitypes.PipelineRunRequest) (v apitypes.PipelineView, started bool, err error) {
	status, err := c.do(ctx, call{method: http.MethodPost, path: "/pipelines", body: req, keyed: req.Key != ""}, &v)
	if err != nil {
		return v, false, fmt.Errorf("run pipeline %s: %w", req.File, err)
	}
	return v, status == http.StatusCreated, nil
}

// Pipelines lists the caller's pipelines, newest first; limit 0 is the
// hub's default.
func (c *Client) Pipelines(ctx context.Context, limit int) (apitypes.PipelineList, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return decode[apitypes.PipelineList](ctx, c, call{method: http.MethodGet, path: "/pipelines", query: q}, "list pipelines")
}

// Pipeline returns one pipeline with its steps and their runs.
func (c *Client) Pipeline(ctx context.Context, id string) (apitypes.PipelineView, error) {
	return decode[apitypes.PipelineView](ctx, c, call{method: http.MethodGet, path: "/pipelines/" + seg(id)},
		"get pipeline "+id)
}

// CancelPipeline cancels a pipeline and its steps' jobs.
func (c *Client) CancelPipeline(ctx context.Context, id string) (apitypes.PipelineView, error) {
	return decode[apitypes.PipelineView](ctx, c, call{method: http.MethodPost, path: "/pipelines/" + seg(id) + "/cancel"},
		"cancel pipeline "+id)
}

// RetryPipeline starts step of a pipeline again (a failed or unknown job,
// or one more round of a loop that stopped for a person).
func (c *Client) RetryPipeline(ctx context.Context, id, step string) (apitypes.PipelineView, error) {
	return decode[apitypes.PipelineView](ctx, c, call{method: http.MethodPost, path: "/pipelines/" + seg(id) + "/retry",
		body: apitypes.PipelineRetryRequest{Step: step}}, "retry step "+step+" of pipeline "+id)
}

// PipelineEvents returns a pipeline's log after sequence number after (0:
// from the start).
func (c *Client) PipelineEvents(ctx context.Context, id string, after int64) (apitypes.PipelineEventList, error) {
	q := url.Values{}
	if after > 0 {
		q.Set("after", itoa(after))
	}
	return decode[apitypes.PipelineEventList](ctx, c, call{method: http.MethodGet, path: "/pipelines/" + seg(id) + "/events", query: q},
		"get events of pipeline "+id)
}
