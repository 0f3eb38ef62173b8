package hub

import (
	"context"
	"errors"
	"fmt"

	"drover/internal/githttp"
	"drover/internal/hub/call"
	"drover/internal/store"
)

// gitHost is the hub as the git smart HTTP transport sees it
// (githttp.Hub): who is asking, and may they read or write a repository.
type gitHost struct{ h *Hub }

func (g gitHost) Authenticate(ctx context.Context, token string) (githttp.Caller, error) {
	p, err := g.h.AuthenticateToken(ctx, token)
	if err != nil {
		return nil, err
	}
	return gitCaller{g.h, p}, nil
}

func (g gitHost) TooLarge(what string) error { return g.h.TooLargeTransfer(what) }

func (g gitHost) Refusal(err error) *githttp.Error {
	ae := g.h.AsRefusal(err)
	return &githttp.Error{Status: ae.Status, Code: ae.Code, Msg: ae.Msg}
}

// gitCaller is one authenticated git client.
type gitCaller struct {
	h *Hub
	p call.Caller
}

func (c gitCaller) Name() string { return c.p.Name }

func (c gitCaller) Authorize(ctx context.Context, project string, write bool) error {
	return c.h.authorizeGit(ctx, c.p, project, write)
}

// Push makes the repository before the project, so a failure between the
// two leaves a repository the next push adopts, never a project without one.
func (c gitCaller) Push(ctx context.Context, project string) error {
	if err := c.h.ensureRepo(ctx, project); err != nil {
		return err
	}
	return c.h.createProject(ctx, c.p, project)
}

// gitServer is the git smart HTTP transport over this hub's repositories.
func (h *Hub) gitServer() *githttp.Server {
	return &githttp.Server{Hub: gitHost{h}, Repos: h.repos, ScratchDir: h.scratch.dir, TransferCap: h.cfg.TransferCap, Log: h.log}
}

// authorizeGit applies the rules of git serving: runners read the projects
// of jobs they hold; users read and push to the projects they are members
// of. A user's first accepted push (never the discovery before it, nor a
// refused push) creates a hosted project and its repository, with the
// pusher as its owner (gitCaller.Push).
func (h *Hub) authorizeGit(ctx context.Context, p call.Caller, project string, write bool) error {
	switch {
	case p.Kind == store.TokenRunner && write:
		return call.Forbidden("runners cannot push; results travel as publications")
	case p.Kind == store.TokenRunner:
		ok, err := h.runnerHoldsProject(ctx, p.RunnerID, project)
		if err != nil {
			return err
		}
		if !ok {
			return call.Forbidden("runner %s holds no attempt of a job on project %s", p.Name, project)
		}
	default:
		var exists bool
		if err := h.store.Read(ctx, func(tx store.Tx) error {
			prj, err := tx.Project(project)
			if errors.Is(err, store.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			exists = true
			return mayUseProject(tx, p, prj)
		}); err != nil {
			return err
		}
		switch {
		case exists:
		case !write:
			return call.NotFound("no project %s on the hub (drover run --repo pushes one)", project)
		default:
			// A first push: githttp tells it of no refs, and the project and
			// its repository come into being only with an accepted push.
			return nil
		}
	}
	if !h.repos.Exists(project) {
		return call.NotFound("project %s has no repository on the hub (drover run --repo pushes one)", project)
	}
	return nil
}

// createProject records a hosted project pushed first by p, its owner. A
// project someone else created in the meantime needs p's membership.
func (h *Hub) createProject(ctx context.Context, p call.Caller, project string) error {
	created := false
	err := h.store.Write(ctx, func(tx store.Tx) error {
		created = false
		prj, err := tx.Project(project)
		if err == nil {
			return mayUseProject(tx, p, prj)
		}
		if !errors.Is(err, store.ErrNotFound) {
			return err
		}
		now := h.now()
		if err := tx.PutProject(store.Project{Name: project, OwnerID: p.UserID, CreatedAt: now, UpdatedAt: now}); err != nil {
			return err
		}
		created = true
		// The store may add the owner with the project.
		if err := tx.AddMember(project, p.UserID, now); err != nil && !errors.Is(err, store.ErrConflict) {
			return err
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("create project %s: %w", project, err)
	}
	if created {
		h.log.Info("project created by its first push", "project", project, "owner", p.Name)
	}
	return nil
}

// runnerHoldsProject reports whether the runner holds an active attempt of
// a job on the project.
func (h *Hub) runnerHoldsProject(ctx context.Context, runnerID, project string) (bool, error) {
	var ok bool
	err := h.store.Read(ctx, func(tx store.Tx) error {
		as, err := tx.RunnerActiveAttempts(runnerID)
		if err != nil {
			return err
		}
		for _, a := range as {
			j, err := tx.Job(a.JobID)
			if err != nil {
				return err
			}
			if j.Project == project && j.AttemptID == a.ID {
				ok = true
				return nil
			}
		}
		return nil
	})
	return ok, err
}
