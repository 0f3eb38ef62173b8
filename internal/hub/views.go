package hub

import (
	"context"
	"encoding/json"
	"errors"
	"time"

	"drover/internal/apitypes"
	"drover/internal/hub/call"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/publish"
	"drover/internal/store"
)

// attemptUsage is what attempt a reported it used, nil when nothing.
func attemptUsage(a store.Attempt) *protocol.Usage {
	var u protocol.Usage
	if a.Usage == "" || json.Unmarshal([]byte(a.Usage), &u) != nil {
		return nil
	}
	return &u
}

// namer resolves ids to names once per transaction.
type namer struct {
	tx      store.Tx
	users   map[string]string
	runners map[string]string
}

func newNamer(tx store.Tx) *namer {
	return &namer{tx: tx, users: map[string]string{}, runners: map[string]string{}}
}

func (n *namer) user(id string) string {
	if v, ok := n.users[id]; ok {
		return v
	}
	name := id
	if u, err := n.tx.User(id); err == nil {
		name = u.Name
	}
	n.users[id] = name
	return name
}

func (n *namer) runner(id string) string {
	if v, ok := n.runners[id]; ok {
		return v
	}
	name := id
	if r, err := n.tx.Runner(id); err == nil {
		name = r.Name
	}
	n.runners[id] = name
	return name
}

func utcPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	u := t.UTC()
	return &u
}

func (n *namer) jobView(j store.Job) (apitypes.JobView, error) {
	atts, err := n.tx.Attempts(j.ID)
	if err != nil {
		return apitypes.JobView{}, err
	}
	v := bareJobView(j, n.user(j.RequesterID))
	for _, a := range atts {
		av := apitypes.AttemptView{
			ID: a.ID, Number: a.Epoch, State: a.State, Runner: n.runner(a.RunnerID),
			OfferedAt: a.OfferedAt.UTC(), StartedAt: utcPtr(a.AcceptedAt), FinishedAt: utcPtr(a.FinishedAt),
			ExitCode: a.ExitCode, Reason: a.Reason, Message: a.Message, LogSize: a.LogSize, LogSHA256: a.LogSHA256,
			Session: a.Session, Summary: a.Summary, Account: a.Account,
		}
		if a.Summary != "" {
			v.Summary = a.Summary
		}
		av.Usage = attemptUsage(a)
		if a.Isolation != "" {
			var iso protocol.Isolation
			if json.Unmarshal([]byte(a.Isolation), &iso) == nil {
				av.Isolation = &iso
			}
		}
		v.Attempts = append(v.Attempts, av)
		if a.ID == j.AttemptID {
			v.Runner = av.Runner
		}
	}
	if pub, err := n.tx.Publication(j.ID); err == nil {
		pv := publish.View(pub)
		v.Publication = &pv
	} else if !errors.Is(err, store.ErrNotFound) {
		return apitypes.JobView{}, err
	}
	qs, err := n.questionViews(j, false)
	if err != nil {
		return apitypes.JobView{}, err
	}
	if len(qs) > 0 {
		v.Questions = qs
	}
	return v, nil
}

// bareJobView is j's view without what other rows add (attempts, its
// publication, questions): all of a job just submitted.
func bareJobView(j store.Job, requester string) apitypes.JobView {
	v := apitypes.JobView{
		ID: j.ID, State: j.State, Agent: j.Agent, Args: j.Args, Labels: j.Labels, Account: j.Account, Fallback: j.Fallback,
		Requester: requester, Attempts: []apitypes.AttemptView{},
		CreatedAt: j.CreatedAt.UTC(), FinishedAt: utcPtr(j.FinishedAt), ExitCode: j.ExitCode,
		Reason: j.Reason, Key: j.Key, Cancelling: j.Cancelling,
		Project: j.Project, Base: j.Base, Head: j.Head, Mode: j.Mode, Tools: j.Tools, Network: j.Network, Sparse: j.Sparse, Image: j.Image,
	}
	if v.Args == nil {
		v.Args = []string{}
	}
	return v
}

// jobView is the job as p may see it (notFound when p may not see it).
func (h *Hub) jobView(ctx context.Context, p call.Caller, id string) (apitypes.JobView, error) {
	var v apitypes.JobView
	var shape string
	err := h.store.Read(ctx, func(tx store.Tx) error {
		j, err := visibleJob(tx, p, id)
		if err != nil {
			return err
		}
		shape = shapeKey(j)
		if v, err = newNamer(tx).jobView(j); err != nil {
			return err
		}
		return h.addAllow(tx, &v)
	})
	h.addWhy(&v, shape)
	return v, err
}

// jobViews lists the jobs p may see.
func (h *Hub) jobViews(ctx context.Context, p call.Caller, f store.JobFilter) ([]apitypes.JobView, error) {
	out := []apitypes.JobView{}
	var shapes []string
	err := h.store.Read(ctx, func(tx store.Tx) error {
		jobs, err := tx.Jobs(jobFilterFor(p, f))
		if err != nil {
			return err
		}
		n := newNamer(tx)
		for _, j := range jobs {
			v, err := n.jobView(j)
			if err != nil {
				return err
			}
			out = append(out, v)
			shapes = append(shapes, shapeKey(j))
		}
		return nil
	})
	for i := range out {
		h.addWhy(&out[i], shapes[i])
	}
	return out, err
}

// addWhy says why a queued job waits, outside any transaction (h.mu).
func (h *Hub) addWhy(v *apitypes.JobView, shape string) {
	if v.State == job.Queued {
		v.Waiting = h.fleet.annotate(v.Requester, v.Labels, h.queuedWhy(v.ID, shape))
	}
}

// runnerView is r as this hub knows it. holder is the live hub the
// database names as holding r's connection (HeldRunners, RunnerHolder;
// "" for none): r is connected when this hub or that one holds it. What
// it reported (agents, readiness) and its running attempts are this
// hub's memory for a runner it holds, else what its live holder recorded
// (r.Held).
func (h *Hub) runnerView(r store.Runner, owner, holder string) apitypes.RunnerView {
	h.reg.mu.Lock()
	c, local := h.reg.conns[r.ID]
	running := len(h.reg.active[r.ID])
	var s shown
	if local {
		s = c.shown()
	}
	h.reg.mu.Unlock()
	if held := r.Held; !local && held != nil && holder != "" && held.Hub == holder {
		s, running = shownOf(held.Status), held.Running
	}
	return apitypes.RunnerView{
		ID: r.ID, Name: r.Name, Owner: owner, Connected: connected(local, holder), Hub: holder, Revoked: r.RevokedAt != nil,
		Slots: r.Slots, Labels: r.Labels, Running: running, Agents: s.agents, Accounts: s.accounts, NotReady: s.notReady, Draining: s.draining,
		Version: r.Version, LastSeen: utcPtr(r.LastSeen), CreatedAt: r.CreatedAt.UTC(), Access: access(r),
	}
}

// connected is whether a runner is online: held by this hub (local) or
// by another live hub on the database (holder).
func connected(local bool, holder string) bool { return local || holder != "" }

func access(r store.Runner) string {
	if r.Access == apitypes.AccessHub {
		return apitypes.AccessHub
	}
	return apitypes.AccessPrivate
}
