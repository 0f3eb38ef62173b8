package client

import (
	"context"
	"net/http"

	"drover/internal/protocol"
)

// Hubs lists the live hubs sharing the database, and which leads.
func (c *Client) Hubs(ctx context.Context) (protocol.HubList, error) {
	return decode[protocol.HubList](ctx, c, call{method: http.MethodGet, path: "/hubs"}, "list hubs")
}
