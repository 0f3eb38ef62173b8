package client

import (
	"context"
	"net/http"

	"drover/internal/protocol"
)

// Accounts lists the caller's agent accounts across their runners, in the
// order the hub prefers them.
func (c *Client) Accounts(ctx context.Context) (protocol.AccountList, error) {
	return decode[protocol.AccountList](ctx, c, call{method: http.MethodGet, path: "/accounts"}, "list accounts")
}

// MoveAccount puts one of the caller's accounts at a position (1 is the
// best) and returns the new order.
func (c *Client) MoveAccount(ctx context.Context, req protocol.MoveAccountRequest) (protocol.AccountList, error) {
	return decode[protocol.AccountList](ctx, c, call{method: http.MethodPost, path: "/accounts/move", body: req},
		"move account "+req.ID+" of runner "+req.Runner)
}
