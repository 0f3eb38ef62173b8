package client

import (
	"context"
	"net/http"

	"drover/internal/protocol"
)

// Launch mints a fleet launch: one single-use registration token per
// runner, shown only in this answer.
func (c *Client) Launch(ctx context.Context, req protocol.LaunchRequest) (protocol.LaunchResponse, error) {
	return decode[protocol.LaunchResponse](ctx, c, call{method: http.MethodPost, path: "/fleet/launches", body: req},
		"launch on "+req.Target)
}

// Launches lists the caller's launches (an admin: all).
func (c *Client) Launches(ctx context.Context) (protocol.LaunchList, error) {
	return decode[protocol.LaunchList](ctx, c, call{method: http.MethodGet, path: "/fleet/launches"}, "list launches")
}

// LaunchView reads one launch.
func (c *Client) LaunchView(ctx context.Context, id string) (protocol.LaunchView, error) {
	return decode[protocol.LaunchView](ctx, c, call{method: http.MethodGet, path: "/fleet/launches/" + seg(id)}, "read launch "+id)
}

// RevokeLaunch revokes a launch: its unused tokens and its runners.
func (c *Client) RevokeLaunch(ctx context.Context, id string) (protocol.LaunchView, error) {
	return decode[protocol.LaunchView](ctx, c, call{method: http.MethodPost, path: "/fleet/launches/" + seg(id) + "/revoke"},
		"revoke launch "+id)
}
