package hub

import (
	"context"
	"errors"

	"drover/internal/apitypes"
	"drover/internal/gitcmd"
	"drover/internal/hub/call"
	"drover/internal/protocol"
	"drover/internal/publish"
	"drover/internal/store"
)

// publishCore adapts the core to publish.Core: publishing a job's result
// to a forge is a package of its own (internal/publish) over these.
type publishCore struct{ h *Hub }

var _ publish.Core = publishCore{}

// Job reads a job c may see (else "no job"), which c may publish: its
// requester, its project's owner or an admin.
func (a publishCore) Job(ctx context.Context, c call.Caller, id string) (publish.Job, error) {
	v, err := a.h.jobView(ctx, c, id)
	if err != nil {
		return publish.Job{}, err
	}
	return a.job(ctx, id, func(j store.Job, prj store.Project) error {
		if c.Admin || j.RequesterID == c.UserID || (prj.OwnerID != "" && prj.OwnerID == c.UserID) {
			return nil
		}
		return call.Forbidden("only job %s's requester, project %s's owner or an admin publishes its result", id, prj.Name)
	}, v)
}

// JobByID reads a job for the hub itself.
func (a publishCore) JobByID(ctx context.Context, id string) (publish.Job, error) {
	v, err := a.h.jobView(ctx, call.Caller{Admin: true, Name: "hub"}, id)
	if err != nil {
		return publish.Job{}, err
	}
	return a.job(ctx, id, nil, v)
}

func (a publishCore) job(ctx context.Context, id string, may func(store.Job, store.Project) error, v apitypes.JobView) (publish.Job, error) {
	out := publish.Job{View: v}
	err := a.h.store.Read(ctx, func(tx store.Tx) error {
		j, err := tx.Job(id)
		if err != nil {
			return err
		}
		if j.Project == "" {
			return nil
		}
		prj, err := tx.Project(j.Project)
		if errors.Is(err, store.ErrNotFound) {
			return noProject(j.Project)
		} else if err != nil {
			return err
		}
		if may != nil {
			if err := may(j, prj); err != nil {
				return err
			}
		}
		out.Config = prj.Config
		out.RepoDir = a.h.repos.Dir(j.Project)
		out.Issue, err = publish.Issue(tx, id, prj.Config)
		return err
	})
	out.URL = a.h.jobURL(id)
	return out, err
}

// jobURL is job id's page on the dashboard, "" when the hub has no public
// URL.
func (h *Hub) jobURL(id string) string {
	if h.cfg.PublicURL == "" {
		return ""
	}
	return h.cfg.PublicURL + "/jobs/" + id
}

// Event records an event of the job and tells its followers.
func (a publishCore) Event(ctx context.Context, jobID, kind, actor, text string) error {
	err := a.h.store.Write(ctx, func(tx store.Tx) error {
		return a.h.event(tx, jobID, kind, actor, "%s", text)
	})
	if err == nil {
		a.h.notify(jobID)
	}
	return err
}

// Lock takes a lock every hub on the data directory shares.
func (a publishCore) Lock(ctx context.Context, name string) (func(), error) {
	return a.h.locks.lock(ctx, name)
}

// startFromPR makes a submission that names a pull request start at its
// head (req.Repo.Base), for a caller who may use the project, and answers
// the publication back onto it that the job's completion carries out.
func (h *Hub) startFromPR(ctx context.Context, p call.Caller, req *apitypes.SubmitRequest) (store.Publication, error) {
	switch {
	case req.Repo.Base != "":
		return store.Publication{}, call.BadRequest("a job starts at a base commit or at a pull request's head, not both")
	case req.Mode == protocol.ModeObserve:
		return store.Publication{}, call.BadRequest("a job started from a pull request publishes back onto it: it runs in fix mode")
	case !gitcmd.ValidProject(req.Repo.Project):
		return store.Publication{}, call.BadRequest("project name %q must be 1-64 lower-case letters, digits or ._- starting with a letter or digit", req.Repo.Project)
	}
	var prj store.Project
	err := h.store.Read(ctx, func(tx store.Tx) error {
		var err error
		if prj, err = readProject(tx, req.Repo.Project); err != nil {
			return err
		}
		return mayUseProject(tx, p, prj)
	})
	if err != nil {
		return store.Publication{}, err
	}
	dir := ""
	if prj.Remote == "" {
		if err := h.ensureRepo(ctx, prj.Name); err != nil {
			return store.Publication{}, err
		}
		dir = h.repos.Dir(prj.Name)
	}
	base, pub, err := h.publisher.FromPR(ctx, prj.Config, dir, req.Repo.FromPR)
	if err != nil {
		return store.Publication{}, err
	}
	req.Repo.Base = base
	return pub, nil
}
