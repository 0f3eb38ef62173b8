package httpapi

import (
	"net/http"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
)

// The runners API's HTTP transport over Runners.

func (a *API) runners(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	rs, err := a.core.RunnerViews(r.Context(), p)
	return reply(w, http.StatusOK, apitypes.RunnerList{Runners: rs}, err)
}

func (a *API) approve(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	var req apitypes.ApproveRequest
	if err := decodeBody(r, w, &req); err != nil {
		return err
	}
	out, err := a.core.Approve(r.Context(), p, req)
	return reply(w, http.StatusOK, out, err)
}

func (a *API) revokeRunner(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.core.RevokeRunner(r.Context(), p, call.RunnerRequest{Name: r.PathValue("name")})
	return reply(w, http.StatusOK, out, err)
}

// runnerLogin serves GET /runner/login, a runner token's check of itself.
func (a *API) runnerLogin(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.core.RunnerLogin(r.Context(), p)
	return reply(w, http.StatusOK, out, err)
}
