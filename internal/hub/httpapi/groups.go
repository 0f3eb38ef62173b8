package httpapi

import (
	"net/http"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/store"
)

// The attempt groups' HTTP transport over Groups: POST /groups,
// GET /groups/{id}, POST /groups/{id}/pick.

func (a *API) registerGroups(mux *http.ServeMux) {
	p, u := apitypes.APIPrefix, store.TokenUser
	mux.Handle("POST "+p+"/groups", a.As(u, a.startGroup))
	mux.Handle("GET "+p+"/groups/{id}", a.As(u, a.compareGroup))
	mux.Handle("POST "+p+"/groups/{id}/pick", a.As(u, a.pickGroup))
}

func (a *API) startGroup(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	var req apitypes.GroupRequest
	if err := decodeBody(r, w, &req); err != nil {
		return err
	}
	out, started, err := a.core.StartGroup(r.Context(), p, req)
	status := http.StatusOK
	if started {
		status = http.StatusCreated
	}
	return reply(w, status, out, err)
}

func (a *API) compareGroup(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.core.CompareGroup(r.Context(), p, r.PathValue("id"))
	return reply(w, http.StatusOK, out, err)
}

func (a *API) pickGroup(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	var req apitypes.GroupPickRequest
	if err := decodeBody(r, w, &req); err != nil {
		return err
	}
	out, err := a.core.PickGroup(r.Context(), p, r.PathValue("id"), req)
	return reply(w, http.StatusOK, out, err)
}
