package httpapi

import (
	"net/http"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/store"
)

// The forge triggers API's HTTP transport over ForgeWork:
// /projects/{name}/triggers and /users/{name}/links.

func (a *API) registerForgeWork(mux *http.ServeMux) {
	u, p := store.TokenUser, apitypes.APIPrefix
	mux.Handle("GET "+p+"/projects/{name}/triggers", a.As(u, a.showTriggers))
	mux.Handle("PUT "+p+"/projects/{name}/triggers", a.As(u, a.setTriggers))
	mux.Handle("DELETE "+p+"/projects/{name}/triggers", a.As(u, a.removeTriggers))
	mux.Handle("GET "+p+"/users/{name}/links", a.As(u, a.links))
	mux.Handle("POST "+p+"/users/{name}/links", a.As(u, a.linkUser))
	mux.Handle("DELETE "+p+"/users/{name}/links/{forge}/{login}", a.As(u, a.unlinkUser))
}

func (a *API) showTriggers(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.core.ShowTriggers(r.Context(), p, r.PathValue("name"))
	return reply(w, http.StatusOK, out, err)
}

func (a *API) setTriggers(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	var req apitypes.ForgeTriggersRequest
	if err := decodeBody(r, w, &req); err != nil {
		return err
	}
	out, err := a.core.SetTriggers(r.Context(), p, r.PathValue("name"), req)
	return reply(w, http.StatusOK, out, err)
}

func (a *API) removeTriggers(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.core.RemoveTriggers(r.Context(), p, r.PathValue("name"))
	return reply(w, http.StatusOK, out, err)
}

func (a *API) links(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.core.Links(r.Context(), p, r.PathValue("name"))
	return reply(w, http.StatusOK, out, err)
}

func (a *API) linkUser(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	var req apitypes.ForgeLinkRequest
	if err := decodeBody(r, w, &req); err != nil {
		return err
	}
	out, err := a.core.LinkUser(r.Context(), p, r.PathValue("name"), req)
	return reply(w, http.StatusOK, out, err)
}

func (a *API) unlinkUser(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.core.UnlinkUser(r.Context(), p, r.PathValue("name"), r.PathValue("forge"), r.PathValue("login"))
	return reply(w, http.StatusOK, out, err)
}
