package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"drover/internal/apitypes"
)

// StartEval starts an evaluation; started is false when the same key's
// evaluation was returned.
func (c *Client) StartEval(ctx context.Context, req apitypes.EvalRunRequest) (v apitypes.EvalView, started bool, err error) {
	status, err := c.do(ctx, call{method: http.MethodPost, path: "/evals", body: req, keyed: req.Key != ""}, &v)
	if err != nil {
		return v, false, fmt.Errorf("start evaluation: %w", err)
	}
	return v, status == http.StatusCreated, nil
}

// Eval reads an evaluation and its items.
func (c *Client) Eval(ctx context.Context, id string) (apitypes.EvalView, error) {
	return decode[apitypes.EvalView](ctx, c, call{method: http.MethodGet, path: "/evals/" + seg(id)}, "get evaluation "+id)
}

// EvalReport reads an evaluation's numbers and predictions.
func (c *Client) EvalReport(ctx context.Context, id string) (apitypes.EvalReport, error) {
	return decode[apitypes.EvalReport](ctx, c, call{method: http.MethodGet, path: "/evals/" + seg(id) + "/report"},
		"get the report of evaluation "+id)
}

// CancelEval cancels an evaluation and its items' jobs.
func (c *Client) CancelEval(ctx context.Context, id string) (apitypes.EvalView, error) {
	return decode[apitypes.EvalView](ctx, c, call{method: http.MethodPost, path: "/evals/" + seg(id) + "/cancel"},
		"cancel evaluation "+id)
}

// Evals lists the evaluations the caller may see, newest first; limit 0
// is the hub's default.
func (c *Client) Evals(ctx context.Context, limit int) (apitypes.EvalList, error) {
	q := url.Values{}
	if limit > 0 {
		q.Set("limit", strconv.Itoa(limit))
	}
	return decode[apitypes.EvalList](ctx, c, call{method: http.MethodGet, path: "/evals", query: q}, "list evaluations")
}
