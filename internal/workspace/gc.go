package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"drover/internal/fsutil"
	"drover/internal/gitcmd"
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
	// Budget is the most bytes the worktrees (pooled and kept) and the
	// clones' objects may take; zero means no budget. Past it, the clones'
	// unreferenced objects go first (see gcObjects), then pooled worktrees,
	// least recently used first. A worktree kept for a job (whose next
	// attempt may be waiting) or in use is never removed for the budget: a
	// pooled one holds no unpublished work (retiring recorded it first).
	Budget int64
}

// GCReport says what a collection found and freed.
type GCReport struct {
	Used    int64    // bytes the worktrees and objects took before the budget was applied
	Freed   int64    // bytes removed to meet the budget, Pruned included
	Pruned  int64    // of which the clones' unreferenced objects (and repacking)
	Removed []string // the worktrees removed for it
}

// pruneExpiry is how old an unreferenced object must be for the budget to
// delete it: a commit fetched for a preparation is unreferenced until its
// worktree is added, a publication's objects until the worktree adopts it.
const pruneExpiry = time.Hour

// gcGrowth is how much a clone's objects must have grown since its last
// collection for the budget to collect it again: git rewrites every pack,
// which a budget that worktrees kept for jobs keep exceeded would
// otherwise repeat every time.
const gcGrowth = 1.25

// gcMark is the file in a clone holding its objects' size after its last
// collection.
const gcMark = "drover-gc-size"

// GC retires the worktrees of jobs that are gone (not live and idle past
// MaxIdle): their unpublished work is recorded on refs/drover/orphans/JOB
// first, then they are pooled or removed. It also trims the pool to its
// size and removes leftovers of crashes (folders without a record,
// temporary indexes, registrations of missing worktrees). Worktrees in use
// by an attempt, in this process or another, are never touched.
//
// With a budget, it then removes pooled worktrees, least recently used
// first, until the worktrees fit, and reports what that freed.
func (c *Cache) GC(ctx context.Context, opts GCOptions) (GCReport, error) {
	if opts.MaxIdle <= 0 {
		opts.MaxIdle = DefaultMaxIdle
	}
	ents, err := os.ReadDir(filepath.Join(c.home, "trees"))
	if err != nil {
		return GCReport{}, fmt.Errorf("collect worktrees: %w", err)
	}
	var errs []error
	var repos []repo
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		r, err := c.repoOf(e.Name())
		if err != nil {
			continue
		}
		repos = append(repos, r)
		if err := c.gcRepo(ctx, r, opts); err != nil {
			errs = append(errs, fmt.Errorf("collect worktrees of %s: %w", r.project, err))
		}
	}
	var rep GCReport
	if opts.Budget > 0 {
		rep, err = c.gcBudget(ctx, repos, opts.Budget)
		errs = append(errs, err)
	}
	return rep, errors.Join(errs...)
}

// gcBudget removes pooled worktrees, least recently used first, while the
// worktrees of repos take more than budget bytes.
func (c *Cache) gcBudget(ctx context.Context, repos []repo, budget int64) (GCReport, error) {
	type pooled struct {
		r    repo
		name string
		used time.Time
		size int64
	}
	var rep GCReport
	var pool []pooled
	for _, r := range repos {
		recs, err := c.records(r)
		if err != nil {
			return rep, err
		}
		rep.Used += diskUsage(filepath.Join(r.dir, "objects"))
		for name, rec := range recs {
			size := diskUsage(filepath.Join(r.trees, name))
			rep.Used += size
			if rec.Job == "" {
				pool = append(pool, pooled{r: r, name: name, used: rec.Used, size: size})
			}
		}
	}
	for _, r := range repos {
		if rep.Used-rep.Freed <= budget {
			break
		}
		freed, err := c.gcObjects(ctx, r)
		if err != nil {
			return rep, fmt.Errorf("keep within %d bytes: %w", budget, err)
		}
		rep.Pruned += freed
		rep.Freed += freed
	}
	sort.Slice(pool, func(i, j int) bool { return pool[i].used.Before(pool[j].used) })
	for _, p := range pool {
		if rep.Used-rep.Freed <= budget {
			break
		}
		err := c.withLock(ctx, p.r, lockTrees, func() error {
			recs, err := c.records(p.r)
			if err != nil {
				return err
			}
			rec, ok := recs[p.name]
			if !ok || rec.Job != "" {
				return nil // claimed or gone meanwhile
			}
			unlock, ok, err := c.locks.TryLock(filepath.Join(p.r.trees, p.name+".lock"))
			if err != nil || !ok {
				return err // in use
			}
			w := &Worktree{c: c, repo: p.r, name: p.name, rec: rec, unlock: unlock}
			defer w.done()
			if err := w.remove(ctx); err != nil {
				return err
			}
			rep.Freed += p.size
			rep.Removed = append(rep.Removed, w.Dir())
			return nil
		})
		if err != nil {
			return rep, fmt.Errorf("keep worktrees within %d bytes: %w", budget, err)
		}
	}
	if len(rep.Removed) > 0 || rep.Pruned != 0 {
		c.log.Info("freed space to keep within the cache budget", "budget", budget, "used", rep.Used,
			"freed", rep.Freed, "unreferenced_objects", rep.Pruned, "worktrees_removed", len(rep.Removed))
	}
	if left := rep.Used - rep.Freed; left > budget {
		c.log.Warn("worktrees over the cache budget: the rest are kept for jobs or in use", "budget", budget, "used", left)
	}
	return rep, nil
}

// gcObjects has git delete a clone's unreferenced objects older than
// pruneExpiry (those no ref, worktree HEAD or index reaches: bases of
// removed worktrees, superseded publications) and repack the rest, if its
// objects grew by gcGrowth since it last did. It returns the bytes that
// freed. The clone lock keeps fetches out meanwhile; the expiry keeps what
// a preparation or publication is about to reference.
func (c *Cache) gcObjects(ctx context.Context, r repo) (int64, error) {
	objects, mark := filepath.Join(r.dir, "objects"), filepath.Join(r.dir, gcMark)
	var freed int64
	err := c.withLock(ctx, r, lockClone, func() error {
		before := diskUsage(objects)
		if b, err := os.ReadFile(mark); err == nil {
			if last, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64); err == nil && float64(before) < gcGrowth*float64(last) {
				return nil
			}
		}
		start := c.now()
		prune := "--prune=" + start.Add(-pruneExpiry).UTC().Format(time.RFC3339)
		if _, err := c.git.Run(ctx, gitcmd.Cmd{Dir: r.dir, Args: []string{"gc", "--quiet", prune}}); err != nil {
			return fmt.Errorf("delete unreferenced objects of %s: %w", r.project, err)
		}
		after := diskUsage(objects)
		freed = max(0, before-after) // repacking a clone with nothing to delete can add a few bytes
		c.log.Info("deleted unreferenced objects", "project", r.project, "before", before, "after", after,
			"took", c.now().Sub(start).Round(time.Millisecond))
		return fsutil.WriteFileAtomic(mark, []byte(strconv.FormatInt(after, 10)+"\n"))
	})
	return freed, err
}

// diskUsage adds up the sizes of the files under dir (symlinks not
// followed), and of its saved index and record. What cannot be read (gone
// meanwhile, or a folder an agent made unreadable) is not counted.
func diskUsage(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // WalkDir skips a folder it cannot list
		}
		if fi, err := d.Info(); err == nil && !d.IsDir() {
			n += fi.Size()
		}
		return nil
	})
	for _, suffix := range []string{".index", ".json"} {
		if fi, err := os.Stat(dir + suffix); err == nil {
			n += fi.Size()
		}
	}
	return n
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
			unlock, ok, err := c.locks.TryLock(filepath.Join(r.trees, name+".lock"))
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
		unlock, ok, err := c.locks.TryLock(filepath.Join(r.trees, name+".lock"))
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
		if _, err := c.git.Run(ctx, gitcmd.Cmd{Dir: r.dir, Args: []string{"worktree", "prune"}}); err != nil {
			return fmt.Errorf("prune worktree registrations: %w", err)
		}
		return nil
	})
}
