package httpapi

import (
	"math"
	"net/http"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/job"
)

// The jobs API's HTTP transport: each handler decodes its request, calls
// one operation of Jobs and encodes the reply; refusals
// become statuses in writeError.

func (a *API) submitJob(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	var req apitypes.SubmitRequest
	if err := decodeBodyMax(r, w, &req, maxSubmitBody); err != nil {
		return err
	}
	out, err := a.core.SubmitJob(r.Context(), p, req)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if out.Created {
		status = http.StatusCreated
	}
	writeJSON(w, status, out.Job)
	return nil
}

func (a *API) listJobs(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	limit, err := queryInt(r.URL.Query(), "limit", 1, 1000)
	if err != nil {
		return err
	}
	out, err := a.core.ListJobs(r.Context(), p, call.ListJobsRequest{State: job.State(r.URL.Query().Get("state")), Limit: int(limit)})
	return reply(w, http.StatusOK, out, err)
}

// showJobRequestOf reads GET /jobs/{id}[?events=1].
func showJobRequestOf(r *http.Request) call.ShowJobRequest {
	return call.ShowJobRequest{ID: r.PathValue("id"), Events: r.URL.Query().Get("events") == "1"}
}

func (a *API) showJob(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	v, err := a.core.ShowJob(r.Context(), p, showJobRequestOf(r))
	return reply(w, http.StatusOK, v, err)
}

// actOnJob serves POST /jobs/{id}/ACTION: the action, then the job as it is.
func (a *API) actOnJob(action string) func(http.ResponseWriter, *http.Request, call.Caller) error {
	return func(w http.ResponseWriter, r *http.Request, p call.Caller) error {
		v, err := a.core.ActOnJob(r.Context(), p, call.JobActionRequest{Action: action, Show: showJobRequestOf(r)})
		return reply(w, http.StatusOK, v, err)
	}
}

func (a *API) answerJob(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	req := call.JobActionRequest{Action: "answer", Show: showJobRequestOf(r)}
	if err := decodeBody(r, w, &req.Answer); err != nil {
		return err
	}
	v, err := a.core.ActOnJob(r.Context(), p, req)
	return reply(w, http.StatusOK, v, err)
}

// questions lists the open questions of the jobs the caller may see.
func (a *API) questions(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	out, err := a.core.OpenQuestions(r.Context(), p)
	return reply(w, http.StatusOK, out, err)
}

func (a *API) jobEvents(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	after, err := queryInt(r.URL.Query(), "after", 0, math.MaxInt64)
	if err != nil {
		return err
	}
	out, err := a.core.JobEvents(r.Context(), p, call.JobEventsRequest{ID: r.PathValue("id"), After: after})
	return reply(w, http.StatusOK, out, err)
}
