package httpapi

import (
	"net/http"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
)

// The projects API's HTTP transport over Projects.

func (a *API) listProjects(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	ps, err := a.core.ProjectViews(r.Context(), p)
	return reply(w, http.StatusOK, apitypes.ProjectList{Projects: ps}, err)
}

func (a *API) mapProject(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	// The remote must be given: a body of null or {} is a mistake, not a
	// request to make the project hosted again (that is "remote": "").
	var body struct {
		Remote *string `json:"remote"`
	}
	if err := decodeBody(r, w, &body); err != nil {
		return err
	}
	if body.Remote == nil {
		return call.BadRequest(`the body must be {"remote": URL}, or {"remote": ""} to make the project hosted again`)
	}
	out, err := a.core.MapProject(r.Context(), p, call.MapProjectRequest{Name: r.PathValue("name"), MapProjectRequest: apitypes.MapProjectRequest{Remote: *body.Remote}})
	return reply(w, http.StatusOK, out, err)
}

func (a *API) projectConfig(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.core.ProjectConfig(r.Context(), p, call.ProjectConfigRequest{Project: r.PathValue("name")})
	return reply(w, http.StatusOK, out, err)
}

func (a *API) setProjectConfig(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	req := call.ProjectConfigRequest{Project: r.PathValue("name")}
	if err := decodeBody(r, w, &req.ProjectConfigRequest); err != nil {
		return err
	}
	out, err := a.core.SetProjectConfig(r.Context(), p, req)
	return reply(w, http.StatusOK, out, err)
}
