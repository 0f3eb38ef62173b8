package hub

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"unicode"

	"drover/internal/apitypes"
	"drover/internal/gitcmd"
	"drover/internal/hub/call"
	"drover/internal/rules"
	"drover/internal/store"
)

// The projects' operations of the state layer (docs/architecture.md); the
// HTTP API serves them in httpapi/projects.go, the projects page too.

// ProjectViews lists the projects p is a member of (every one for admins).
// A repository on disk that no accepted push made a project (a discovery
// request's) is not one.
func (h *Hub) ProjectViews(ctx context.Context, p call.Caller) ([]apitypes.ProjectView, error) {
	out := []apitypes.ProjectView{}
	err := h.store.Read(ctx, func(tx store.Tx) error {
		rows, err := tx.Projects()
		if err != nil {
			return err
		}
		mine, err := userProjects(tx, p.UserID)
		if err != nil {
			return err
		}
		n := newNamer(tx)
		for _, pr := range rows {
			if !p.Admin && !mine[pr.Name] {
				continue
			}
			out = append(out, apitypes.ProjectView{Name: pr.Name, Remote: pr.Remote,
				Hosted: h.repos.Exists(pr.Name), Owner: n.user(pr.OwnerID)})
		}
		return nil
	})
	return out, err
}

// checkRemoteURL refuses what cannot be a git URL to fetch from.
func checkRemoteURL(u string) error {
	switch {
	case len(u) > 1024:
		return fmt.Errorf("remote URL is over 1024 characters")
	case strings.HasPrefix(u, "-"):
		return fmt.Errorf("remote URL %q starts with '-'", u)
	}
	if err := rules.CheckPlainText("remote URL", u, false); err != nil {
		return err
	}
	if strings.IndexFunc(u, unicode.IsSpace) >= 0 {
		return fmt.Errorf("remote URL %q has a space", u)
	}
	return nil
}

// MapProject maps a project to the remote its runners fetch from (admins
// only); a new project is owned by the admin who maps it.
func (h *Hub) MapProject(ctx context.Context, p call.Caller, req call.MapProjectRequest) (apitypes.ProjectView, error) {
	if !p.Admin {
		return apitypes.ProjectView{}, call.Forbidden("only an admin can map projects")
	}
	name := req.Name
	if !gitcmd.ValidProject(name) {
		return apitypes.ProjectView{}, call.BadRequest("project name %q must be 1-64 lower-case letters, digits or ._- starting with a letter or digit", name)
	}
	if err := checkRemoteURL(req.Remote); err != nil {
		return apitypes.ProjectView{}, call.BadRequest("%v", err)
	}
	now := h.now()
	var owner string
	if err := h.store.Write(ctx, func(tx store.Tx) error {
		prj, err := tx.Project(name)
		isNew := errors.Is(err, store.ErrNotFound)
		if isNew {
			// The admin who maps a new project owns it.
			prj = store.Project{Name: name, OwnerID: p.UserID, CreatedAt: now}
		} else if err != nil {
			return err
		}
		prj.Remote, prj.UpdatedAt = req.Remote, now
		owner = newNamer(tx).user(prj.OwnerID)
		if err := tx.PutProject(prj); err != nil {
			return err
		}
		if isNew {
			// The store may add the owner with the project.
			if err := tx.AddMember(name, p.UserID, now); err != nil && !errors.Is(err, store.ErrConflict) {
				return err
			}
		}
		return nil
	}); err != nil {
		return apitypes.ProjectView{}, fmt.Errorf("map project %s: %w", name, err)
	}
	h.log.Info("project mapped", "project", name, "remote", req.Remote, "by", p.Name)
	return apitypes.ProjectView{Name: name, Remote: req.Remote, Hosted: h.repos.Exists(name), Owner: owner}, nil
}
