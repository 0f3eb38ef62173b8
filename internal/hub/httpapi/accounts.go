package httpapi

import (
	"net/http"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
)

// The accounts API's HTTP transport over Accounts.

func (a *API) accounts(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.core.Accounts(r.Context(), p)
	return reply(w, http.StatusOK, out, err)
}

func (a *API) moveAccount(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	var req apitypes.MoveAccountRequest
	if err := decodeBody(r, w, &req); err != nil {
		return err
	}
	out, err := a.core.MoveAccount(r.Context(), p, req)
	return reply(w, http.StatusOK, out, err)
}
