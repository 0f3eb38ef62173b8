package hub

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strings"

	"drover/internal/gitcmd"
	"drover/internal/hub/call"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/rules"
	"drover/internal/store"
)

// TooLargeTransfer says what to do about a transfer over the cap.
func (h *Hub) TooLargeTransfer(what string) *call.Refusal {
	return call.Errf(http.StatusRequestEntityTooLarge, rules.ErrTooLarge,
		"%s is over the hub's transfer cap of %d bytes: map the project to a remote URL that runners fetch themselves "+
			"(drover projects map NAME URL), or raise the cap (drover hub --transfer-cap)", what, h.cfg.TransferCap)
}

// publishable loads a job a runner wants to publish to and checks it may:
// the attempt is this runner's, under this epoch, and still running (or a
// late result the hub still takes), and the job publishes (fix mode).
func (h *Hub) publishable(ctx context.Context, runnerID string, ref protocol.AttemptRef) (store.Job, error) {
	var j store.Job
	err := h.store.Read(ctx, func(tx store.Tx) error {
		a, jj, err := loadFenced(tx, runnerID, ref)
		if err != nil {
			return err
		}
		j = jj
		return checkPublishable(a, j)
	})
	return j, err
}

func checkPublishable(a store.Attempt, j store.Job) error {
	if (a.State != job.AttemptRunning || j.AttemptID != a.ID) && !lateResultAllowed(a, j) {
		return call.Fenced("attempt %s is %s and can no longer publish", a.ID, a.State)
	}
	switch {
	case j.Project == "":
		return call.BadRequest("job %s has no repository to publish to", j.ID)
	case j.Mode != protocol.ModeFix:
		return call.Conflict("job %s is in %s mode and publishes nothing", j.ID, j.Mode)
	}
	return nil
}

// PublishBundle checks and publishes a runner's bundle (docs/protocol.md
// has every check). A bundle that does not build on the job's head is
// refused with a call.StaleHead.
func (h *Hub) PublishBundle(ctx context.Context, p call.Caller, req call.PublishRequest) (protocol.PublishResult, error) {
	if err := req.CheckIDs(); err != nil {
		return protocol.PublishResult{}, err
	}
	// Refuse a fenced attempt before reading a byte of the bundle.
	if _, err := h.publishable(ctx, p.RunnerID, req.Ref); err != nil {
		return protocol.PublishResult{}, err
	}
	bundle, err := req.Spool(req.Digest)
	if err != nil {
		return protocol.PublishResult{}, err
	}
	defer os.Remove(bundle)

	res, err := h.publish(ctx, p, req.Ref, bundle, req.Commit, req.Checkpoint, req.Sparse)
	if err != nil {
		return res, err
	}
	if st, err := os.Stat(bundle); err == nil {
		h.metrics.publishBytes.Add(float64(st.Size()))
	}
	return res, nil
}

// publish verifies a bundle and makes its commit the job's head: objects
// validated in quarantine, ancestry from the base and the current head,
// then the job's ref moved by compare-and-swap and the database updated
// (the ref moved back if that fails), with the folders a sparse worktree's
// agent added to its cone. Publications of one job take turns.
func (h *Hub) publish(ctx context.Context, p call.Caller, ref protocol.AttemptRef, bundle, commit string, checkpoint bool, sparse []string) (protocol.PublishResult, error) {
	unlock, err := h.locks.lock(ctx, "job:"+ref.Job)
	if err != nil {
		return protocol.PublishResult{}, err
	}
	defer unlock()
	j, err := h.publishable(ctx, p.RunnerID, ref)
	if err != nil {
		return protocol.PublishResult{}, err
	}
	if commit == j.Head {
		return protocol.PublishResult{Head: j.Head}, nil // published before: the reply was lost
	}
	h.clearRefLocks(j, gitcmd.JobRef(j.ID), gitcmd.CheckpointRef(j.ID, j.Checkpoints+1))
	if err := h.ensureJobRef(ctx, j); err != nil {
		return protocol.PublishResult{}, err
	}
	in, err := h.repos.Receive(ctx, j.Project, bundle, commit)
	if err != nil {
		return protocol.PublishResult{}, refusal(err, "publication refused")
	}
	defer in.Close()
	if ok, err := in.IsAncestor(ctx, j.Base, commit); err != nil {
		return protocol.PublishResult{}, err
	} else if !ok {
		return protocol.PublishResult{}, call.BadRequest("publication refused: %s does not descend from the job's base %s; nothing was stored", commit, j.Base)
	}
	if ok, err := in.IsAncestor(ctx, j.Head, commit); err != nil {
		return protocol.PublishResult{}, err
	} else if !ok {
		return protocol.PublishResult{}, call.StaleHead{Head: j.Head}
	}
	if err := in.Accept(); err != nil {
		return protocol.PublishResult{}, err
	}
	widened := h.widenedFolders(ctx, j, commit, sparse)
	jobRef := gitcmd.JobRef(j.ID)
	if err := h.repos.UpdateRef(ctx, j.Project, jobRef, commit, j.Head); err != nil {
		return protocol.PublishResult{}, err
	}
	res := protocol.PublishResult{Head: commit}
	var cpRef string
	if checkpoint {
		res.Checkpoint = j.Checkpoints + 1
		cpRef = gitcmd.CheckpointRef(j.ID, res.Checkpoint)
		// A leftover of a crash between ref and database is overwritten:
		// the database numbers checkpoints.
		old, err := h.repos.Ref(ctx, j.Project, cpRef)
		if err == nil {
			err = h.repos.UpdateRef(ctx, j.Project, cpRef, commit, old)
		}
		if err != nil {
			h.rollBackRefs(j, jobRef, commit, "")
			return protocol.PublishResult{}, err
		}
	}
	err = h.store.Write(ctx, func(tx store.Tx) error {
		a, jj, err := loadFenced(tx, p.RunnerID, ref)
		if err != nil {
			return err
		}
		if err := checkPublishable(a, jj); err != nil {
			return err
		}
		if jj.Head != j.Head {
			return call.Conflict("job %s's head moved during the publication; publish again", j.ID)
		}
		jj.Head, jj.UpdatedAt = commit, h.now()
		kind, what := "published", "published"
		if checkpoint {
			jj.Checkpoints = res.Checkpoint
			kind, what = "checkpoint", fmt.Sprintf("checkpoint %d:", res.Checkpoint)
		}
		cone, err := widenCone(tx, jj, widened)
		if err != nil {
			return err
		}
		if cone != nil {
			jj.Sparse = cone
		}
		if err := tx.UpdateJob(jj); err != nil {
			return err
		}
		if cone != nil {
			if err := h.event(tx, j.ID, "sparse", p.Name, "attempt %d widened the sparse checkout to %s", a.Epoch, strings.Join(cone, ", ")); err != nil {
				return err
			}
		}
		return h.event(tx, j.ID, kind, p.Name, "attempt %d %s %s", a.Epoch, what, commit)
	})
	if err != nil {
		h.rollBackRefs(j, jobRef, commit, cpRef)
		return protocol.PublishResult{}, err
	}
	h.log.Info("published", "job", j.ID, "attempt", ref.Attempt, "head", commit, "checkpoint", res.Checkpoint)
	h.notify(j.ID)
	return res, nil
}

// widenedFolders are the folders of a publication's cone the job did not
// name itself that are folders of its commit: what the agent added, and
// the project's own folders (widenCone drops those). A folder the commit
// lacks (the agent removed all of it) is left out, or the next attempt
// would be refused for it.
func (h *Hub) widenedFolders(ctx context.Context, j store.Job, commit string, sparse []string) []string {
	var out []string
	for _, d := range sparse {
		if slices.Contains(j.Sparse, d) {
			continue
		}
		if err := gitcmd.CheckCone(ctx, h.repos.Git, h.repos.Dir(j.Project), commit, []string{d}); err != nil {
			continue
		}
		out = append(out, d)
	}
	return out
}

// widenCone is the job's cone (its own folders, else its project's) with
// the widened folders added, or nil when they add nothing to it, or when
// the job is whole (a runner cannot make a whole job sparse), or the
// union is over protocol.MaxSparsePaths.
func widenCone(tx store.Tx, j store.Job, widened []string) ([]string, error) {
	if len(widened) == 0 {
		return nil, nil
	}
	cone := j.Sparse
	if len(cone) == 0 {
		prj, err := tx.Project(j.Project)
		if err != nil {
			return nil, fmt.Errorf("read project %s: %w", j.Project, err)
		}
		cone = prj.Config.Sparse
	}
	if len(cone) == 0 {
		return nil, nil
	}
	union := slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(cone), widened...))))
	if len(union) == len(cone) || protocol.CheckSparsePaths(union) != nil {
		return nil, nil
	}
	return union, nil
}

// clearRefLocks removes the lock files a hub killed while moving one of
// the job's refs left behind, which would refuse every later publication.
// Call it with the job's lock held (h.locks), which every hub sharing the
// data directory takes before moving them.
func (h *Hub) clearRefLocks(j store.Job, refs ...string) {
	if j.Project == "" {
		return
	}
	for _, ref := range refs {
		cleared, err := h.repos.ClearRefLock(j.Project, ref)
		if err != nil {
			h.log.Warn("could not clear a job's stale ref lock", "job", j.ID, "ref", ref, "err", err)
		} else if cleared {
			h.log.Warn("removed a stale lock of a job's ref, left by a hub killed while moving it", "job", j.ID, "ref", ref)
		}
	}
}

// rollBackRefs undoes a publication's refs after the database refused it,
// so that the ref never runs ahead of the recorded head.
func (h *Hub) rollBackRefs(j store.Job, jobRef, commit, cpRef string) {
	ctx := context.Background()
	if err := h.repos.UpdateRef(ctx, j.Project, jobRef, j.Head, commit); err != nil {
		h.log.Error("could not roll back a job's ref; the next publication repairs it", "job", j.ID, "err", err)
	}
	if cpRef != "" {
		if err := h.repos.UpdateRef(ctx, j.Project, cpRef, "", commit); err != nil {
			h.log.Error("could not roll back a checkpoint ref", "job", j.ID, "ref", cpRef, "err", err)
		}
	}
}

// ensureJobRef makes the job's ref agree with its recorded head before a
// publication: the database is the truth, and a crash between moving the
// ref and committing may have left them apart. For a project mapped to a
// remote, the hub first fetches the base it lacks from there.
func (h *Hub) ensureJobRef(ctx context.Context, j store.Job) error {
	jobRef := gitcmd.JobRef(j.ID)
	if j.RepoURL != "" {
		if err := h.ensureRepo(ctx, j.Project); err != nil {
			return err
		}
		ok, err := h.repos.HasCommit(ctx, j.Project, j.Head)
		if err != nil {
			return err
		}
		if !ok {
			if err := h.repos.FetchCommit(ctx, j.Project, j.RepoURL, j.Head, jobRef); err != nil {
				h.log.Warn("could not fetch a mapped project's base", "job", j.ID, "project", j.Project, "err", err)
				return call.Conflict("the hub cannot read %s from %s, the remote project %s is mapped to (it fetches without credentials): %v",
					j.Head, j.RepoURL, j.Project, err)
			}
		}
	}
	cur, err := h.repos.Ref(ctx, j.Project, jobRef)
	if err != nil {
		return err
	}
	if cur == j.Head {
		return nil
	}
	h.log.Warn("job ref disagrees with the recorded head; repairing", "job", j.ID, "ref", cur, "head", j.Head)
	return h.repos.UpdateRef(ctx, j.Project, jobRef, j.Head, cur)
}

// ensureRepo creates a project's repository on the hub if it has none.
func (h *Hub) ensureRepo(ctx context.Context, project string) error {
	if h.repos.Exists(project) {
		return nil
	}
	unlock, err := h.locks.lock(ctx, "repo:"+project)
	if err != nil {
		return err
	}
	defer unlock()
	if err := h.repos.Create(ctx, project); err != nil {
		return err
	}
	h.log.Info("created project repository", "project", project, "dir", h.repos.Dir(project))
	return nil
}

// refusal turns a workspace refusal into a 400 that says why; anything
// else stays an internal error.
func refusal(err error, prefix string) error {
	var rf *gitcmd.Refusal
	if errors.As(err, &rf) {
		return call.BadRequest("%s: %s; nothing was stored", prefix, rf.Reason)
	}
	return err
}
