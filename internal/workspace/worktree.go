package workspace

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"time"
)

// Worktree is the checkout one attempt works in: a linked worktree of the
// project's clone on a detached HEAD at the job's head. The attempt holds it
// (an flock) until Keep or Release, so no other attempt or process touches
// it meanwhile.
type Worktree struct {
	c       *Cache
	repo    repo
	src     Source
	name    string
	resumed bool
	unlock  func()
	rec     record
	pending *snapshot // the last publication made and not yet adopted
	mon     *monitor  // watches Dir while the attempt holds it; nil when unavailable
	// resetHow says how the last reset went: "changed paths" or "full",
	// for tests and logs.
	resetHow string
	// resetWrote says the last narrowed reset wrote head's files itself
	// (see writeFiles) rather than through `git restore`.
	resetWrote bool

	// unbased: mon was started by a fresh checkout and vouches for nothing
	// until Ready takes its base.
	unbased bool
}

// record is what the runner knows about a worktree, kept next to it as
// NAME.json so that a restarted runner (or another process sharing the
// home) finds it again.
type record struct {
	Job       string `json:"job,omitempty"`        // the job it belongs to; "" when pooled
	Head      string `json:"head,omitempty"`       // the job's head: the parent of its next publication
	Checked   string `json:"checked,omitempty"`    // last commit that passed the submodule and filter check
	IndexHead string `json:"index_head,omitempty"` // the commit the saved index (NAME.index) holds
	// Sparse are the folders of a sparse worktree's cone; such a worktree
	// is never pooled, and is reset in whole (checkout applies the cone).
	Sparse []string  `json:"sparse,omitempty"`
	Used   time.Time `json:"used"`
}

// How claim found a worktree for a job.
type claimKind int

const (
	claimKept   claimKind = iota // the job's own, kept from an earlier attempt
	claimPooled                  // a finished one from the pool
	claimFresh                   // a new one (not yet added to git)
)

// Files of a worktree named NAME, all under HOME/trees/PROJECT.
func (w *Worktree) path(suffix string) string { return filepath.Join(w.repo.trees, w.name+suffix) }

// Dir is the worktree: the agent's working directory.
func (w *Worktree) Dir() string { return w.path("") }

// Job is the job the worktree belongs to.
func (w *Worktree) Job() string { return w.rec.Job }

// Head is the job's head the attempt works on: the parent of the next
// publication.
func (w *Worktree) Head() string { return w.rec.Head }

// Resumed reports that the worktree was kept from the job's earlier attempt
// at the same head and handed back as it was, without any checkout.
func (w *Worktree) Resumed() bool { return w.resumed }

// admin is the worktree's private git directory inside the clone. Every git
// call on the worktree names it explicitly, so a .git file the agent
// rewrote cannot point the runner at another repository.
func (w *Worktree) admin() string { return filepath.Join(w.repo.dir, "worktrees", w.name) }

// GitDirs are the clone's git directory (objects, refs and config shared by
// every worktree of the project) and this worktree's admin dir inside it
// (its HEAD and index): what a sandbox must show for git to work in Dir.
func (w *Worktree) GitDirs() (common, admin string) { return w.repo.dir, w.admin() }

// RestoreAdmin puts back the worktree's HEAD and index as the runner saved
// them, dropping what the agent did to them. An agent's commits live in an
// object directory of its attempt's own, so its HEAD may name an object the
// clone lacks: left there, it would break every fetch into the clone (they
// read all worktree HEADs) and the job's next attempt.
func (w *Worktree) RestoreAdmin() error {
	if _, err := w.restoreAdmin(w.rec.Head); err != nil {
		return fmt.Errorf("restore git state of worktree %s: %w", w.name, err)
	}
	return nil
}

func (w *Worktree) git(ctx context.Context, env []string, args ...string) (string, error) {
	b, err := w.gitRaw(ctx, env, nil, args...)
	return strings.TrimSpace(string(b)), err
}

// gitRaw runs git on the worktree with stdin and returns its output as is.
func (w *Worktree) gitRaw(ctx context.Context, env []string, stdin io.Reader, args ...string) ([]byte, error) {
	full := append([]string{"--git-dir=" + w.admin(), "--work-tree=" + w.Dir()}, args...)
	return w.repo.git.Run(ctx, Cmd{Dir: w.Dir(), Args: full, Env: env, Stdin: stdin})
}

// Prepare hands an attempt of job the worktree it runs in, at head (the
// job's latest published commit, or its base): the job's own worktree from
// its earlier attempt when it is still at head (no checkout at all), else a
// pooled one reset to head, else a fresh one. The commit is fetched by id
// unless the clone has it. Repositories with submodules or filter
// attributes (LFS) are refused.
func (c *Cache) Prepare(ctx context.Context, src Source, job, head string) (*Worktree, error) {
	w, err := c.prepare(ctx, src, job, head)
	if err != nil {
		return nil, fmt.Errorf("prepare worktree for %s at %s: %w", job, short(head), err)
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
		c.log.Info("resumed kept worktree", "job", job, "head", short(head), "dir", w.Dir())
		return w, nil
	}
	if err := w.fill(ctx, kind, head); err != nil {
		w.abandon(kind, prev)
		return nil, err
	}
	c.log.Info("prepared worktree", "job", job, "head", short(head), "dir", w.Dir(),
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
	if err := CheckCone(ctx, w.repo.git, w.repo.dir, head, w.rec.Sparse); err != nil {
		// Once the job has published (its head is not its base), a folder
		// its head lacks was removed by one of its attempts: the cone
		// keeps it, matching nothing (git takes that), or the job could
		// never run again. At the base, it is bad input.
		if w.src.Base == "" || w.src.Base == head {
			return err
		}
		c.log.Info("the job's head lacks sparse folders (an attempt removed them); they stay in the cone", "job", w.rec.Job, "why", err)
	}
	lap := c.stopwatch("check tree", "commit", short(head))
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
			_, err := w.repo.git.Run(ctx, Cmd{Dir: w.repo.dir, Args: []string{"worktree", "add", "--quiet", "--no-checkout", "--detach", w.Dir(), head}})
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
		return fmt.Errorf("check out %s: %w", short(head), err)
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

// reset brings a used worktree to head so that it is indistinguishable
// from a fresh one: git's view of it is restored from what the runner saved
// (HEAD and the index, never what the agent left), the new base is checked
// out over it, every untracked and ignored file is removed, and then
// nothing may differ from head. When the worktree's monitor vouches for
// every change since the saved index (the rule publications use, see
// vouched), all of that is done only for the changed paths and those where
// the saved index's commit and head differ (see resetPaths); on any doubt,
// or should that fail, the whole worktree is checked out, cleaned and
// checked.
// diff, when not nil, is a comparison of two commits already read (the
// narrowed reset uses it if it is from the saved index's commit to head).
func (w *Worktree) reset(ctx context.Context, head string, diff *treeDiff) error {
	lap := w.c.stopwatch("reset worktree", "dir", w.Dir())
	// A running monitor (the attempt discards its changes) takes its cut
	// now: the reset's own changes come after it, and so are among what
	// changed since the index the reset saves. A new one adds its watches
	// alongside the checkout, clean and checks, and takes its cut once they
	// are done (see settle).
	var cut uint64
	watched := false
	changed, why := []string(nil), "no file-system monitor"
	if w.mon != nil {
		if changed, cut, why = w.vouched(true); why != "" {
			if cut, watched = w.mon.mark(); !watched {
				w.unwatch() // broken (e.g. it lost events): a new one starts over
			}
		} else {
			watched = true
		}
	}
	w.watch()
	from, err := w.restoreAdmin(head)
	if err != nil {
		return err
	}
	lap("restore admin")
	if why == "" && from != w.rec.IndexHead {
		why = "the saved index could not be restored"
	}
	if why == "" && len(w.rec.Sparse) > 0 {
		why = "a sparse worktree" // the narrowed reset would write files outside the cone
	}
	if why == "" {
		scope, err := w.resetPaths(ctx, from, head, changed, diff, lap)
		if err == nil {
			lap("restore changed paths")
			if err = w.settle(ctx, head, lap, cut, watched, scope); err == nil {
				w.resetHow, w.resetWrote = "changed paths", scope.wrote
				w.c.log.Debug("reset narrowed by the file-system monitor", "dir", w.Dir(), "paths", len(scope.paths), "written", scope.wrote)
				return nil
			}
		}
		why = "the narrowed reset failed: " + err.Error()
		if _, err := w.restoreAdmin(head); err != nil {
			return err
		}
	}
	w.resetHow, w.resetWrote = "full", false
	w.c.log.Debug("reset checks out the whole worktree", "dir", w.Dir(), "why", why)
	checkout := func() error {
		_, err := w.git(ctx, nil, "checkout", "--quiet", "--detach", "--force", "--no-recurse-submodules", head)
		return err
	}
	if err := checkout(); err != nil {
		// The restored index may be unreadable (its shared part gone, say);
		// without one the checkout writes every file.
		w.c.log.Warn("checkout over the saved index failed; checking out without it", "dir", w.Dir(), "err", err)
		if err := w.dropIndex(head); err != nil {
			return err
		}
		if err := checkout(); err != nil {
			return fmt.Errorf("check out %s: %w", short(head), err)
		}
	}
	lap("checkout")
	if _, err := w.git(ctx, nil, "clean", "-ffdxq"); err != nil {
		return fmt.Errorf("remove untracked files: %w", err)
	}
	lap("clean")
	return w.settle(ctx, head, lap, cut, watched, nil)
}

// settle checks that the worktree is exactly head and saves its index as
// the runner's trusted copy. What `git status --porcelain --ignored` would
// report is checked in parts, without its second pass over every tracked
// file: HEAD is head, the index holds head's tree (or, after a narrowed
// reset that wrote the files itself, each of them is head's: checkWritten),
// and nothing untracked or ignored is left (under scope, when not nil: the paths a narrowed reset
// touched; the monitor vouches for the rest). The tracked files themselves
// match the index by construction: checkout --force and reset --hard
// compare every one of them with what they stat (ctime included) and
// rewrite those that differ, and a narrowed reset rewrites every one under
// scope.
//
// Once the index is saved the monitor's base becomes cut, taken before the
// checks (watched), or, for a monitor started during the preparation, taken
// once its watches are in place (by Ready, for a fresh checkout's): nothing
// writes to the worktree meanwhile (the attempt holds it and its agent has
// not started), so the checks saw what the cut does.
func (w *Worktree) settle(ctx context.Context, head string, lap func(string), cut uint64, watched bool, scope *resetScope) error {
	if err := w.trimAdmin(); err != nil {
		return err
	}
	if got, err := os.ReadFile(filepath.Join(w.admin(), "HEAD")); err != nil || strings.TrimSpace(string(got)) != head {
		return fmt.Errorf("worktree HEAD is %q after checkout, want %s (%v)", got, head, err)
	}
	// A narrowed reset that wrote the files itself checked each of them
	// against head instead (see checkWritten).
	if scope == nil || !scope.wrote {
		if _, err := w.git(ctx, nil, "diff-index", "--cached", "--quiet", "--no-renames", head); err != nil {
			return fmt.Errorf("worktree index differs from %s after checkout: %w", short(head), err)
		}
	}
	if err := w.checkUntracked(ctx, head, scope); err != nil {
		return err
	}
	lap("verify")
	err := copyFile(filepath.Join(w.admin(), "index"), w.path(".index"))
	if err == nil {
		err = w.dropSharedIndexes(ctx)
	}
	lap("save index")
	if err != nil {
		return err
	}
	if w.mon != nil && !watched && !w.unbased {
		w.baseNewMonitor()
		lap("watch")
	} else if watched {
		w.mon.rebase(cut, true)
	}
	return nil
}

// baseNewMonitor waits until the monitor started during the preparation
// watches every folder and makes that moment its base (and its clean
// mark). Call it only while nothing writes to the worktree since it was
// verified: its checks saw what the cut does.
func (w *Worktree) baseNewMonitor() {
	cut, watched := w.mon.mark()
	if !watched {
		// It broke while the preparation changed the tree (lost
		// events, or an inode number reused between two listings
		// looked like a hard link): once more, now that nothing moves.
		w.unwatch()
		if m, err := startMonitor(w.Dir(), w.c.log); err == nil {
			w.mon = m
			cut, watched = m.mark()
		} else {
			w.c.log.Debug("no file-system monitor; publications scan the whole worktree", "dir", w.Dir(), "err", err)
		}
	}
	if watched {
		w.mon.rebase(cut, true)
	}
}

// Ready waits until the file-system monitor of a freshly checked out
// worktree watches every folder, and makes it vouch from then on. Prepare
// returns before that (a few thousand folders take a few hundred
// milliseconds) so that the runner's other preparations overlap it. Call
// Ready after Prepare and before anything writes to the worktree (the
// setup, the agent): the first walk lists a folder only once it watches
// it, so it would miss what is written meanwhile in the folders it has
// not reached. Until Ready the monitor vouches for nothing: publications
// scan the whole worktree and a reset checks out all of it.
func (w *Worktree) Ready() {
	if !w.unbased {
		return
	}
	w.unbased = false
	if w.mon != nil {
		lap := w.c.stopwatch("watch worktree", "dir", w.Dir())
		w.baseNewMonitor()
		lap("first walk")
	}
}

// dropSharedIndexes removes the shared index parts the worktree's index
// (just saved, so the saved one too) does not use. Call with no
// publication pending, whose index may use another.
func (w *Worktree) dropSharedIndexes(ctx context.Context) error {
	ents, err := os.ReadDir(w.admin())
	if err != nil {
		return fmt.Errorf("list worktree admin: %w", err)
	}
	var shared []string
	for _, e := range ents {
		if IsSharedIndex(e.Name()) {
			shared = append(shared, e.Name())
		}
	}
	if len(shared) < 2 {
		return nil // the one in use, if any: not worth a git call to ask
	}
	used, err := w.git(ctx, nil, "rev-parse", "--shared-index-path")
	if err != nil {
		return fmt.Errorf("find the index's shared part: %w", err)
	}
	for _, name := range shared {
		if name != filepath.Base(used) {
			if err := os.Remove(filepath.Join(w.admin(), name)); err != nil && !isNotExist(err) {
				return fmt.Errorf("remove an unused shared index: %w", err)
			}
		}
	}
	return nil
}

// checkUntracked fails if anything untracked or ignored is in the worktree:
// anywhere (git walks it) when scope is nil, else only under the paths a
// narrowed reset touched, where the check compares what is there with what
// head has (the index holds head's tree: settle checked it), without
// reading the index again; the monitor vouches for the rest.
func (w *Worktree) checkUntracked(ctx context.Context, head string, scope *resetScope) error {
	var left []string
	if scope == nil {
		out, err := w.git(ctx, nil, "ls-files", "--others", "--directory", "-z")
		if err != nil {
			return fmt.Errorf("check worktree: %w", err)
		}
		left = splitZ(out)
	} else {
		var err error
		if left, err = w.untrackedIn(ctx, head, scope); err != nil {
			return fmt.Errorf("check worktree: %w", err)
		}
	}
	if len(left) > 0 {
		return fmt.Errorf("worktree has files %s does not after reset: %s", short(head), clipList(left, 5))
	}
	return nil
}

// untrackedIn lists what is under scope's paths and not in head: files
// head lacks, and folders holding none of head's files.
func (w *Worktree) untrackedIn(ctx context.Context, head string, scope *resetScope) ([]string, error) {
	var left, trees []string
	for _, p := range scope.paths {
		fi, err := os.Lstat(filepath.Join(w.Dir(), filepath.FromSlash(p)))
		switch {
		case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		case err != nil:
			return nil, err
		case !fi.IsDir():
			if scope.head[p] != "blob" {
				left = append(left, p)
			}
		case scope.head[p] == "tree":
			trees = append(trees, p)
		default:
			left = append(left, p+"/")
		}
	}
	if len(trees) == 0 {
		return left, nil
	}
	out, err := w.repo.git.Run(ctx, Cmd{Dir: w.repo.dir, Args: append([]string{"--literal-pathspecs", "ls-tree", "-r", "-z", "--name-only", head, "--"}, trees...)})
	if err != nil {
		return nil, fmt.Errorf("list %s under the reset folders: %w", short(head), err)
	}
	tracked, folders := map[string]bool{}, map[string]bool{}
	for _, p := range splitZ(string(out)) {
		tracked[p] = true
		addFolders(folders, p)
	}
	for _, t := range trees {
		err := filepath.WalkDir(filepath.Join(w.Dir(), filepath.FromSlash(t)), func(abs string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			rel, err := filepath.Rel(w.Dir(), abs)
			if err != nil {
				return err
			}
			rel = filepath.ToSlash(rel)
			switch {
			case d.IsDir() && !folders[rel]:
				left = append(left, rel+"/")
				return fs.SkipDir
			case !d.IsDir() && !tracked[rel]:
				left = append(left, rel)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return left, nil
}

// addFolders adds every folder above p to folders.
func addFolders(folders map[string]bool, p string) {
	for d := path.Dir(p); d != "." && d != "/" && !folders[d]; d = path.Dir(d) {
		folders[d] = true
	}
}

// watch starts the worktree's file-system monitor unless it runs; its
// watches are being added when this returns. Without a monitor every
// publication scans the whole worktree.
func (w *Worktree) watch() {
	if w.mon != nil {
		return
	}
	m, err := launchMonitor(w.Dir(), w.c.log)
	if err != nil {
		w.c.log.Debug("no file-system monitor; publications scan the whole worktree", "dir", w.Dir(), "err", err)
		return
	}
	w.mon = m
}

// unwatch stops the monitor: its descriptor, watches and goroutine go.
func (w *Worktree) unwatch() {
	w.mon.stop()
	w.mon = nil
}

// The admin files a fresh worktree has; everything else an agent or an
// earlier job left there (reflogs, ORIG_HEAD, per-worktree refs, rebase
// state, sparse-checkout) is removed.
var adminFiles = map[string]bool{"gitdir": true, "commondir": true, "HEAD": true, "index": true, "config.worktree": true}

// worktreeConfig makes `git push origin` from the worktree fail: results
// leave only as publications. And it checks out with parallel workers
// (git's own, from 100 files up): a checkout of many files waits on the
// disk for each file it creates, and workers overlap those waits, which a
// slow or shared disk makes most of the time a checkout takes.
var worktreeConfig = []byte("[remote \"origin\"]\n\tpushurl = drover-push-disabled://publish-through-drover\n[checkout]\n\tworkers = 8\n")

// splitIndexConfig keeps a whole worktree's index in two files: a shared
// part, rewritten only once much has changed, and a small file holding the
// rest, so that a call changing a few entries of 100,000 does not hash and
// write all of them. The runner removes the shared parts nothing refers to
// (see dropSharedIndexes); git must not expire one a saved index needs.
var splitIndexConfig = []byte("[core]\n\tsplitIndex = true\n[splitIndex]\n\tsharedIndexExpire = never\n")

// IsSharedIndex reports that an admin dir entry is a split index's shared
// part.
func IsSharedIndex(name string) bool {
	hex, ok := strings.CutPrefix(name, "sharedindex.")
	return ok && ValidCommitID(hex)
}

// sparseConfig turns on a cone-mode sparse checkout in a worktree's config.
var sparseConfig = []byte("[core]\n\tsparseCheckout = true\n\tsparseCheckoutCone = true\n[index]\n\tsparse = true\n")

// conePatterns is the sparse-checkout file of a cone of folders, as `git
// sparse-checkout set` writes it: the top level's files, the files of
// every folder on the way to each one, and everything under each.
func conePatterns(dirs []string) []byte {
	leaves := slices.Sorted(slices.Values(dirs))
	leaves = slices.Compact(leaves)
	leaves = slices.DeleteFunc(leaves, func(d string) bool {
		return slices.ContainsFunc(leaves, func(o string) bool { return strings.HasPrefix(d, o+"/") })
	})
	parents := map[string]bool{}
	for _, d := range leaves {
		for p := path.Dir(d); p != "."; p = path.Dir(p) {
			parents[p] = true
		}
	}
	var b strings.Builder
	b.WriteString("/*\n!/*/\n")
	for _, p := range slices.Sorted(maps.Keys(parents)) {
		fmt.Fprintf(&b, "/%s/\n!/%s/*/\n", p, p)
	}
	for _, d := range leaves {
		fmt.Fprintf(&b, "/%s/\n", d)
	}
	return []byte(b.String())
}

// CheckCone refuses sparse folders that commit (in repository dir) lacks:
// nothing would be checked out there.
func CheckCone(ctx context.Context, g Git, dir, commit string, dirs []string) error {
	for _, d := range dirs {
		if t, err := g.Out(ctx, dir, "cat-file", "-t", commit+":"+d); err != nil || t != "tree" {
			return refusef("sparse path %s is not a folder of %s; nothing would be checked out there", d, short(commit))
		}
	}
	return nil
}

// writeAdmin writes the files that tie the worktree to its clone and the
// worktree's config.
func (w *Worktree) writeAdmin() error {
	files := map[string][]byte{
		w.path("/.git"):                             []byte("gitdir: " + w.admin() + "\n"),
		filepath.Join(w.admin(), "gitdir"):          []byte(w.path("/.git") + "\n"),
		filepath.Join(w.admin(), "commondir"):       []byte("../..\n"),
		filepath.Join(w.admin(), "config.worktree"): append(slices.Clip(worktreeConfig), splitIndexConfig...),
	}
	if len(w.rec.Sparse) > 0 { // a sparse index, which cannot be split
		files[filepath.Join(w.admin(), "config.worktree")] = append(slices.Clip(worktreeConfig), sparseConfig...)
		files[filepath.Join(w.admin(), "info", "sparse-checkout")] = conePatterns(w.rec.Sparse)
	}
	for p, b := range files {
		if fi, err := os.Lstat(p); err == nil && (fi.IsDir() || fi.Mode()&os.ModeSymlink != 0) {
			if err := os.RemoveAll(p); err != nil {
				return fmt.Errorf("restore %s: %w", p, err)
			}
		}
		if err := ensureFile(p, b); err != nil {
			return fmt.Errorf("restore %s: %w", p, err)
		}
	}
	return nil
}

// trimAdmin removes from the admin dir whatever a fresh worktree lacks.
func (w *Worktree) trimAdmin() error {
	ents, err := os.ReadDir(w.admin())
	if err != nil {
		return fmt.Errorf("read worktree admin: %w", err)
	}
	for _, e := range ents {
		if !adminFiles[e.Name()] && !IsSharedIndex(e.Name()) {
			if err := os.RemoveAll(filepath.Join(w.admin(), e.Name())); err != nil {
				return fmt.Errorf("clean worktree admin: %w", err)
			}
		}
	}
	return w.writeAdmin()
}

// restoreAdmin puts back the admin dir as the runner left it: HEAD at the
// commit of the saved index, and that index, so that what the agent did to
// HEAD or the index (assume-unchanged bits, forged stat data) cannot hide a
// change from the reset. Without a saved index, HEAD is target and the
// checkout writes every file. It returns the commit HEAD names.
func (w *Worktree) restoreAdmin(target string) (string, error) {
	if _, err := os.Stat(w.admin()); err != nil {
		return "", fmt.Errorf("worktree %s is not registered in its clone: %w", w.name, err)
	}
	if err := w.trimAdmin(); err != nil {
		return "", err
	}
	head := w.rec.IndexHead
	if checkCommitID(head) != nil || copyFile(w.path(".index"), filepath.Join(w.admin(), "index")) != nil {
		return target, w.dropIndex(target)
	}
	return head, writeAtomic(filepath.Join(w.admin(), "HEAD"), []byte(head+"\n"))
}

// dropIndex leaves the worktree without an index, HEAD at target.
func (w *Worktree) dropIndex(target string) error {
	if err := os.Remove(filepath.Join(w.admin(), "index")); err != nil && !isNotExist(err) {
		return fmt.Errorf("drop worktree index: %w", err)
	}
	return writeAtomic(filepath.Join(w.admin(), "HEAD"), []byte(target+"\n"))
}

// remove deletes the worktree, its registration and its files. Call with
// the registry lock held.
func (w *Worktree) remove(ctx context.Context) error {
	w.c.unpark(w)
	w.unwatch()
	var errs []error
	// Unregistering changes what git lists as worktree HEADs: not while a
	// fetch in another process reads them.
	err := w.c.withLock(ctx, w.repo, lockClone, func() error {
		if _, err := os.Stat(w.admin()); err == nil {
			if _, err := w.repo.git.Run(ctx, Cmd{Dir: w.repo.dir, Args: []string{"worktree", "remove", "--force", "--force", w.Dir()}}); err != nil {
				w.c.log.Warn("git worktree remove failed; removing the files", "dir", w.Dir(), "err", err)
			}
		}
		return os.RemoveAll(w.admin())
	})
	if err != nil {
		errs = append(errs, err)
	}
	// The lock file goes too: every tree lock is taken under the registry
	// lock, which the caller holds, so nobody can be opening it now.
	for _, p := range []string{w.Dir(), w.path(".index"), w.path(".json"), w.path(".lock")} {
		if err := os.RemoveAll(p); err != nil {
			errs = append(errs, err)
		}
	}
	if len(errs) > 0 {
		return fmt.Errorf("remove worktree %s: %v", w.name, errs)
	}
	return nil
}

func (w *Worktree) save() error {
	b, err := json.Marshal(w.rec)
	if err != nil {
		return err
	}
	if err := writeAtomic(w.path(".json"), b); err != nil {
		return fmt.Errorf("save worktree record: %w", err)
	}
	return nil
}

// records reads every worktree record of a repository.
func (c *Cache) records(r repo) (map[string]record, error) {
	ents, err := os.ReadDir(r.trees)
	if isNotExist(err) {
		return map[string]record{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list worktrees: %w", err)
	}
	recs := map[string]record{}
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), ".json")
		if !ok || !treeNamePattern.MatchString(name) {
			continue
		}
		b, err := os.ReadFile(filepath.Join(r.trees, e.Name()))
		if err != nil {
			return nil, fmt.Errorf("read worktree record: %w", err)
		}
		var rec record
		if err := json.Unmarshal(b, &rec); err != nil {
			c.log.Warn("ignoring unreadable worktree record", "file", e.Name(), "err", err)
			continue
		}
		recs[name] = rec
	}
	return recs, nil
}

var treeNamePattern = regexp.MustCompile(`^w[0-9a-f]{16}$`)

func newTreeName() (string, error) {
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("name worktree: %w", err)
	}
	return fmt.Sprintf("w%x", b), nil
}

// checkTree refuses (with a *Refusal) a commit whose tree holds a gitlink
// (submodule) or a .gitattributes that declares a filter (LFS and the
// like): a bundle cannot carry their content and drover never runs filters.
// Since a commit known to pass, only what changed is read, so that a
// pooled worktree's reset stays in proportion to the difference.
// It returns the comparison it read, for the reset to reuse (nil when it
// read none).
func (c *Cache) checkTree(ctx context.Context, r repo, commit, since string) (*treeDiff, error) {
	if since == commit {
		return nil, nil
	}
	if since == "" {
		return nil, CheckSourceTree(ctx, r.git, r.dir, commit)
	}
	d, err := diffTrees(ctx, r, since, commit)
	if err != nil {
		// Asked only now, sparing a git call when it is there.
		if !c.hasCommit(ctx, r, since) {
			return nil, CheckSourceTree(ctx, r.git, r.dir, commit)
		}
		return nil, err
	}
	for _, e := range d.entries {
		if e.mode == "160000" {
			return nil, refusef("%s has a submodule (gitlink) at %s; drover does not support submodules", short(commit), e.path)
		}
		if e.mode == "000000" || filepath.Base(e.path) != ".gitattributes" {
			continue
		}
		blob, err := r.git.Run(ctx, Cmd{Dir: r.dir, Args: []string{"cat-file", "blob", e.object}})
		if err != nil {
			return nil, fmt.Errorf("read %s of %s: %w", e.path, short(commit), err)
		}
		if pattern, filter, ok := declaredFilter(blob); ok {
			return nil, refusef("%s: %s assigns filter=%s to %q (e.g. Git LFS); drover does not run filters, so it refuses this repository",
				short(commit), e.path, filter, pattern)
		}
	}
	return d, nil
}

// treeDiff is what changes from one commit's tree to another's: every
// entry `diff-tree -r` reports, deletions (mode 000000) included.
type treeDiff struct {
	from, to string
	entries  []treeEntry
}

func diffTrees(ctx context.Context, r repo, from, to string) (*treeDiff, error) {
	out, err := r.git.Run(ctx, Cmd{Dir: r.dir, Args: []string{"diff-tree", "-r", "-z", "--no-renames", "--no-commit-id", from, to}})
	if err != nil {
		return nil, fmt.Errorf("compare %s with %s: %w", short(to), short(from), err)
	}
	entries, err := parseEntries(out, true)
	if err != nil {
		return nil, err
	}
	return &treeDiff{from: from, to: to, entries: entries}, nil
}

// treeEntry is an entry of ls-tree or diff-tree; oldMode is the mode
// before, for diff-tree.
type treeEntry struct{ oldMode, mode, object, path string }

// parseTreeEntries reads `ls-tree -r -z` ("MODE TYPE OID\tPATH") or
// `diff-tree -r -z` (":OLD NEW OLDOID NEWOID STATUS\0PATH") output; deleted
// entries are skipped.
func parseTreeEntries(out []byte) ([]treeEntry, error) { return parseEntries(out, false) }

// parseEntries is parseTreeEntries, keeping deleted entries (mode 000000)
// when asked.
func parseEntries(out []byte, deleted bool) ([]treeEntry, error) {
	var es []treeEntry
	fields := bytes.Split(bytes.TrimSuffix(out, []byte{0}), []byte{0})
	for i := 0; i < len(fields); i++ {
		f := string(fields[i])
		if f == "" {
			continue
		}
		if strings.HasPrefix(f, ":") {
			parts := strings.Fields(f[1:])
			if len(parts) != 5 || i+1 >= len(fields) {
				return nil, fmt.Errorf("unexpected diff-tree line %q", f)
			}
			i++
			if deleted || parts[4] != "D" {
				es = append(es, treeEntry{oldMode: parts[0], mode: parts[1], object: parts[3], path: string(fields[i])})
			}
			continue
		}
		meta, path, ok := strings.Cut(f, "\t")
		parts := strings.Fields(meta)
		if !ok || len(parts) != 3 {
			return nil, fmt.Errorf("unexpected ls-tree line %q", f)
		}
		es = append(es, treeEntry{mode: parts[0], object: parts[2], path: path})
	}
	return es, nil
}

func clipList(items []string, n int) string {
	var keep []string
	for _, it := range items {
		if it != "" {
			keep = append(keep, it)
		}
	}
	if len(keep) <= n {
		return strings.Join(keep, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(keep[:n], ", "), len(keep)-n)
}

// copyFile copies src to dst atomically, keeping src's modification time:
// git trusts an index entry's stat data only when the file is older than
// the index file itself (timestamps in whole seconds), so a copy with a
// fresh mtime would hide a same-size change made in the second the
// original index was written.
func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	st, err := in.Stat()
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(dst), "."+filepath.Base(dst)+".tmp-")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if _, err := io.Copy(f, in); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Chtimes(f.Name(), time.Time{}, st.ModTime()); err != nil {
		return err
	}
	return os.Rename(f.Name(), dst)
}
