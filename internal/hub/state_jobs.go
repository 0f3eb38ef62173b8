package hub

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"drover/internal/agent/facts"
	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/ids"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/publish"
	"drover/internal/rules"
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
	a, ok := accountAgents[agent]
	return !ok || a
}

// accountAgents is each catalogue agent's Accounts(), read once: the
// dispatcher asks for every candidate runner of every job, and
// facts.Lookup builds the whole catalogue each time. Never written after.
var accountAgents = func() map[string]bool {
	m := map[string]bool{}
	for _, a := range facts.All() {
		m[a.Name] = a.Accounts()
	}
	return m
}()

func agentNames() string {
	names := facts.Names()
	slices.Sort(names)
	return strings.Join(names, ", ")
}

func validateSubmit(req apitypes.SubmitRequest) error {
	entry, ok := facts.Lookup(req.Agent)
	if !ok {
		return call.BadRequest("unknown agent %q (known: %s)", req.Agent, agentNames())
	}
	if len(req.Args) == 0 && !entry.Prompt() {
		return call.BadRequest("the %s agent needs a command to run (drover run --agent %s -- COMMAND ARGS...)", req.Agent, req.Agent)
	}
	if strings.TrimSpace(strings.Join(req.Args, "")) == "" && entry.Prompt() {
		return call.BadRequest("the %s agent needs a prompt (drover run --agent %s -- PROMPT)", req.Agent, req.Agent)
	}
	if len(req.Args) > rules.MaxArgs {
		return call.BadRequest("%d arguments, the limit is %d", len(req.Args), rules.MaxArgs)
	}
	n := 0
	for _, a := range req.Args {
		n += len(a)
	}
	if n > rules.MaxArgsBytes {
		return call.BadRequest("arguments take %d bytes, the limit is %d", n, rules.MaxArgsBytes)
	}
	// Arguments are shown in terminals (drover show, the runner's log)
	// and a prompt is one: multiline plain text.
	for i, a := range req.Args {
		if err := rules.CheckPlainText(fmt.Sprintf("argument %d", i+1), a, true); err != nil {
			return call.BadRequest("%v", err)
		}
	}
	if err := rules.CheckLabels(req.Labels); err != nil {
		return call.BadRequest("%v", err)
	}
	if len(req.Key) > 128 {
		return call.BadRequest("idempotency key is over 128 characters")
	}
	if err := rules.CheckPlainText("idempotency key", req.Key, false); err != nil {
		return call.BadRequest("%v", err)
	}
	if req.Account != "" && (!usesAccount(req.Agent) || len(req.Account) > 64) {
		return call.BadRequest("--account names a vendor agent's account (an id or label of at most 64 characters); %s jobs have none", req.Agent)
	}
	if err := rules.CheckPlainText("account", req.Account, false); err != nil {
		return call.BadRequest("%v", err)
	}
	if entry, _ := facts.Lookup(req.Agent); req.Model != "" && (entry.Kind != facts.KindNative || len(req.Model) > protocol.MaxModel) {
		return call.BadRequest("--model names a native agent's model (at most %d characters); %s jobs take theirs from the runner", protocol.MaxModel, req.Agent)
	}
	if err := rules.CheckPlainText("model", req.Model, false); err != nil {
		return call.BadRequest("%v", err)
	}
	if entry, _ := facts.Lookup(req.Agent); req.Fallback != "" && (entry.Kind != facts.KindNative || len(req.Fallback) > 64) {
		return call.BadRequest("--fallback names a native job's fallback account (an id or label of at most 64 characters); %s jobs have none", req.Agent)
	}
	if err := rules.CheckPlainText("fallback", req.Fallback, false); err != nil {
		return call.BadRequest("%v", err)
	}
	if req.Image != "" {
		if err := rules.CheckImage(req.Image); err != nil {
			return call.BadRequest("%v", err)
		}
	}
	return nil
}

// The jobs' operations of the state layer (docs/architecture.md): each is
// (ctx, caller, typed request) -> (typed reply, error), checks who is
// asking itself (access.go), and knows nothing of its transport; the HTTP
// API (httpapi/jobs.go) and the dashboard (dashboard.go) call them.

// SubmitJob queues a new job for p, or finds the one p submitted earlier
// with the same idempotency key.
func (h *Hub) SubmitJob(ctx context.Context, p call.Caller, req apitypes.SubmitRequest) (call.Submitted, error) {
	s, err := h.prepareSubmit(ctx, nil, p, req)
	if err != nil {
		return call.Submitted{}, err
	}
	if err := h.store.Write(ctx, func(tx store.Tx) error { return s.insert(tx) }); err != nil {
		return call.Submitted{}, fmt.Errorf("submit job: %w", err)
	}
	return h.submitted(ctx, s)
}

// submission is a job checked for its submit, to be inserted in a write
// (insert) and then told (submitted).
type submission struct {
	p   call.Caller
	req apitypes.SubmitRequest
	// prepared is the job to insert; j the job inserted, or found by its
	// key.
	prepared, j store.Job
	planned     *store.Publication
	created     bool
	now         time.Time
}

// prepareSubmit checks req and its source for p, outside any write, or in
// in, the write its job goes in, as checkSource does.
func (h *Hub) prepareSubmit(ctx context.Context, in store.Tx, p call.Caller, req apitypes.SubmitRequest) (*submission, error) {
	if err := validateSubmit(req); err != nil {
		return nil, err
	}
	if entry, _ := facts.Lookup(req.Agent); entry.Prompt() {
		req.Tools = true
	}
	now := h.now()
	s := &submission{p: p, req: req, now: now, prepared: store.Job{
		ID: ids.New("j"), State: job.Queued, Agent: req.Agent, Args: req.Args, Labels: req.Labels,
		RequesterID: p.UserID, Key: req.Key, LogCap: h.cfg.LogCap, CreatedAt: now, UpdatedAt: now, Tools: req.Tools, Account: req.Account, Model: req.Model, Fallback: req.Fallback,
		Image: req.Image,
	}}
	if req.Repo != nil && req.Repo.FromPR != 0 {
		if in != nil {
			return nil, errOutsideWrite
		}
		pub, err := h.startFromPR(ctx, p, &req)
		if err != nil {
			return nil, err
		}
		s.planned, s.req = &pub, req
	}
	if err := h.checkSource(ctx, in, p, s.req, &s.prepared); err != nil {
		return nil, err
	}
	s.j = s.prepared
	return s, nil
}

// insert writes s's job in tx, or finds the one its key names. It may
// run again (a retried write): it starts from s as prepared each time.
func (s *submission) insert(tx store.Tx) error {
	p, req, j := s.p, s.req, s.prepared
	s.j, s.created = j, false
	if req.Key != "" {
		old, err := tx.JobByKey(p.UserID, req.Key)
		if err == nil {
			s.j = old
			return nil
		}
		if !errors.Is(err, store.ErrNotFound) {
			return err
		}
	}
	if err := tx.InsertJob(j); err != nil {
		return err
	}
	if s.planned != nil {
		s.planned.JobID = j.ID
		if err := tx.PutPublication(*s.planned); err != nil {
			return err
		}
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
	if _, err := tx.AddEvent(store.Event{JobID: j.ID, At: s.now, Kind: "submitted", Actor: p.Name, Message: msg}); err != nil {
		return err
	}
	s.created = true
	return nil
}

// submitted is s's view once its write committed, its new job's base
// pinned and the dispatcher told of it.
func (h *Hub) submitted(ctx context.Context, s *submission) (call.Submitted, error) {
	h.afterSubmit(ctx, s)
	view, err := h.submittedView(ctx, s.p, s.j, s.created, s.planned)
	if err != nil {
		return call.Submitted{}, err
	}
	return call.Submitted{Job: view, Created: s.created}, nil
}

// afterSubmit pins a new job's base and tells the dispatcher of it, once
// its write committed.
func (h *Hub) afterSubmit(ctx context.Context, s *submission) {
	if !s.created {
		return
	}
	h.pinBase(ctx, s.j)
	h.log.Info("job submitted", "job", s.j.ID, "agent", s.j.Agent, "requester", s.p.Name)
	h.kick()
}

// submittedView is the view of job j that p submitted: a job just
// created is its view as committed (it has no attempt, question or
// publication but the one planned with it; read again, it cost the submit
// five reads), one found by its key is read.
func (h *Hub) submittedView(ctx context.Context, p call.Caller, j store.Job, created bool, planned *store.Publication) (apitypes.JobView, error) {
	if !created || p.Kind != store.TokenUser || p.UserID != j.RequesterID {
		return h.jobView(ctx, p, j.ID)
	}
	v := bareJobView(j, p.Name)
	if planned != nil {
		pv := publish.View(*planned)
		v.Publication = &pv
	}
	h.addWhy(&v, shapeKey(j))
	return v, nil
}

func (h *Hub) ListJobs(ctx context.Context, p call.Caller, req call.ListJobsRequest) (apitypes.JobList, error) {
	if req.State != "" && !req.State.Valid() {
		return apitypes.JobList{}, call.BadRequest("unknown state %q (one of %v)", req.State, job.States)
	}
	views, err := h.jobViews(ctx, p, store.JobFilter{State: req.State, Limit: req.Limit})
	return apitypes.JobList{Jobs: views}, err
}

func (h *Hub) ShowJob(ctx context.Context, p call.Caller, req call.ShowJobRequest) (apitypes.JobView, error) {
	v, err := h.jobView(ctx, p, req.ID)
	if err != nil {
		return v, err
	}
	if req.Events {
		if v.Events, err = h.events(ctx, p, req.ID, 0); err != nil {
			return v, err
		}
	}
	return v, nil
}

func (h *Hub) ActOnJob(ctx context.Context, p call.Caller, req call.JobActionRequest) (apitypes.JobView, error) {
	var do func(context.Context, call.Caller, string) error
	switch req.Action {
	case "cancel":
		do = h.cancelJob
	case "retry":
		do = h.retryJob
	case "restart":
		do = h.restartJob
	case "answer":
		do = func(ctx context.Context, p call.Caller, id string) error { return h.answerJob(ctx, p, id, req.Answer) }
	case "approve":
		do = h.approveAnswer
	default:
		return apitypes.JobView{}, call.NotFound("no job action %q", req.Action)
	}
	if err := do(ctx, p, req.Show.ID); err != nil {
		return apitypes.JobView{}, err
	}
	return h.ShowJob(ctx, p, req.Show)
}

func (h *Hub) JobEvents(ctx context.Context, p call.Caller, req call.JobEventsRequest) (apitypes.EventList, error) {
	evs, err := h.events(ctx, p, req.ID, req.After)
	return apitypes.EventList{Events: evs}, err
}

// events returns up to 1000 of a job's events after sequence number after.
func (h *Hub) events(ctx context.Context, p call.Caller, id string, after int64) ([]apitypes.EventView, error) {
	out := []apitypes.EventView{}
	err := h.store.Read(ctx, func(tx store.Tx) error {
		if _, err := visibleJob(tx, p, id); err != nil {
			return err
		}
		evs, err := tx.Events(id, after, 1000)
		if err != nil {
			return err
		}
		for _, e := range evs {
			out = append(out, apitypes.EventView{Seq: e.Seq, Job: e.JobID, At: e.At.UTC(), Kind: e.Kind, Actor: e.Actor, Message: e.Message})
		}
		return nil
	})
	return out, err
}

// OpenQuestions lists the open questions of the jobs p may see.
func (h *Hub) OpenQuestions(ctx context.Context, p call.Caller) (apitypes.QuestionList, error) {
	qs, err := h.openQuestions(ctx, p)
	return apitypes.QuestionList{Questions: qs}, err
}
