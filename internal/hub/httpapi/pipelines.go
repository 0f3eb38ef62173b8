package httpapi

import (
	"math"
	"net/http"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
)

// The pipelines API's HTTP transport over Pipelines: /pipelines[/{id}],
// its cancel, retry and events.

func (a *API) runPipeline(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	var req apitypes.PipelineRunRequest
	if err := decodeBodyMax(r, w, &req, apitypes.MaxPipelineRequest); err != nil {
		return err
	}
	out, started, err := a.core.RunPipeline(r.Context(), p, req)
	status := http.StatusOK
	if started {
		status = http.StatusCreated
	}
	return reply(w, status, out, err)
}

func (a *API) listPipelines(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	limit, err := queryInt(r.URL.Query(), "limit", 1, 1000)
	if err != nil {
		return err
	}
	out, err := a.core.ListPipelines(r.Context(), p, int(limit))
	return reply(w, http.StatusOK, out, err)
}

func (a *API) showPipeline(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.core.ShowPipeline(r.Context(), p, r.PathValue("id"))
	return reply(w, http.StatusOK, out, err)
}

func (a *API) cancelPipeline(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.core.CancelPipeline(r.Context(), p, r.PathValue("id"))
	return reply(w, http.StatusOK, out, err)
}

func (a *API) retryPipeline(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	var req apitypes.PipelineRetryRequest
	if err := decodeBody(r, w, &req); err != nil {
		return err
	}
	out, err := a.core.RetryPipeline(r.Context(), p, r.PathValue("id"), req)
	return reply(w, http.StatusOK, out, err)
}

func (a *API) pipelineEvents(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	after, err := queryInt(r.URL.Query(), "after", 0, math.MaxInt64)
	if err != nil {
		return err
	}
	out, err := a.core.PipelineEvents(r.Context(), p, r.PathValue("id"), after)
	return reply(w, http.StatusOK, out, err)
}
