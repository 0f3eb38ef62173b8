package hub

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"regexp"
	"slices"
	"strings"

	"drover/internal/agent/catalog"
	"drover/internal/ids"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/store"
)

// agents the hub accepts jobs for. A job for an agent no runner has would
// wait forever, so refuse it at the door.
// The agents a job may name are those of the catalogue; every one but exec
// takes a prompt and works with drover's tools (only its deliver completes
// the job).
// usesAccount says whether jobs of agent run under a runner's account (all
// but exec; an agent the catalogue no longer knows is assumed to).
func usesAccount(agent string) bool {
	e, ok := catalog.Lookup(agent)
	return !ok || e.Accounts()
}

func agentNames() string {
	names := catalog.Names()
	slices.Sort(names)
	return strings.Join(names, ", ")
}

var labelKeyRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]*$`)

func validateLabels(labels map[string]string) error {
	if len(labels) > protocol.MaxLabels {
		return fmt.Errorf("%d labels, the limit is %d", len(labels), protocol.MaxLabels)
	}
	for k, v := range labels {
		if len(k) > protocol.MaxLabelLen || !labelKeyRE.MatchString(k) {
			return fmt.Errorf("label key %q must be 1-%d characters of letters, digits and ._/-", k, protocol.MaxLabelLen)
		}
		if len(v) > protocol.MaxLabelLen {
			return fmt.Errorf("label %s has a value over %d characters", k, protocol.MaxLabelLen)
		}
		if err := protocol.CheckPlainText("the value of label "+k, v, false); err != nil {
			return err
		}
	}
	return nil
}

func validateSubmit(req protocol.SubmitRequest) error {
	entry, ok := catalog.Lookup(req.Agent)
	if !ok {
		return badRequest("unknown agent %q (known: %s)", req.Agent, agentNames())
	}
	if len(req.Args) == 0 && !entry.Prompt() {
		return badRequest("the %s agent needs a command to run (drover run --agent %s -- COMMAND ARGS...)", req.Agent, req.Agent)
	}
	if strings.TrimSpace(strings.Join(req.Args, "")) == "" && entry.Prompt() {
		return badRequest("the %s agent needs a prompt (drover run --agent %s -- PROMPT)", req.Agent, req.Agent)
	}
	if len(req.Args) > protocol.MaxArgs {
		return badRequest("%d arguments, the limit is %d", len(req.Args), protocol.MaxArgs)
	}
	n := 0
	for _, a := range req.Args {
		n += len(a)
	}
	if n > protocol.MaxArgsBytes {
		return badRequest("arguments take %d bytes, the limit is %d", n, protocol.MaxArgsBytes)
	}
	if err := validateLabels(req.Labels); err != nil {
		return badRequest("%v", err)
	}
	if len(req.Key) > 128 {
		return badRequest("idempotency key is over 128 characters")
	}
	if err := protocol.CheckPlainText("idempotency key", req.Key, false); err != nil {
		return badRequest("%v", err)
	}
	if req.Account != "" && (!usesAccount(req.Agent) || len(req.Account) > 64) {
		return badRequest("--account names a vendor agent's account (an id or label of at most 64 characters); %s jobs have none", req.Agent)
	}
	if err := protocol.CheckPlainText("account", req.Account, false); err != nil {
		return badRequest("%v", err)
	}
	if entry, _ := catalog.Lookup(req.Agent); req.Model != "" && (entry.Kind != catalog.Native || len(req.Model) > protocol.MaxModel) {
		return badRequest("--model names a native agent's model (at most %d characters); %s jobs take theirs from the runner", protocol.MaxModel, req.Agent)
	}
	if err := protocol.CheckPlainText("model", req.Model, false); err != nil {
		return badRequest("%v", err)
	}
	if entry, _ := catalog.Lookup(req.Agent); req.Fallback != "" && (entry.Kind != catalog.Native || len(req.Fallback) > 64) {
		return badRequest("--fallback names a native job's fallback account (an id or label of at most 64 characters); %s jobs have none", req.Agent)
	}
	if err := protocol.CheckPlainText("fallback", req.Fallback, false); err != nil {
		return badRequest("%v", err)
	}
	return nil
}

func (h *Hub) apiSubmit(w http.ResponseWriter, r *http.Request, p principal) error {
	var req protocol.SubmitRequest
	if err := decodeBodyMax(r, w, &req, maxSubmitBody); err != nil {
		return err
	}
	if err := validateSubmit(req); err != nil {
		return err
	}
	if entry, _ := catalog.Lookup(req.Agent); entry.Prompt() {
		req.Tools = true
	}
	now := h.now()
	j := store.Job{
		ID: ids.New("j"), State: job.Queued, Agent: req.Agent, Args: req.Args, Labels: req.Labels,
		RequesterID: p.userID, Key: req.Key, LogCap: h.cfg.LogCap, CreatedAt: now, UpdatedAt: now, Tools: req.Tools, Account: req.Account, Model: req.Model, Fallback: req.Fallback,
	}
	if err := h.checkSource(r.Context(), p, req, &j); err != nil {
		return err
	}
	created := true
	err := h.store.Write(r.Context(), func(tx store.Tx) error {
		if req.Key != "" {
			old, err := tx.JobByKey(p.userID, req.Key)
			if err == nil {
				j, created = old, false
				return nil
			}
			if !errors.Is(err, store.ErrNotFound) {
				return err
			}
		}
		if err := tx.InsertJob(j); err != nil {
			return err
		}
		for _, f := range req.Context {
			if err := tx.InsertContextFile(j.ID, store.ContextFile{Name: f.Name, Data: f.Data}); err != nil {
				return err
			}
		}
		msg := fmt.Sprintf("%s job submitted", j.Agent)
		if j.Project != "" {
			msg += fmt.Sprintf(" on %s at %s (%s)", j.Project, j.Base, j.Mode)
		}
		_, err := tx.AddEvent(store.Event{JobID: j.ID, At: now, Kind: "submitted", Actor: p.name, Message: msg})
		return err
	})
	if err != nil {
		return fmt.Errorf("submit job: %w", err)
	}
	if created {
		h.pinBase(r.Context(), j)
	}
	view, err := h.jobView(r.Context(), p, j.ID)
	if err != nil {
		return err
	}
	status := http.StatusOK
	if created {
		status = http.StatusCreated
		h.log.Info("job submitted", "job", j.ID, "agent", j.Agent, "requester", p.name)
		h.kick()
	}
	writeJSON(w, status, view)
	return nil
}

func (h *Hub) apiJobs(w http.ResponseWriter, r *http.Request, p principal) error {
	f := store.JobFilter{State: job.State(r.URL.Query().Get("state"))}
	if f.State != "" && !f.State.Valid() {
		return badRequest("unknown state %q (one of %v)", f.State, job.States)
	}
	n, err := queryInt(r.URL.Query(), "limit", 1, 1000)
	if err != nil {
		return err
	}
	f.Limit = int(n)
	views, err := h.jobViews(r.Context(), p, f)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, protocol.JobList{Jobs: views})
	return nil
}

func (h *Hub) apiJob(w http.ResponseWriter, r *http.Request, p principal) error {
	id := r.PathValue("id")
	v, err := h.jobView(r.Context(), p, id)
	if err != nil {
		return err
	}
	if r.URL.Query().Get("events") == "1" {
		if v.Events, err = h.events(r.Context(), p, id, 0); err != nil {
			return err
		}
	}
	writeJSON(w, http.StatusOK, v)
	return nil
}

// apiJobAction serves POST /jobs/{id}/ACTION: do, then the job as it is.
func (h *Hub) apiJobAction(do func(context.Context, principal, string) error) func(http.ResponseWriter, *http.Request, principal) error {
	return func(w http.ResponseWriter, r *http.Request, p principal) error {
		if err := do(r.Context(), p, r.PathValue("id")); err != nil {
			return err
		}
		return h.apiJob(w, r, p)
	}
}

func (h *Hub) apiEvents(w http.ResponseWriter, r *http.Request, p principal) error {
	id := r.PathValue("id")
	after, err := queryInt(r.URL.Query(), "after", 0, math.MaxInt64)
	if err != nil {
		return err
	}
	evs, err := h.events(r.Context(), p, id, after)
	if err != nil {
		return err
	}
	writeJSON(w, http.StatusOK, protocol.EventList{Events: evs})
	return nil
}

// events returns up to 1000 of a job's events after sequence number after.
func (h *Hub) events(ctx context.Context, p principal, id string, after int64) ([]protocol.EventView, error) {
	out := []protocol.EventView{}
	err := h.store.Read(ctx, func(tx store.Tx) error {
		if _, err := visibleJob(tx, p, id); err != nil {
			return err
		}
		evs, err := tx.Events(id, after, 1000)
		if err != nil {
			return err
		}
		for _, e := range evs {
			out = append(out, protocol.EventView{Seq: e.Seq, Job: e.JobID, At: e.At.UTC(), Kind: e.Kind, Actor: e.Actor, Message: e.Message})
		}
		return nil
	})
	return out, err
}
