package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"
)

// DefaultMaxIdle is how long a job's kept worktree waits for another
// attempt once the runner no longer holds one of the job's attempts.
const DefaultMaxIdle = 6 * time.Hour

// GCOptions says which worktrees the garbage collector retires.
type GCOptions struct {
	// Live reports whether a job still needs its worktree (the runner
	// holds one of its attempts). Nil: no job is live.
	Live func(job string) bool
	// MaxIdle: a job's worktree unused this long while the job is not
	// live is retired. Zero means DefaultMaxIdle.
	MaxIdle time.Duration
}

// GC retires the worktrees of jobs that are gone (not live and idle past
// MaxIdle): their unpublished work is recorded on refs/drover/orphans/JOB
// first, then they are pooled or removed. It also trims the pool to its
// size and removes leftovers of crashes (folders without a record,
// temporary indexes, registrations of missing worktrees). Worktrees in use
// by an attempt, in this process or another, are never touched.
func (c *Cache) GC(ctx context.Context, opts GCOptions) error {
	if opts.MaxIdle <= 0 {
		opts.MaxIdle = DefaultMaxIdle
	}
	ents, err := os.ReadDir(filepath.Join(c.home, "trees"))
	if err != nil {
		return fmt.Errorf("collect worktrees: %w", err)
	}
	var errs []error
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		r, err := c.repoOf(e.Name())
		if err != nil {
			continue
		}
		if err := c.gcRepo(ctx, r, opts); err != nil {
			errs = append(errs, fmt.Errorf("collect worktrees of %s: %w", r.project, err))
		}
	}
	return errors.Join(errs...)
}

func (c *Cache) gcRepo(ctx context.Context, r repo, opts GCOptions) error {
	var retire []*Worktree
	err := c.withLock(ctx, r, lockTrees, func() error {
		recs, err := c.records(r)
		if err != nil {
			return err
		}
		names := make([]string, 0, len(recs))
		for name := range recs {
			names = append(names, name)
		}
		sort.Slice(names, func(i, j int) bool { return recs[names[i]].Used.After(recs[names[j]].Used) })
		pooled := 0
		for _, name := range names {
			rec := recs[name]
			unlock, ok, err := c.locks.tryLock(filepath.Join(r.trees, name+".lock"))
			if err != nil {
				return err
			}
			if !ok {
				continue // in use
			}
			w := &Worktree{c: c, repo: r, name: name, rec: rec, unlock: unlock}
			idle := c.now().Sub(rec.Used)
			switch {
			case !w.registered():
				c.log.Warn("removing a broken worktree (not registered in its clone, nothing recoverable)", "dir", w.Dir(), "job", rec.Job)
				err = w.remove(ctx)
			case rec.Job == "":
				if pooled++; pooled > c.poolSize {
					err = w.remove(ctx)
				}
			case opts.Live != nil && opts.Live(rec.Job), idle < opts.MaxIdle:
			default:
				retire = append(retire, w)
				continue // stays locked until retired
			}
			w.done()
			if err != nil {
				return err
			}
		}
		return c.gcLeftovers(ctx, r, recs)
	})
	for _, w := range retire {
		c.log.Info("retiring the worktree of a job that is gone", "job", w.rec.Job, "dir", w.Dir())
		if rerr := w.retire(ctx); rerr != nil {
			err = errors.Join(err, rerr)
		}
		w.done()
	}
	return err
}

// registered reports whether the worktree's folder and its registration in
// the clone both exist.
func (w *Worktree) registered() bool {
	_, err1 := os.Stat(w.admin())
	_, err2 := os.Stat(w.Dir())
	return err1 == nil && err2 == nil
}

// gcLeftovers removes what crashes leave: folders and files of worktrees
// without a record, temporary indexes of worktrees not in use, and the
// clone's registrations of worktrees whose folders are gone. Call with the
// registry lock held.
func (c *Cache) gcLeftovers(ctx context.Context, r repo, recs map[string]record) error {
	ents, err := os.ReadDir(r.trees)
	if err != nil {
		return err
	}
	leftovers := map[string][]string{} // worktree name → its files to remove
	for _, e := range ents {
		name, _, _ := strings.Cut(e.Name(), ".")
		if !treeNamePattern.MatchString(name) {
			continue
		}
		_, known := recs[name]
		if !known || strings.HasPrefix(e.Name(), name+".tmpindex-") {
			leftovers[name] = append(leftovers[name], e.Name())
		}
	}
	for name, files := range leftovers {
		unlock, ok, err := c.locks.tryLock(filepath.Join(r.trees, name+".lock"))
		if err != nil || !ok {
			continue
		}
		for _, f := range files {
			if f == name+".lock" {
				continue // removed last, while held
			}
			if err := os.RemoveAll(filepath.Join(r.trees, f)); err != nil {
				c.log.Warn("remove worktree leftover", "path", f, "err", err)
			}
		}
		if _, known := recs[name]; !known {
			os.Remove(filepath.Join(r.trees, name+".lock"))
		}
		unlock()
	}
	if _, err := os.Stat(r.dir); err != nil {
		return nil
	}
	return c.withLock(ctx, r, lockClone, func() error {
		if _, err := c.git.Run(ctx, Cmd{Dir: r.dir, Args: []string{"worktree", "prune"}}); err != nil {
			return fmt.Errorf("prune worktree registrations: %w", err)
		}
		return nil
	})
}
