package httpapi

import (
	"net/http"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
)

// The forges API's HTTP transport over Forges: /forges[/{name}] and
// /jobs/{id}/publish.

func (a *API) listForges(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.core.ListForges(r.Context(), p)
	return reply(w, http.StatusOK, out, err)
}

func (a *API) putForge(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	var req apitypes.ForgeRequest
	if err := decodeBody(r, w, &req); err != nil {
		return err
	}
	out, err := a.core.PutForge(r.Context(), p, r.PathValue("name"), req)
	return reply(w, http.StatusOK, out, err)
}

func (a *API) removeForge(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.core.RemoveForge(r.Context(), p, r.PathValue("name"))
	return reply(w, http.StatusOK, out, err)
}

func (a *API) setForgeOAuth(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	var req apitypes.ForgeOAuthRequest
	if err := decodeBody(r, w, &req); err != nil {
		return err
	}
	out, err := a.core.SetOAuth(r.Context(), p, r.PathValue("name"), req)
	return reply(w, http.StatusOK, out, err)
}

// publishJob answers 202 while the publication is still pending.
func (a *API) publishJob(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	var req apitypes.PublishRequest
	if err := decodeBody(r, w, &req); err != nil {
		return err
	}
	out, err := a.core.PublishJob(r.Context(), p, r.PathValue("id"), req)
	status := http.StatusOK
	if out.State == "pending" {
		status = http.StatusAccepted
	}
	return reply(w, status, out, err)
}
