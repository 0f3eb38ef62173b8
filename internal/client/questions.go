package client

import (
	"context"
	"net/http"
	"net/url"

	"drover/internal/apitypes"
)

// Questions lists what waits on the caller: the questions of the caller's
// waiting jobs, with any answer by another user that awaits approval.
func (c *Client) Questions(ctx context.Context) (apitypes.QuestionList, error) {
	return decode[apitypes.QuestionList](ctx, c, call{method: http.MethodGet, path: "/questions"}, "list questions")
}

// Answer answers the question a waiting job asked. The requester's own
// answer requeues the job; another user's waits for the requester's approval.
// It is not retried: the hub refuses a second answer anyway.
func (c *Client) Answer(ctx context.Context, id string, req apitypes.AnswerRequest) (apitypes.JobView, error) {
	return decode[apitypes.JobView](ctx, c, call{method: http.MethodPost, path: "/jobs/" + seg(id) + "/answer", body: req},
		"answer job "+id)
}

// Approve approves the answer awaiting the requester's approval.
func (c *Client) Approve(ctx context.Context, id string) (apitypes.JobView, error) {
	return c.jobAction(ctx, id, "approve")
}

// Restart starts a job over from its base, with a fresh agent session.
func (c *Client) Restart(ctx context.Context, id string) (apitypes.JobView, error) {
	return c.jobAction(ctx, id, "restart")
}

// JobWithEvents returns a job with its questions and its whole history.
func (c *Client) JobWithEvents(ctx context.Context, id string) (apitypes.JobView, error) {
	return decode[apitypes.JobView](ctx, c, call{method: http.MethodGet, path: "/jobs/" + seg(id), query: url.Values{"events": {"1"}}},
		"get job "+id)
}
