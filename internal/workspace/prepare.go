package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"drover/internal/gitcmd"
)

// How claim found a worktree for a job.
type claimKind int

const (
	claimKept   claimKind = iota // the job's own, kept from an earlier attempt
	claimPooled                  // a finished one from the pool
	claimFresh                   // a new one (not yet added to git)
)

// Prepare hands an attempt of job the worktree it runs in, at head (the
// job's latest published commit, or its base): the job's own worktree from
// its earlier attempt when it is still at head (no checkout at all), else a
// pooled one reset to head, else a fresh one. The commit is fetched by id
// unless the clone has it. Repositories with submodules or filter
// attributes (LFS) are refused.
func (c *Cache) Prepare(ctx context.Context, src Source, job, head string) (*Worktree, error) {
	w, err := c.prepare(ctx, src, job, head)
	if err != nil {
		return nil, fmt.Errorf("prepare worktree for %s at %s: %w", job, gitcmd.Short(head), err)
	}
	return w, nil
}

func (c *Cache) prepare(ctx context.Context, src Source, job, head string) (*Worktree, error) {
	if err := checkJobID(job); err != nil {
		return nil, err
	}
	if err := checkCommitID(head); err != nil {
		return nil, err
	}
	r, err := c.repoOf(src.Project)
	if err != nil {
		return nil, err
	}
	if r, err = r.withSource(src); err != nil {
		return nil, err
	}
	start := c.now()
	err = c.withLock(ctx, r, lockClone, func() error {
		if err := c.ensureClone(ctx, r); err != nil {
			return err
		}
		return c.ensureCommit(ctx, r, src, head)
	})
	if err != nil {
		return nil, err
	}
	w, kind, err := c.claim(ctx, r, src, job, head)
	if err != nil {
		return nil, err
	}
	prev := w.rec
	if kind == claimKept && w.rec.Head == head {
		w.resumed = true
		w.rec.Used = c.now()
		if err := w.save(); err != nil {
			w.unlock()
			return nil, err
		}
		// Watched all along when this process kept it (its monitor went on
		// while idle); else watched from now on (the watches are added
		// while the agent starts), but what changed while nobody watched
		// is unknown: publications scan everything until one is adopted.
		w.watch()
		c.log.Info("resumed kept worktree", "job", job, "head", gitcmd.Short(head), "dir", w.Dir())
		return w, nil
	}
	if err := w.fill(ctx, kind, head); err != nil {
		w.abandon(kind, prev)
		return nil, err
	}
	c.log.Info("prepared worktree", "job", job, "head", gitcmd.Short(head), "dir", w.Dir(),
		"how", [...]string{"reset kept", "reset pooled", "fresh"}[kind], "took", c.now().Sub(start).Round(time.Millisecond))
	return w, nil
}

// fill brings a claimed worktree to head: a kept one's unpublished work is
// recorded first; a pooled or kept one is reset (cost in proportion to what
// differs); a fresh one is added and checked out.
func (w *Worktree) fill(ctx context.Context, kind claimKind, head string) error {
	c := w.c
	if kind == claimKept {
		if err := w.saveOrphan(ctx); err != nil {
			return err
		}
	}
	if err := gitcmd.CheckCone(ctx, w.repo.git, w.repo.dir, head, w.rec.Sparse); err != nil {
		// Once the job has published (its head is not its base), a folder
		// its head lacks was removed by one of its attempts: the cone
		// keeps it, matching nothing (git takes that), or the job could
		// never run again. At the base, it is bad input.
		if w.src.Base == "" || w.src.Base == head {
			return err
		}
		c.log.Info("the job's head lacks sparse folders (an attempt removed them); they stay in the cone", "job", w.rec.Job, "why", err)
	}
	lap := c.stopwatch("check tree", "commit", gitcmd.Short(head))
	if kind == claimFresh {
		// A fresh worktree has no checked commit to compare with, so the
		// whole tree is read: alongside the checkout, which runs nothing
		// of the repository's (no filters, no submodules), and whose
		// worktree is removed should the check refuse the commit.
		checked := make(chan error, 1)
		go func() {
			_, err := c.checkTree(ctx, w.repo, head, w.rec.Checked)
			lap("submodules and filters")
			checked <- err
		}()
		err := w.add(ctx, head)
		if cerr := <-checked; cerr != nil {
			return cerr
		}
		if err != nil {
			return err
		}
	} else {
		diff, err := c.checkTree(ctx, w.repo, head, w.rec.Checked)
		if err != nil {
			return err
		}
		lap("submodules and filters")
		if err := w.reset(ctx, head, diff); err != nil {
			return err
		}
	}
	w.pending = nil
	w.rec = record{Job: w.rec.Job, Head: head, Checked: head, IndexHead: head, Used: c.now(), Sparse: w.rec.Sparse}
	return w.save()
}

// claim picks the job's worktree under the registry lock and returns it
// locked for this attempt: the job's own kept one, else a pooled one (one
// already at head first), else a new name.
func (c *Cache) claim(ctx context.Context, r repo, src Source, job, head string) (*Worktree, claimKind, error) {
	unlockTrees, err := c.locks.Lock(ctx, r.lockPath(lockTrees))
	if err != nil {
		return nil, 0, err
	}
	defer unlockTrees()
	recs, err := c.records(r)
	if err != nil {
		return nil, 0, err
	}
	w := &Worktree{c: c, repo: r, src: src}
	for name, rec := range recs {
		if rec.Job != job {
			continue
		}
		unlock, ok, err := c.locks.TryLock(filepath.Join(r.trees, name+".lock"))
		if err != nil {
			return nil, 0, err
		}
		if !ok {
			return nil, 0, fmt.Errorf("the job's worktree %s is in use by another attempt", name)
		}
		w.name, w.rec, w.unlock = name, rec, unlock
		if w.registered() {
			c.unpark(w)
			return w, claimKept, nil
		}
		c.log.Warn("removing the job's broken worktree (not registered in its clone)", "job", job, "dir", w.Dir())
		err = w.remove(ctx)
		unlock()
		if err != nil {
			return nil, 0, err
		}
		delete(recs, name)
		w = &Worktree{c: c, repo: r, src: src}
		break
	}
	if len(src.Sparse) > 0 {
		clear(recs) // pooled worktrees are whole; a sparse one starts fresh
	}
	for _, name := range poolOrder(recs, head) {
		unlock, ok, err := c.locks.TryLock(filepath.Join(r.trees, name+".lock"))
		if err != nil {
			return nil, 0, err
		}
		if !ok {
			continue // being retired by another process
		}
		c.pause()
		w.name, w.rec, w.unlock = name, recs[name], unlock
		w.rec.Job = job
		if err := w.save(); err != nil {
			unlock()
			return nil, 0, err
		}
		c.unpark(w)
		return w, claimPooled, nil
	}
	name, err := newTreeName()
	if err != nil {
		return nil, 0, err
	}
	if err := os.MkdirAll(r.trees, 0o700); err != nil {
		return nil, 0, fmt.Errorf("make worktree folder: %w", err)
	}
	unlock, ok, err := c.locks.TryLock(filepath.Join(r.trees, name+".lock"))
	if err != nil || !ok {
		return nil, 0, fmt.Errorf("lock new worktree %s: %v", name, err)
	}
	w.name, w.unlock = name, unlock
	w.rec = record{Job: job, Used: c.now(), Sparse: src.Sparse}
	if err := w.save(); err != nil {
		unlock()
		return nil, 0, err
	}
	return w, claimFresh, nil
}

// abandon undoes a claim whose preparation failed: a fresh worktree is
// removed, any other goes back to its earlier record.
func (w *Worktree) abandon(kind claimKind, prev record) {
	defer w.unlock()
	w.unwatch()
	if kind == claimFresh {
		if err := w.c.withLock(context.Background(), w.repo, lockTrees, func() error { return w.remove(context.Background()) }); err != nil {
			w.c.log.Warn("remove failed worktree", "dir", w.Dir(), "err", err)
		}
		return
	}
	if kind == claimPooled {
		prev.Job = ""
	}
	w.rec = prev
	if err := w.save(); err != nil {
		w.c.log.Warn("restore worktree record", "dir", w.Dir(), "err", err)
	}
}

// add registers a fresh worktree (under the registry lock; --no-checkout
// makes that quick) and then checks it out outside the lock, as `git
// worktree add` itself does: reset --hard from an empty index.
func (w *Worktree) add(ctx context.Context, head string) error {
	// The clone lock too: git writes the new HEAD as zeros first, and a
	// fetch that lists every worktree's HEAD meanwhile fails.
	err := w.c.withLock(ctx, w.repo, lockTrees, func() error {
		return w.c.withLock(ctx, w.repo, lockClone, func() error {
			_, err := w.repo.git.Run(ctx, gitcmd.Cmd{Dir: w.repo.dir, Args: []string{"worktree", "add", "--quiet", "--no-checkout", "--detach", w.Dir(), head}})
			return err
		})
	})
	if err != nil {
		return fmt.Errorf("add worktree: %w", err)
	}
	if err := w.writeAdmin(); err != nil {
		return err
	}
	lap := w.c.stopwatch("add worktree", "dir", w.Dir())
	if _, err := w.git(ctx, nil, "reset", "--quiet", "--hard", "--no-recurse-submodules", head); err != nil {
		return fmt.Errorf("check out %s: %w", gitcmd.Short(head), err)
	}
	lap("checkout")
	// Watched from after the checkout: its 100,000 new files would only
	// flood the monitor's queue. Its watches are added while the rest of
	// the preparation runs, and Ready takes its base.
	w.watch()
	w.unbased = w.mon != nil
	// Nothing to look for under any path: git made the folder (worktree
	// add refuses one that is not empty), and the checkout from an empty
	// index wrote head's files and nothing else.
	return w.settle(ctx, head, lap, 0, false, &resetScope{})
}
