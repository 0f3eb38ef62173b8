package httpapi

import (
	"net/http"
	"strconv"

	"drover/internal/apitypes"
	"drover/internal/auth"
	"drover/internal/hub/call"
	"drover/internal/rules"
)

// The fleet API's HTTP transport over Fleet.

func (a *API) launch(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	var req apitypes.LaunchRequest
	if err := decodeBody(r, w, &req); err != nil {
		return err
	}
	out, err := a.core.Launch(r.Context(), p, req)
	return reply(w, http.StatusCreated, out, err)
}

func (a *API) launches(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.core.Launches(r.Context(), p)
	return reply(w, http.StatusOK, out, err)
}

func (a *API) launchView(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.core.LaunchView(r.Context(), p, call.LaunchRequest{ID: r.PathValue("id")})
	return reply(w, http.StatusOK, out, err)
}

func (a *API) revokeLaunch(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.core.RevokeLaunch(r.Context(), p, call.LaunchRequest{ID: r.PathValue("id")})
	return reply(w, http.StatusOK, out, err)
}

func (a *API) launchFailure(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	req := call.LaunchFailureRequest{ID: r.PathValue("id")}
	if err := decodeBody(r, w, &req.LaunchFailure); err != nil {
		return err
	}
	if err := a.core.RecordLaunchFailure(r.Context(), p, req); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// demand serves GET /fleet/demand?labels=k=v,...&after=GEN&wait=MS.
func (a *API) demand(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	q := r.URL.Query()
	var req call.DemandRequest
	var err error
	if req.Labels, err = rules.ParseLabelList(q.Get("labels")); err != nil {
		return call.BadRequest("labels: %v", err)
	}
	req.After, _ = strconv.ParseUint(q.Get("after"), 10, 64)
	if s := q.Get("wait"); s != "" {
		ms, err := strconv.Atoi(s)
		if err != nil {
			ms = -1 // not milliseconds: WaitDemand refuses it
		}
		req.WaitMS = ms
	}
	out, err := a.core.WaitDemand(r.Context(), p, req)
	if err != nil && r.Context().Err() != nil {
		return nil // the caller is gone: nothing to answer
	}
	return reply(w, http.StatusOK, out, err)
}

// register serves POST /runner/register, whose bearer is a fleet
// registration token rather than a user's or a runner's.
func (a *API) register(w http.ResponseWriter, r *http.Request) error {
	tok, err := auth.BearerToken(r.Header.Get("Authorization"))
	if err != nil {
		tok = ""
	}
	if err := a.core.AuthenticateRegistration(r.Context(), tok); err != nil {
		return err
	}
	var req apitypes.RegisterRequest
	if err := decodeBody(r, w, &req); err != nil {
		return err
	}
	out, err := a.core.RegisterRunner(r.Context(), tok, req)
	return reply(w, http.StatusCreated, out, err)
}
