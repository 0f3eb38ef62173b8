package hub

import (
	"net/http"

	"drover/internal/hub/call"
	"drover/internal/protocol"
)

// The projects API's HTTP transport over the operations of
// state_projects.go and, for a project's config, network.go.

func (a httpAPI) listProjects(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	ps, err := a.h.ProjectViews(r.Context(), p)
	return reply(w, http.StatusOK, protocol.ProjectList{Projects: ps}, err)
}

func (a httpAPI) mapProject(w http.ResponseWriter, r *http.Request, p call.Caller) error {
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
	out, err := a.h.MapProject(r.Context(), p, call.MapProjectRequest{Name: r.PathValue("name"), MapProjectRequest: protocol.MapProjectRequest{Remote: *body.Remote}})
	return reply(w, http.StatusOK, out, err)
}

func (a httpAPI) projectConfig(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.h.ProjectConfig(r.Context(), p, call.ProjectConfigRequest{Project: r.PathValue("name")})
	return reply(w, http.StatusOK, out, err)
}

func (a httpAPI) setProjectConfig(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	req := call.ProjectConfigRequest{Project: r.PathValue("name")}
	if err := decodeBody(r, w, &req.ProjectConfigRequest); err != nil {
		return err
	}
	out, err := a.h.SetProjectConfig(r.Context(), p, req)
	return reply(w, http.StatusOK, out, err)
}
