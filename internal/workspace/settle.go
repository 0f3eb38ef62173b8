package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
	"syscall"

	"drover/internal/gitcmd"
)

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
			return fmt.Errorf("worktree index differs from %s after checkout: %w", gitcmd.Short(head), err)
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
		return fmt.Errorf("worktree has files %s does not after reset: %s", gitcmd.Short(head), clipList(left, 5))
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
	out, err := w.repo.git.Run(ctx, gitcmd.Cmd{Dir: w.repo.dir, Args: append([]string{"--literal-pathspecs", "ls-tree", "-r", "-z", "--name-only", head, "--"}, trees...)})
	if err != nil {
		return nil, fmt.Errorf("list %s under the reset folders: %w", gitcmd.Short(head), err)
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
