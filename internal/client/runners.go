package client

import (
	"context"
	"net/http"

	"drover/internal/protocol"
)

// Runners lists the runners the caller owns or may use (an admin: all).
func (c *Client) Runners(ctx context.Context) (protocol.RunnerList, error) {
	return decode[protocol.RunnerList](ctx, c, call{method: http.MethodGet, path: "/runners"}, "list runners")
}

// ApproveRunner approves a pending runner login. Key is the SHA-256 of the
// runner's token as its approval code shows it.
func (c *Client) ApproveRunner(ctx context.Context, req protocol.ApproveRequest) (protocol.ApproveResponse, error) {
	return decode[protocol.ApproveResponse](ctx, c, call{method: http.MethodPost, path: "/runners/approve", body: req},
		"approve runner "+req.Name)
}

// RevokeRunner revokes a runner's token; the hub closes its connection.
func (c *Client) RevokeRunner(ctx context.Context, name string) (protocol.RunnerView, error) {
	return decode[protocol.RunnerView](ctx, c, call{method: http.MethodPost, path: "/runners/" + seg(name) + "/revoke"},
		"revoke runner "+name)
}

// ShareRunner lets a user, or a project's members, run jobs on a runner, or
// (Hub, admin only) makes it run everyone's jobs.
func (c *Client) ShareRunner(ctx context.Context, name string, req protocol.ShareRequest) (protocol.RunnerView, error) {
	return c.shareRunner(ctx, name, "share", req)
}

// UnshareRunner takes a share of a runner back; Hub makes it private again.
func (c *Client) UnshareRunner(ctx context.Context, name string, req protocol.ShareRequest) (protocol.RunnerView, error) {
	return c.shareRunner(ctx, name, "unshare", req)
}

func (c *Client) shareRunner(ctx context.Context, name, action string, req protocol.ShareRequest) (protocol.RunnerView, error) {
	return decode[protocol.RunnerView](ctx, c, call{method: http.MethodPost, path: "/runners/" + seg(name) + "/" + action, body: req},
		action+" runner "+name)
}
