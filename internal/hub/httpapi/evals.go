package httpapi

import (
	"net/http"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
)

// The evaluations API's HTTP transport over Evals: /evals[/{id}], its
// report and cancel.

func (a *API) startEval(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	var req apitypes.EvalRunRequest
	if err := decodeBodyMax(r, w, &req, apitypes.MaxEvalRequest); err != nil {
		return err
	}
	out, started, err := a.core.StartEval(r.Context(), p, req)
	status := http.StatusOK
	if started {
		status = http.StatusCreated
	}
	return reply(w, status, out, err)
}

func (a *API) listEvals(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	limit, err := queryInt(r.URL.Query(), "limit", 1, 1000)
	if err != nil {
		return err
	}
	out, err := a.core.ListEvals(r.Context(), p, int(limit))
	return reply(w, http.StatusOK, out, err)
}

func (a *API) showEval(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.core.ShowEval(r.Context(), p, r.PathValue("id"))
	return reply(w, http.StatusOK, out, err)
}

func (a *API) evalReport(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.core.EvalReport(r.Context(), p, r.PathValue("id"))
	return reply(w, http.StatusOK, out, err)
}

func (a *API) cancelEval(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.core.CancelEval(r.Context(), p, r.PathValue("id"))
	return reply(w, http.StatusOK, out, err)
}
