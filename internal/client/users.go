package client

import (
	"context"
	"net/http"

	"drover/internal/protocol"
)

// Whoami describes the caller's token.
func (c *Client) Whoami(ctx context.Context) (protocol.Whoami, error) {
	return decode[protocol.Whoami](ctx, c, call{method: http.MethodGet, path: "/whoami"}, "whoami")
}

// AddUser creates a user (admin only). The answer carries the user's token,
// which the hub shows only this once.
func (c *Client) AddUser(ctx context.Context, req protocol.NewUserRequest) (protocol.NewUserResponse, error) {
	return decode[protocol.NewUserResponse](ctx, c, call{method: http.MethodPost, path: "/users", body: req},
		"add user "+req.Name)
}
