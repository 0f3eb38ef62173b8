package hub

import (
	"net/http"

	"drover/internal/hub/call"
	"drover/internal/protocol"
)

// The runners API's HTTP transport over the operations of
// state_runners.go.

func (a httpAPI) runners(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	rs, err := a.h.RunnerViews(r.Context(), p)
	return reply(w, http.StatusOK, protocol.RunnerList{Runners: rs}, err)
}

func (a httpAPI) approve(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	var req protocol.ApproveRequest
	if err := decodeBody(r, w, &req); err != nil {
		return err
	}
	out, err := a.h.Approve(r.Context(), p, req)
	return reply(w, http.StatusOK, out, err)
}

func (a httpAPI) revokeRunner(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.h.RevokeRunner(r.Context(), p, call.RunnerRequest{Name: r.PathValue("name")})
	return reply(w, http.StatusOK, out, err)
}

// runnerLogin serves GET /runner/login, a runner token's check of itself.
func (a httpAPI) runnerLogin(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.h.RunnerLogin(r.Context(), p)
	return reply(w, http.StatusOK, out, err)
}
