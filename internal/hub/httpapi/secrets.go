package httpapi

import (
	"net/http"

	"drover/internal/hub/call"
)

// The project secrets API's HTTP transport over Secrets:
// /projects/{name}/secrets[/{secret}].

func secretRequestOf(r *http.Request) call.SecretRequest {
	return call.SecretRequest{Project: r.PathValue("name"), Name: r.PathValue("secret")}
}

func (a *API) listSecrets(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.core.ListSecrets(r.Context(), p, secretRequestOf(r))
	return reply(w, http.StatusOK, out, err)
}

func (a *API) setSecret(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	req := secretRequestOf(r)
	if err := decodeBody(r, w, &req.SecretRequest); err != nil {
		return err
	}
	out, err := a.core.SetSecret(r.Context(), p, req)
	return reply(w, http.StatusOK, out, err)
}

func (a *API) removeSecret(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.core.RemoveSecret(r.Context(), p, secretRequestOf(r))
	return reply(w, http.StatusOK, out, err)
}
