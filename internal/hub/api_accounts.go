package hub

import (
	"net/http"

	"drover/internal/hub/call"
	"drover/internal/protocol"
)

// The accounts API's HTTP transport over the operations of
// state_accounts.go.

func (a httpAPI) accounts(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.h.Accounts(r.Context(), p)
	return reply(w, http.StatusOK, out, err)
}

func (a httpAPI) moveAccount(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	var req protocol.MoveAccountRequest
	if err := decodeBody(r, w, &req); err != nil {
		return err
	}
	out, err := a.h.MoveAccount(r.Context(), p, req)
	return reply(w, http.StatusOK, out, err)
}
