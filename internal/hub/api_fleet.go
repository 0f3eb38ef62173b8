package hub

import (
	"net/http"
	"strconv"

	"drover/internal/auth"
	"drover/internal/hub/call"
	"drover/internal/protocol"
)

// The fleet API's HTTP transport over the operations of state_fleet.go
// and fleet_demand.go.

func (a httpAPI) launch(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	var req protocol.LaunchRequest
	if err := decodeBody(r, w, &req); err != nil {
		return err
	}
	out, err := a.h.Launch(r.Context(), p, req)
	return reply(w, http.StatusCreated, out, err)
}

func (a httpAPI) launches(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.h.Launches(r.Context(), p)
	return reply(w, http.StatusOK, out, err)
}

func (a httpAPI) launchView(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.h.LaunchView(r.Context(), p, call.LaunchRequest{ID: r.PathValue("id")})
	return reply(w, http.StatusOK, out, err)
}

func (a httpAPI) revokeLaunch(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.h.RevokeLaunch(r.Context(), p, call.LaunchRequest{ID: r.PathValue("id")})
	return reply(w, http.StatusOK, out, err)
}

func (a httpAPI) launchFailure(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	req := call.LaunchFailureRequest{ID: r.PathValue("id")}
	if err := decodeBody(r, w, &req.LaunchFailure); err != nil {
		return err
	}
	if err := a.h.RecordLaunchFailure(r.Context(), p, req); err != nil {
		return err
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// demand serves GET /fleet/demand?labels=k=v,...&after=GEN&wait=MS.
func (a httpAPI) demand(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	q := r.URL.Query()
	var req call.DemandRequest
	var err error
	if req.Labels, err = protocol.ParseLabelList(q.Get("labels")); err != nil {
		return call.BadRequest("labels: %v", err)
	}
	req.After, _ = strconv.ParseUint(q.Get("after"), 10, 64)
	if s := q.Get("wait"); s != "" {
		ms, err := strconv.Atoi(s)
		if err != nil {
			ms = -1 // not milliseconds: waitDemand refuses it
		}
		req.WaitMS = ms
	}
	out, err := a.h.WaitDemand(r.Context(), p, req)
	if err != nil && r.Context().Err() != nil {
		return nil // the caller is gone: nothing to answer
	}
	return reply(w, http.StatusOK, out, err)
}

// register serves POST /runner/register, whose bearer is a fleet
// registration token rather than a user's or a runner's.
func (a httpAPI) register(w http.ResponseWriter, r *http.Request) {
	tok, err := auth.BearerToken(r.Header.Get("Authorization"))
	if err != nil {
		tok = ""
	}
	err = a.h.AuthenticateRegistration(r.Context(), tok)
	if err == nil {
		var req protocol.RegisterRequest
		if err = decodeBody(r, w, &req); err == nil {
			var out protocol.RunnerView
			out, err = a.h.RegisterRunner(r.Context(), tok, req)
			err = reply(w, http.StatusCreated, out, err)
		}
	}
	if err != nil {
		a.h.writeError(w, r, err)
	}
}
