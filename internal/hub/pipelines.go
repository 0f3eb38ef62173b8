package hub

import (
	"context"
	"errors"
	"fmt"

	"drover/internal/apitypes"
	"drover/internal/gitcmd"
	"drover/internal/hub/call"
	"drover/internal/ids"
	"drover/internal/job"
	"drover/internal/pipeline"
	"drover/internal/store"
)

// pipelineCore adapts the core to pipeline.Core: pipelines are a package
// of their own (internal/pipeline) whose steps are ordinary jobs.
type pipelineCore struct{ h *Hub }

var _ pipeline.Core = pipelineCore{}

func (a pipelineCore) Caller(ctx context.Context, userID string) (call.Caller, error) {
	var c call.Caller
	err := a.h.store.Read(ctx, func(tx store.Tx) error {
		var err error
		c, err = userPrincipal(tx, userID)
		return err
	})
	return c, err
}

func (a pipelineCore) MaySee(ctx context.Context, c call.Caller, project, requesterID string) (bool, error) {
	var ok bool
	err := a.h.store.Read(ctx, func(tx store.Tx) error {
		var err error
		ok, err = seesProjectWork(tx, c, requesterID, project)
		return err
	})
	return ok, err
}

// Source checks the project and base as a submission would, and returns
// the hub's repository of a hosted project.
func (a pipelineCore) Source(ctx context.Context, c call.Caller, project, base string) (string, error) {
	var j store.Job
	req := apitypes.SubmitRequest{Agent: "exec", Repo: &apitypes.SubmitRepo{Project: project, Base: base}}
	if err := a.h.checkSource(ctx, nil, c, req, &j); err != nil {
		return "", err
	}
	if j.RepoURL != "" {
		return "", call.BadRequest("project %s is mapped to %s: pipelines run on projects hosted on the hub", project, j.RepoURL)
	}
	return a.h.repos.Dir(project), nil
}

func (a pipelineCore) Repo(ctx context.Context, c call.Caller, project string) (string, error) {
	err := a.h.store.Read(ctx, func(tx store.Tx) error {
		prj, err := readProject(tx, project)
		if err != nil {
			return err
		}
		if prj.Remote != "" {
			return call.BadRequest("project %s is mapped to %s: pipelines run on projects hosted on the hub", project, prj.Remote)
		}
		return mayUseProject(tx, c, prj)
	})
	if err != nil {
		return "", err
	}
	return a.h.repos.Dir(project), nil
}

func (a pipelineCore) Submit(ctx context.Context, c call.Caller, req apitypes.SubmitRequest) (apitypes.JobView, error) {
	s, err := a.h.SubmitJob(ctx, c, req)
	return s.Job, err
}

// Record makes a completed job of c at req.Head: a merge the hub made.
func (a pipelineCore) Record(ctx context.Context, c call.Caller, req pipeline.Recorded) (apitypes.JobView, error) {
	if !gitcmd.ValidCommitID(req.Head) || !gitcmd.ValidCommitID(req.Base) {
		return apitypes.JobView{}, fmt.Errorf("record job: base %q and head %q must be commit ids", req.Base, req.Head)
	}
	now := a.h.now()
	j := store.Job{
		ID: ids.New("j"), State: job.Completed, Agent: req.Agent, Args: []string{req.Summary}, RequesterID: c.UserID, Key: req.Key,
		LogCap: a.h.cfg.LogCap, CreatedAt: now, UpdatedAt: now, FinishedAt: &now,
		Project: req.Project, Base: req.Base, Head: req.Head, Mode: "fix", Reason: job.ReasonExited,
	}
	zero := 0
	j.ExitCode = &zero
	created := true
	err := a.h.store.Write(ctx, func(tx store.Tx) error {
		if old, err := tx.JobByKey(c.UserID, req.Key); err == nil {
			j, created = old, false
			return nil
		} else if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		prj, err := readProject(tx, req.Project)
		if err != nil {
			return err
		}
		if err := mayUseProject(tx, c, prj); err != nil {
			return err
		}
		if err := tx.InsertJob(j); err != nil {
			return err
		}
		_, err = tx.AddEvent(store.Event{JobID: j.ID, At: now, Kind: "completed", Actor: "hub",
			Message: fmt.Sprintf("%s made on the hub: %s", req.Agent, req.Summary)})
		return err
	})
	if err != nil {
		return apitypes.JobView{}, fmt.Errorf("record job: %w", err)
	}
	if created {
		if err := a.h.repos.UpdateRef(ctx, j.Project, gitcmd.JobRef(j.ID), j.Head, ""); err != nil {
			return apitypes.JobView{}, fmt.Errorf("record job %s: %w", j.ID, err)
		}
	}
	return a.h.jobView(ctx, c, j.ID)
}

func (a pipelineCore) Job(ctx context.Context, id string) (apitypes.JobView, error) {
	return a.h.jobView(ctx, call.Caller{Admin: true, Name: "hub"}, id)
}

func (a pipelineCore) Cancel(ctx context.Context, c call.Caller, id string) error {
	return a.h.cancelJob(ctx, c, id)
}

func (a pipelineCore) Retry(ctx context.Context, c call.Caller, id string) error {
	return a.h.retryJob(ctx, c, id)
}

func (a pipelineCore) Publish(ctx context.Context, c call.Caller, jobID string) (apitypes.PublicationView, error) {
	return a.h.publisher.PublishJob(ctx, c, jobID, apitypes.PublishRequest{})
}

func (a pipelineCore) Leading() bool { return a.h.leading() }
