package client

import (
	"context"
	"net/http"

	"drover/internal/apitypes"
)

// Hubs lists the live hubs sharing the database, and which leads.
func (c *Client) Hubs(ctx context.Context) (apitypes.HubList, error) {
	return decode[apitypes.HubList](ctx, c, call{method: http.MethodGet, path: "/hubs"}, "list hubs")
}
