package client

import (
	"context"
	"net/http"

	"drover/internal/apitypes"
)

// Runners lists the runners the caller owns or may use (an admin: all).
func (c *Client) Runners(ctx context.Context) (apitypes.RunnerList, error) {
	return decode[apitypes.RunnerList](ctx, c, call{method: http.MethodGet, path: "/runners"}, "list runners")
}

// ApproveRunner approves a pending runner login. Key is the SHA-256 of the
// runner's token as its approval code shows it.
func (c *Client) ApproveRunner(ctx context.Context, req apitypes.ApproveRequest) (apitypes.ApproveResponse, error) {
	return decode[apitypes.ApproveResponse](ctx, c, call{method: http.MethodPost, path: "/runners/approve", body: req},
		"approve runner "+req.Name)
}

// RevokeRunner revokes a runner's token; the hub closes its connection.
func (c *Client) RevokeRunner(ctx context.Context, name string) (apitypes.RunnerView, error) {
	return decode[apitypes.RunnerView](ctx, c, call{method: http.MethodPost, path: "/runners/" + seg(name) + "/revoke"},
		"revoke runner "+name)
}

// ShareRunner lets a user, or a project's members, run jobs on a runner, or
// (Hub, admin only) makes it run everyone's jobs.
func (c *Client) ShareRunner(ctx context.Context, name string, req apitypes.ShareRequest) (apitypes.RunnerView, error) {
	return c.shareRunner(ctx, name, "share", req)
}

// UnshareRunner takes a share of a runner back; Hub makes it private again.
func (c *Client) UnshareRunner(ctx context.Context, name string, req apitypes.ShareRequest) (apitypes.RunnerView, error) {
	return c.shareRunner(ctx, name, "unshare", req)
}

func (c *Client) shareRunner(ctx context.Context, name, action string, req apitypes.ShareRequest) (apitypes.RunnerView, error) {
	return c.runnerAction(ctx, name, action, req, action+" runner "+name)
}

// runnerAction posts body to /runners/NAME/ACTION.
func (c *Client) runnerAction(ctx context.Context, name, action string, body any, what string) (apitypes.RunnerView, error) {
	return decode[apitypes.RunnerView](ctx, c, call{method: http.MethodPost, path: "/runners/" + seg(name) + "/" + action, body: body}, what)
}

// AcceptShare accepts a share of another's runner with the caller, or
// (Project) with a project the caller owns: it runs their jobs from then.
func (c *Client) AcceptShare(ctx context.Context, name string, req apitypes.AnswerShareRequest) (apitypes.RunnerView, error) {
	return c.answerShare(ctx, name, "accept", req)
}

// DeclineShare declines (removes) a share of another's runner with the
// caller, or with a project the caller owns, pending or accepted.
func (c *Client) DeclineShare(ctx context.Context, name string, req apitypes.AnswerShareRequest) (apitypes.RunnerView, error) {
	return c.answerShare(ctx, name, "decline", req)
}

func (c *Client) answerShare(ctx context.Context, name, action string, req apitypes.AnswerShareRequest) (apitypes.RunnerView, error) {
	return c.runnerAction(ctx, name, action, req, action+" the share of runner "+name)
}
