package client

import (
	"context"
	"net/http"

	"drover/internal/apitypes"
)

// Accounts lists the caller's agent accounts across their runners, in the
// order the hub prefers them, then the accounts others shared with them.
func (c *Client) Accounts(ctx context.Context) (apitypes.AccountList, error) {
	return decode[apitypes.AccountList](ctx, c, call{method: http.MethodGet, path: "/accounts"}, "list accounts")
}

// MoveAccount puts one of the caller's accounts at a position (1 is the
// best) and returns the new order.
func (c *Client) MoveAccount(ctx context.Context, req apitypes.MoveAccountRequest) (apitypes.AccountList, error) {
	return decode[apitypes.AccountList](ctx, c, call{method: http.MethodPost, path: "/accounts/move", body: req},
		"move account "+req.ID+" of runner "+req.Runner)
}

// ShareAccount lets a user, or a project's members, run under one account of
// a runner (the runner's owner or an admin), and returns the caller's accounts.
func (c *Client) ShareAccount(ctx context.Context, req apitypes.AccountShareRequest) (apitypes.AccountList, error) {
	return c.shareAccount(ctx, "share", req)
}

// UnshareAccount takes a share of an account back.
func (c *Client) UnshareAccount(ctx context.Context, req apitypes.AccountShareRequest) (apitypes.AccountList, error) {
	return c.shareAccount(ctx, "unshare", req)
}

func (c *Client) shareAccount(ctx context.Context, action string, req apitypes.AccountShareRequest) (apitypes.AccountList, error) {
	return decode[apitypes.AccountList](ctx, c, call{method: http.MethodPost, path: "/accounts/" + action, body: req},
		action+" account "+req.Account+" of runner "+req.Runner)
}
