package client

import (
	"context"
	"net/http"

	"drover/internal/apitypes"
)

// Whoami describes the caller's token.
func (c *Client) Whoami(ctx context.Context) (apitypes.Whoami, error) {
	return decode[apitypes.Whoami](ctx, c, call{method: http.MethodGet, path: "/whoami"}, "whoami")
}

// AddUser creates a user (admin only). The answer carries the user's token,
// which the hub shows only this once.
func (c *Client) AddUser(ctx context.Context, req apitypes.NewUserRequest) (apitypes.NewUserResponse, error) {
	return decode[apitypes.NewUserResponse](ctx, c, call{method: http.MethodPost, path: "/users", body: req},
		"add user "+req.Name)
}

// Users lists the hub's users (an admin sees all, anyone else themselves).
func (c *Client) Users(ctx context.Context) (apitypes.UserList, error) {
	return decode[apitypes.UserList](ctx, c, call{method: http.MethodGet, path: "/users"}, "list users")
}

// RemoveUser removes a user (admin only): the hub revokes their tokens and
// runners and cancels their unfinished jobs.
func (c *Client) RemoveUser(ctx context.Context, name string) (apitypes.UserView, error) {
	return decode[apitypes.UserView](ctx, c, call{method: http.MethodDelete, path: "/users/" + seg(name)},
		"remove user "+name)
}

// RotateToken gives a user a new token and revokes their old ones (the user
// themselves or an admin). The answer carries the new token, shown only
// this once. It is not retried: a lost answer would leave a token nobody
// holds, and a second rotation would revoke the first.
func (c *Client) RotateToken(ctx context.Context, name string) (apitypes.NewUserResponse, error) {
	return decode[apitypes.NewUserResponse](ctx, c, call{method: http.MethodPost, path: "/users/" + seg(name) + "/token"},
		"rotate the token of user "+name)
}
