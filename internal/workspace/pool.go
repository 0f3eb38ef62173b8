package workspace

import (
	"context"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"drover/internal/gitcmd"
)

// poolOrder lists the pooled worktrees of recs: those already at head first
// (nothing to check out), then the most recently used (likely the closest
// to a new base).
func poolOrder(recs map[string]record, head string) []string {
	var names []string
	for name, rec := range recs {
		if rec.Job == "" {
			names = append(names, name)
		}
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := recs[names[i]], recs[names[j]]
		if (a.Head == head) != (b.Head == head) {
			return a.Head == head
		}
		if !a.Used.Equal(b.Used) {
			return a.Used.After(b.Used)
		}
		return names[i] < names[j]
	})
	return names
}

// Keep ends the attempt's use of the worktree and keeps it, as it is, for
// the job's next attempt: while the job's head is still Head(), that attempt
// resumes here without any checkout.
func (w *Worktree) Keep() error {
	defer w.done()
	w.rec.Used = w.c.now()
	return w.save()
}

// Release ends the job's use of the worktree: work not published is first
// recorded on refs/drover/orphans/JOB, then the worktree goes back to the
// pool, or is removed when the pool is full. If the work cannot be
// recorded the worktree stays the job's, for the garbage collector to try
// again.
func (w *Worktree) Release(ctx context.Context) error {
	defer w.done()
	if err := w.retire(ctx); err != nil {
		return fmt.Errorf("release worktree of %s: %w", w.rec.Job, err)
	}
	return nil
}

// done lets go of the worktree, whose monitor goes on watching it for the
// next attempt (see idleMonitors); the Worktree is not usable afterwards.
func (w *Worktree) done() {
	w.dropPending()
	w.c.park(w)
	if w.unlock != nil {
		w.unlock()
		w.unlock = nil
	}
}

// retire records unpublished work, then pools or removes the worktree.
// The caller holds the worktree's lock.
func (w *Worktree) retire(ctx context.Context) error {
	if err := w.saveOrphan(ctx); err != nil {
		return err
	}
	c := w.c
	// A worktree whose last reset was not narrowed (a fresh or full
	// checkout) has thousands of racily clean entries: the pooled reset
	// would pay for them. Should the rewrite fail, the index saved before
	// is as good as ever, only slower.
	if w.resetHow != "changed paths" && len(w.rec.Sparse) == 0 {
		if err := w.unracySavedIndex(ctx); err != nil {
			c.log.Warn("saved index not rewritten; the next reset re-reads racily clean entries", "dir", w.Dir(), "err", err)
		}
	}
	return c.withLock(ctx, w.repo, lockTrees, func() error {
		recs, err := c.records(w.repo)
		if err != nil {
			return err
		}
		pooled := 0
		for name, rec := range recs {
			if rec.Job == "" && name != w.name {
				pooled++
			}
		}
		job := w.rec.Job
		if pooled >= c.poolSize || len(w.rec.Sparse) > 0 {
			if err := w.remove(ctx); err != nil {
				return err
			}
			c.log.Info("removed worktree", "job", job, "dir", w.Dir())
		} else {
			w.rec.Job = ""
			w.rec.Used = c.now()
			if err := w.save(); err != nil {
				return err
			}
			c.log.Info("returned worktree to the pool", "job", job, "dir", w.Dir())
		}
		return c.sweepRefs(ctx, w.repo, recs, w.name)
	})
}

// saveOrphan records the worktree's files, when they differ from the job's
// head, as a commit on refs/drover/orphans/JOB in the clone (an earlier
// orphan of the job stays reachable as its second parent), so that
// discarding the worktree never loses work silently.
func (w *Worktree) saveOrphan(ctx context.Context) error {
	if w.rec.Job == "" || checkCommitID(w.rec.Head) != nil {
		return nil
	}
	ref := "refs/drover/orphans/" + w.rec.Job
	var commit string
	err := w.c.withLock(ctx, w.repo, lockClone, func() error {
		snap, err := w.snapshot(ctx, w.rec.Head)
		if err != nil || snap == nil {
			return err
		}
		defer snap.drop()
		parents := []string{w.rec.Head}
		if prev, err := w.repo.git.Out(ctx, w.repo.dir, "rev-parse", "--verify", "--quiet", ref); err == nil && prev != "" {
			parents = append(parents, prev)
		}
		msg := fmt.Sprintf("drover: unpublished work of job %s\n\nThe runner recorded the job's worktree before discarding it.\n\nDrover-Job: %s\n", w.rec.Job, w.rec.Job)
		if commit, err = w.commitTree(ctx, snap.tree, parents, "drover", msg); err != nil {
			return err
		}
		_, err = w.repo.git.Run(ctx, gitcmd.Cmd{Dir: w.repo.dir, Args: []string{"update-ref", ref, commit}})
		return err
	})
	if err != nil {
		return fmt.Errorf("record unpublished work of %s: %w", w.rec.Job, err)
	}
	if commit != "" {
		w.c.log.Warn("recorded unpublished work before discarding a worktree", "job", w.rec.Job,
			"ref", ref, "commit", commit, "clone", w.repo.dir)
	}
	return nil
}

// sweepRefs deletes the refs agents made in the clone (branches, tags,
// stash: everything outside refs/drover/), which every worktree of the
// clone would otherwise see. Branches are shared by all worktrees, so this
// waits until no other worktree of the repository is in use. Call with the
// registry lock held.
func (c *Cache) sweepRefs(ctx context.Context, r repo, recs map[string]record, self string) error {
	for name := range recs {
		if name == self {
			continue
		}
		unlock, ok, err := c.locks.TryLock(filepath.Join(r.trees, name+".lock"))
		if err != nil {
			return err
		}
		if !ok {
			return nil // in use: a later release sweeps
		}
		defer unlock()
	}
	return c.withLock(ctx, r, lockClone, func() error {
		out, err := c.git.Out(ctx, r.dir, "for-each-ref", "--format=%(refname)")
		if err != nil {
			return fmt.Errorf("list refs: %w", err)
		}
		var del strings.Builder
		for _, ref := range strings.Split(out, "\n") {
			if ref != "" && !strings.HasPrefix(ref, "refs/drover/") {
				fmt.Fprintf(&del, "delete %s\n", ref)
			}
		}
		if del.Len() == 0 {
			return nil
		}
		if _, err := c.git.Run(ctx, gitcmd.Cmd{Dir: r.dir, Args: []string{"update-ref", "--no-deref", "--stdin"}, Stdin: strings.NewReader(del.String())}); err != nil {
			return fmt.Errorf("delete refs agents made: %w", err)
		}
		c.log.Info("deleted refs agents made in the clone", "project", r.project, "refs", strings.Count(del.String(), "\n"))
		return nil
	})
}
