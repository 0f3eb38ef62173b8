package hub

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"drover/internal/apitypes"
	"drover/internal/gitcmd"
	"drover/internal/githttp"
	"drover/internal/hub/call"
	"drover/internal/protocol"
	"drover/internal/rules"
	"drover/internal/store"
)

// gitURL is where c's runner fetches a hosted project.
func (h *Hub) gitURL(c *runnerSession, project string) string {
	base := h.cfg.PublicURL
	if base == "" {
		base = c.baseURL
	}
	return base + githttp.Prefix + project
}

// sourceSpec fills the repository, mode and context of an offer.
func (h *Hub) sourceSpec(tx store.Tx, c *runnerSession, j store.Job, spec *protocol.JobSpec) error {
	if j.Project == "" {
		return nil
	}
	spec.Mode = j.Mode
	spec.Repo = &protocol.RepoSpec{Project: j.Project, Base: j.Base, Head: j.Head, URL: h.gitURL(c, j.Project)}
	if j.RepoURL != "" {
		spec.Repo.URL, spec.Repo.Remote = j.RepoURL, true
	}
	files, err := tx.ContextFiles(j.ID, false)
	if err != nil {
		return err
	}
	for _, f := range files {
		spec.Context = append(spec.Context, protocol.ContextFile{Name: f.Name, Size: f.Size})
	}
	return nil
}

// checkSource validates a submission's context files, repository and mode
// and fills the job's source fields. For a hosted project the base must
// already be on the hub and its tree must be one drover supports. In, if
// not nil, is the write the job goes in: the project is read there, and a
// check that would run git (a base not checked in the last minutes,
// sparse paths) is errOutsideWrite, never a git process while the write holds
// the store.
func (h *Hub) checkSource(ctx context.Context, in store.Tx, p call.Caller, req apitypes.SubmitRequest, j *store.Job) error {
	if err := rules.CheckContextFiles(req.Context); err != nil {
		return call.BadRequest("%v", err)
	}
	if req.Repo == nil {
		if req.Mode != "" || len(req.Context) > 0 || len(req.Sparse) > 0 {
			return call.BadRequest("a mode, context files and sparse paths need a job with a repository (drover run --repo)")
		}
		var err error
		j.Network, err = jobNetwork(nil, req.Network)
		return err
	}
	project, base := req.Repo.Project, req.Repo.Base
	if !gitcmd.ValidProject(project) {
		return call.BadRequest("project name %q must be 1-64 lower-case letters, digits or ._- starting with a letter or digit", project)
	}
	if !gitcmd.ValidCommitID(base) {
		return call.BadRequest("base %q must be a full 40-hex commit id", base)
	}
	if err := protocol.CheckSparsePaths(req.Sparse); err != nil {
		return call.BadRequest("%v", err)
	}
	if len(req.Sparse) > 0 {
		j.Sparse = slices.Compact(slices.Sorted(slices.Values(req.Sparse)))
	}
	mode := req.Mode
	if mode == "" {
		mode = protocol.ModeFix
	}
	if mode != protocol.ModeFix && mode != protocol.ModeObserve {
		return call.BadRequest("mode %q: want %s or %s", mode, protocol.ModeFix, protocol.ModeObserve)
	}
	var remote string
	read := func(tx store.Tx) error {
		prj, err := tx.Project(project)
		if errors.Is(err, store.ErrNotFound) {
			return call.BadRequest("project %s has no repository on the hub: push the commit first (drover run --repo does it)", project)
		}
		if err != nil {
			return err
		}
		if err := mayUseProject(tx, p, prj); err != nil {
			return err
		}
		remote = prj.Remote
		j.Network, err = jobNetwork(&prj, req.Network)
		return err
	}
	var err error
	if in != nil {
		err = read(in)
	} else {
		err = h.store.Read(ctx, read)
	}
	if err != nil {
		return fmt.Errorf("look up project %s: %w", project, err)
	}
	if remote == "" {
		if !h.repos.Exists(project) {
			return call.BadRequest("project %s has no repository on the hub: push the commit first (drover run --repo does it)", project)
		}
		if in != nil && (len(j.Sparse) > 0 || !h.sources.passed(project, base, h.now())) {
			return errOutsideWrite
		}
		if !h.sources.passed(project, base, h.now()) {
			ok, err := h.repos.HasCommit(ctx, project, base)
			if err != nil {
				return fmt.Errorf("look up base %s of %s: %w", base, project, err)
			}
			if !ok {
				return call.BadRequest("the hub's %s repository has no commit %s: push the commit first (drover run --repo does it)", project, base)
			}
			if err := gitcmd.CheckSourceTree(ctx, h.repos.Git, h.repos.Dir(project), base); err != nil {
				return refusal(err, "source refused")
			}
			h.sources.pass(project, base, h.now())
		}
		if err := gitcmd.CheckCone(ctx, h.repos.Git, h.repos.Dir(project), base, j.Sparse); err != nil {
			return refusal(err, "sparse paths refused")
		}
	}
	j.Project, j.Base, j.Head, j.Mode, j.RepoURL = project, base, base, mode, remote
	return nil
}

// errOutsideWrite is a check asked for in a write that runs git or asks a
// forge: the caller checks outside it.
var errOutsideWrite = errors.New("the check runs git or asks a forge: only outside a write")

// pinBase points a new job's ref at its base, so the base stays reachable
// and `git fetch HUB/git/PROJECT refs/drover/jobs/JOB` works from the
// start. A failure is only logged: publication repairs the ref.
func (h *Hub) pinBase(ctx context.Context, j store.Job) {
	if j.Project == "" || j.RepoURL != "" {
		return
	}
	if err := h.repos.UpdateRef(ctx, j.Project, gitcmd.JobRef(j.ID), j.Base, ""); err != nil {
		h.log.Warn("could not pin a job's base", "job", j.ID, "project", j.Project, "err", err)
	}
}

// ContextFiles are a job's context files, for the runner holding one of
// its active attempts.
func (h *Hub) ContextFiles(ctx context.Context, p call.Caller, ref protocol.AttemptRef) ([]store.ContextFile, error) {
	var files []store.ContextFile
	err := h.store.Read(ctx, func(tx store.Tx) error {
		a, j, err := loadFenced(tx, p.RunnerID, ref)
		if err != nil {
			return err
		}
		if !a.State.Active() || j.AttemptID != a.ID {
			return call.Fenced("attempt %s is %s; its context is no longer served", a.ID, a.State)
		}
		files, err = tx.ContextFiles(j.ID, true)
		return err
	})
	return files, err
}

// checkedSources remembers, for a while, the commits of hosted projects
// that are in the hub's repository and whose tree passed the source check:
// the jobs of one base (a fan-out's items, a busy project's) then do not
// list the same tree again, which a large repository makes slow. A commit
// and its tree never change; the bound covers a project removed and made
// again under its name.
type checkedSources struct {
	mu sync.Mutex
	at map[string]time.Time // project NUL commit → when it passed
}

const (
	checkedSourcesTTL = 10 * time.Minute
	checkedSourcesMax = 4096
)

func (c *checkedSources) passed(project, commit string, now time.Time) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	at, ok := c.at[project+"\x00"+commit]
	return ok && now.Sub(at) < checkedSourcesTTL
}

func (c *checkedSources) pass(project, commit string, now time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.at == nil || len(c.at) >= checkedSourcesMax {
		c.at = map[string]time.Time{}
	}
	c.at[project+"\x00"+commit] = now
}
