package client

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"drover/internal/apitypes"
	"drover/internal/rules"
)

// Launch mints a fleet launch: one single-use registration token per
// runner, shown only in this answer.
func (c *Client) Launch(ctx context.Context, req apitypes.LaunchRequest) (apitypes.LaunchResponse, error) {
	return decode[apitypes.LaunchResponse](ctx, c, call{method: http.MethodPost, path: "/fleet/launches", body: req},
		"launch on "+req.Target)
}

// Launches lists the caller's launches (an admin: all).
func (c *Client) Launches(ctx context.Context) (apitypes.LaunchList, error) {
	return decode[apitypes.LaunchList](ctx, c, call{method: http.MethodGet, path: "/fleet/launches"}, "list launches")
}

// LaunchView reads one launch.
func (c *Client) LaunchView(ctx context.Context, id string) (apitypes.LaunchView, error) {
	return decode[apitypes.LaunchView](ctx, c, call{method: http.MethodGet, path: "/fleet/launches/" + seg(id)}, "read launch "+id)
}

// RevokeLaunch revokes a launch: its unused tokens and its runners.
func (c *Client) RevokeLaunch(ctx context.Context, id string) (apitypes.LaunchView, error) {
	return decode[apitypes.LaunchView](ctx, c, call{method: http.MethodPost, path: "/fleet/launches/" + seg(id) + "/revoke"},
		"revoke launch "+id)
}

// Demand is how many of the caller's queued jobs runners with labels could
// take; with wait it answers when the queue's generation moves past after.
func (c *Client) Demand(ctx context.Context, labels map[string]string, after uint64, wait time.Duration) (apitypes.Demand, error) {
	q := url.Values{"after": {strconv.FormatUint(after, 10)}, "wait": {strconv.FormatInt(wait.Milliseconds(), 10)}}
	if len(labels) > 0 {
		q.Set("labels", rules.FormatLabels(labels))
	}
	return decode[apitypes.Demand](ctx, c, call{method: http.MethodGet, path: "/fleet/demand", query: q, timeout: wait + 30*time.Second},
		"read the queue's demand")
}

// LaunchFailure reports why a launch failed on its target ("" clears).
func (c *Client) LaunchFailure(ctx context.Context, id, reason string) error {
	if _, err := c.do(ctx, call{method: http.MethodPost, path: "/fleet/launches/" + seg(id) + "/failure",
		body: apitypes.LaunchFailure{Reason: reason}}, nil); err != nil {
		return fmt.Errorf("report launch %s: %w", id, err)
	}
	return nil
}
