package hub

import (
	"context"
	"errors"
	"net/http"
	"time"

	"drover/internal/apitypes"
	"drover/internal/auth"
	"drover/internal/hub/call"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/rules"
	"drover/internal/store"
	"drover/internal/web"
)

// dashboard is the web pages' Backend: each call is the API's function for
// the same user, so the pages see and do exactly what the API allows.
type dashboard struct{ h *Hub }

var _ web.Backend = dashboard{}

// as is the signed-in user as an API caller with a user token.
func as(u web.User) call.Caller {
	return call.Caller{Kind: store.TokenUser, UserID: u.ID, Name: u.Name, Admin: u.Admin}
}

func asUser(p call.Caller) web.User { return web.User{ID: p.UserID, Name: p.Name, Admin: p.Admin} }

// pageError is err as the pages may show it, like the API's refusals.
func (d dashboard) pageError(err error) error {
	if err == nil {
		return nil
	}
	ae := d.h.AsRefusal(err)
	if ae.Status < 500 {
		d.h.log.Info("web request refused", "code", ae.Code, "msg", ae.Msg)
	}
	return &web.Error{Status: ae.Status, Msg: ae.Msg}
}

func (d dashboard) UserOf(ctx context.Context, token string) (web.User, error) {
	p, err := d.h.AuthenticateAs(ctx, token, store.TokenUser)
	return asUser(p), d.pageError(err)
}

// sessionPrefix marks a web session's cookie value (never an API token).
const sessionPrefix = "drv_s_"

func (d dashboard) NewSession(ctx context.Context, u web.User) (string, time.Time, error) {
	tok := auth.NewToken(sessionPrefix)
	now := d.h.now()
	err := d.h.store.Write(ctx, func(tx store.Tx) error {
		return tx.InsertToken(store.Token{Hash: auth.Hash(tok), Kind: store.TokenSession, OwnerID: u.ID, CreatedAt: now})
	})
	return tok, now.Add(d.h.cfg.SessionTTL), d.pageError(err)
}

func (d dashboard) Session(ctx context.Context, session string) (web.User, error) {
	var p call.Caller
	err := d.h.store.Read(ctx, func(tx store.Tx) error {
		t, err := tx.Token(auth.Hash(session))
		switch {
		case errors.Is(err, store.ErrNotFound) || (err == nil && t.Kind != store.TokenSession):
			return call.Errf(http.StatusUnauthorized, rules.ErrUnauthorized, "the session is not known (signed out, or the hub forgot it)")
		case err != nil:
			return err
		case t.RevokedAt != nil:
			return call.Errf(http.StatusUnauthorized, rules.ErrUnauthorized, "you signed out, or your token was rotated")
		case !d.h.now().Before(t.CreatedAt.Add(d.h.cfg.SessionTTL)):
			return call.Errf(http.StatusUnauthorized, rules.ErrUnauthorized, "the session expired")
		}
		p, err = userPrincipal(tx, t.OwnerID)
		return err
	})
	return asUser(p), d.pageError(err)
}

func (d dashboard) EndSession(ctx context.Context, session string) error {
	err := d.h.store.Write(ctx, func(tx store.Tx) error {
		return tx.RevokeToken(auth.Hash(session), d.h.now())
	})
	if errors.Is(err, store.ErrNotFound) {
		return nil // already ended
	}
	return d.pageError(err)
}

func (d dashboard) Runners(ctx context.Context, u web.User) ([]apitypes.RunnerView, error) {
	rs, err := d.h.RunnerViews(ctx, as(u))
	return rs, d.pageError(err)
}

func (d dashboard) Jobs(ctx context.Context, u web.User, state string) ([]apitypes.JobView, error) {
	js, err := d.h.ListJobs(ctx, as(u), call.ListJobsRequest{State: job.State(state), Limit: 500})
	return js.Jobs, d.pageError(err)
}

func (d dashboard) Job(ctx context.Context, u web.User, id string) (apitypes.JobView, error) {
	v, err := d.h.ShowJob(ctx, as(u), call.ShowJobRequest{ID: id})
	return v, d.pageError(err)
}

func (d dashboard) Events(ctx context.Context, u web.User, id string, after int64) ([]apitypes.EventView, error) {
	evs, err := d.h.JobEvents(ctx, as(u), call.JobEventsRequest{ID: id, After: after})
	return evs.Events, d.pageError(err)
}

func (d dashboard) Log(ctx context.Context, u web.User, id string, attempt, offset int64) (web.LogSlice, error) {
	s, err := d.h.readLog(ctx, as(u), call.LogRequest{ID: id, Attempt: attempt, Offset: offset})
	return web.LogSlice{Data: s.Data, Attempt: s.Attempt, Size: s.Size, Complete: s.Complete}, d.pageError(err)
}

func (d dashboard) Changed(id string) (<-chan struct{}, func()) { return d.h.waitChan(id) }

func (d dashboard) Questions(ctx context.Context, u web.User) ([]protocol.QuestionView, error) {
	qs, err := d.h.openQuestions(ctx, as(u))
	return qs, d.pageError(err)
}

func (d dashboard) Projects(ctx context.Context, u web.User) ([]apitypes.ProjectView, error) {
	ps, err := d.h.ProjectViews(ctx, as(u))
	return ps, d.pageError(err)
}

func (d dashboard) Members(ctx context.Context, u web.User, project string) (apitypes.MemberList, error) {
	ms, err := d.h.Members(ctx, as(u), call.MembersRequest{Project: project})
	return ms, d.pageError(err)
}

// pipelinesShown bounds the pipelines page, newest first.
const pipelinesShown = 100

func (d dashboard) Pipelines(ctx context.Context, u web.User) ([]apitypes.PipelineView, error) {
	l, err := d.h.pipelines.ListPipelines(ctx, as(u), pipelinesShown)
	return l.Pipelines, d.pageError(err)
}

func (d dashboard) Pipeline(ctx context.Context, u web.User, id string) (apitypes.PipelineView, error) {
	v, err := d.h.pipelines.ShowPipeline(ctx, as(u), id)
	return v, d.pageError(err)
}

func (d dashboard) Group(ctx context.Context, u web.User, id string) (apitypes.GroupView, error) {
	v, err := d.h.groups.CompareGroup(ctx, as(u), id)
	return v, d.pageError(err)
}

func (d dashboard) Accounts(ctx context.Context, u web.User) (apitypes.AccountList, error) {
	out, err := d.h.Accounts(ctx, as(u))
	return out, d.pageError(err)
}

func (d dashboard) MoveAccount(ctx context.Context, u web.User, req apitypes.MoveAccountRequest) error {
	_, err := d.h.MoveAccount(ctx, as(u), req)
	return d.pageError(err)
}

func (d dashboard) Act(ctx context.Context, u web.User, id, action string) error {
	_, err := d.h.ActOnJob(ctx, as(u), call.JobActionRequest{Action: action, Show: call.ShowJobRequest{ID: id}})
	return d.pageError(err)
}

func (d dashboard) Answer(ctx context.Context, u web.User, id string, req apitypes.AnswerRequest) error {
	return d.pageError(d.h.answerJob(ctx, as(u), id, req))
}

func (d dashboard) ApproveRunner(ctx context.Context, u web.User, req apitypes.ApproveRequest) (apitypes.ApproveResponse, error) {
	out, err := d.h.Approve(ctx, as(u), req)
	return out, d.pageError(err)
}

func (d dashboard) RevokeRunner(ctx context.Context, u web.User, name string) error {
	_, err := d.h.RevokeRunner(ctx, as(u), call.RunnerRequest{Name: name})
	return d.pageError(err)
}

func (d dashboard) ShareRunner(ctx context.Context, u web.User, name string, req apitypes.ShareRequest, share bool) error {
	_, err := d.h.ShareRunner(ctx, as(u), call.ShareRunnerRequest{Name: name, Share: share, ShareRequest: req})
	return d.pageError(err)
}

func (d dashboard) ShareAccount(ctx context.Context, u web.User, req apitypes.AccountShareRequest, share bool) error {
	_, err := d.h.ShareAccount(ctx, as(u), call.ShareAccountRequest{Share: share, AccountShareRequest: req})
	return d.pageError(err)
}

func (d dashboard) ChangeMember(ctx context.Context, u web.User, project, user string, add bool) error {
	_, err := d.h.ChangeMember(ctx, as(u), call.ChangeMemberRequest{Project: project, User: user, Add: add})
	return d.pageError(err)
}

func (d dashboard) Diff(ctx context.Context, u web.User, id string, max int) (web.Diff, error) {
	var j store.Job
	err := d.h.store.Read(ctx, func(tx store.Tx) error {
		var err error
		j, err = visibleJob(tx, as(u), id)
		return err
	})
	if err != nil {
		return web.Diff{}, d.pageError(err)
	}
	if j.Head == "" || j.Head == j.Base || j.Project == "" || !d.h.repos.Exists(j.Project) {
		return web.Diff{}, nil
	}
	patch, cut, err := d.h.repos.Diff(ctx, j.Project, j.Base, j.Head, max)
	if patch == nil && err == nil {
		patch = []byte{} // an empty change is a change published
	}
	return web.Diff{Patch: patch, Cut: cut}, d.pageError(err)
}

// evalsShown bounds the evaluations page, newest first.
const evalsShown = 100

func (d dashboard) Evals(ctx context.Context, u web.User) ([]apitypes.EvalView, error) {
	l, err := d.h.evals.ListEvals(ctx, as(u), evalsShown)
	return l.Evals, d.pageError(err)
}

func (d dashboard) EvalReport(ctx context.Context, u web.User, id string) (apitypes.EvalReport, error) {
	r, err := d.h.evals.EvalReport(ctx, as(u), id)
	return r, d.pageError(err)
}
