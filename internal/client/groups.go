package client

import (
	"context"
	"fmt"
	"net/http"
	"strconv"

	"drover/internal/apitypes"
)

// StartGroup starts a group of attempts. started is false when the
// request's Key matched a group the caller started before.
func (c *Client) StartGroup(ctx context.Context, req apitypes.GroupRequest) (v apitypes.GroupView, started bool, err error) {
	status, err := c.do(ctx, call{method: http.MethodPost, path: "/groups", body: req, keyed: req.Key != ""}, &v)
	if err != nil {
		return v, false, fmt.Errorf("start attempts: %w", err)
	}
	return v, status == http.StatusCreated, nil
}

// Group returns a group's attempts side by side, with their diffs.
func (c *Client) Group(ctx context.Context, id string) (apitypes.GroupView, error) {
	return decode[apitypes.GroupView](ctx, c, call{method: http.MethodGet, path: "/groups/" + seg(id)}, "get group "+id)
}

// PickGroup makes attempt the group's result.
func (c *Client) PickGroup(ctx context.Context, id string, attempt int) (apitypes.GroupView, error) {
	return decode[apitypes.GroupView](ctx, c, call{method: http.MethodPost, path: "/groups/" + seg(id) + "/pick",
		body: apitypes.GroupPickRequest{Attempt: attempt}}, "pick attempt "+strconv.Itoa(attempt)+" of group "+id)
}
