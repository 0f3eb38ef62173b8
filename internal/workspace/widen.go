package workspace

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"drover/internal/gitcmd"
	"drover/internal/protocol"
)

// Sparse returns the folders of a sparse worktree's cone; nil for a whole
// one.
func (w *Worktree) Sparse() []string { return slices.Clone(w.rec.Sparse) }

// Widen adds folders to a sparse worktree's cone while its attempt runs:
// `git sparse-checkout add` checks out their files (a partial clone fetches
// their blobs from the hub), and the worktree's record and saved index take
// the new cone, so every later publication, reset or resumed attempt keeps
// to it: a change or deletion in the new part is published, nothing still
// outside it is taken for deleted. It returns the folders added (none when
// the cone already holds them all). Folders that break the sparse path
// rule, that the job's head lacks, or where the agent already put files,
// and a worktree that is not sparse, are refused (*gitcmd.Refusal) and nothing
// changes; so does a blob the hub cannot serve (git checks every one out
// only once all are fetched), and a git stopped half-way (what it checked
// out is removed).
func (w *Worktree) Widen(ctx context.Context, dirs []string) ([]string, error) {
	added, err := w.widen(ctx, dirs)
	if err != nil {
		return nil, fmt.Errorf("widen the sparse checkout of %s: %w", w.rec.Job, err)
	}
	return added, nil
}

func (w *Worktree) widen(ctx context.Context, dirs []string) ([]string, error) {
	old := w.rec.Sparse
	if len(old) == 0 {
		return nil, gitcmd.Refusef("the job is not sparse (submitted without --sparse): its worktree holds every file already")
	}
	if len(dirs) == 0 {
		return nil, gitcmd.Refusef("name at least one folder to add to the sparse checkout")
	}
	var added []string
	for _, d := range dirs {
		if !underCone(old, d) && !slices.Contains(added, d) {
			added = append(added, d)
		}
	}
	union := append(slices.Clone(old), added...)
	if err := protocol.CheckSparsePaths(union); err != nil {
		return nil, &gitcmd.Refusal{Reason: err.Error()}
	}
	if len(added) == 0 {
		return nil, nil
	}
	if w.rec.IndexHead != w.rec.Head {
		return nil, gitcmd.Refusef("the worktree's saved index is not at the job's head %s; publish your work (checkpoint) first", gitcmd.Short(w.rec.Head))
	}
	if err := gitcmd.CheckCone(ctx, w.repo.git, w.repo.dir, w.rec.Head, added); err != nil {
		return nil, err
	}
	err := w.c.withLock(ctx, w.repo, lockClone, func() error {
		in, err := w.entering(ctx, old, union, added)
		if err != nil {
			return err
		}
		// Without the saved index git would widen an empty one, and the
		// next publication would take everything outside the cone for
		// deleted.
		if _, err := os.Stat(w.path(".index")); err != nil {
			return fmt.Errorf("the worktree has no saved index; publish your work (checkpoint) first: %w", err)
		}
		from, err := w.restoreAdmin(w.rec.Head)
		if err != nil {
			return err
		}
		if from != w.rec.IndexHead {
			return errors.New("the worktree's saved index could not be restored")
		}
		args := append([]string{"sparse-checkout", "add", "--"}, added...)
		if _, err := w.git(ctx, nil, args...); err != nil {
			// git fetches every blob before it checks out one, so a blob the
			// hub cannot serve leaves nothing behind; a git stopped half-way
			// (the attempt cancelled, say) may have, and a half-written file
			// must not be published. The index and cone go back to the
			// saved ones.
			in.undo(w.Dir(), w.c.log)
			if _, rerr := w.restoreAdmin(w.rec.Head); rerr != nil {
				w.c.log.Warn("restore worktree admin after a failed widening", "dir", w.Dir(), "err", rerr)
			}
			return fmt.Errorf("check out %s (the hub must serve their files): %w", strings.Join(added, ", "), err)
		}
		if err := copyFile(filepath.Join(w.admin(), "index"), w.path(".index")); err != nil {
			return fmt.Errorf("save the widened index: %w", err)
		}
		// A publication made before (not yet adopted) holds the old cone's
		// index: made again, it takes the new one.
		w.dropPending()
		w.rec.Sparse = union
		if err := w.save(); err != nil {
			return err
		}
		return w.writeAdmin()
	})
	if err != nil {
		return nil, err
	}
	w.c.log.Info("widened sparse worktree", "job", w.rec.Job, "added", added, "dir", w.Dir())
	return added, nil
}

// entering lists the tracked files that enter the cone (in union, not in
// old) and refuses the widening when the worktree already has something
// where one of them would be checked out: git would leave such a file as
// it is and out of the index, so its content would never be published.
func (w *Worktree) entering(ctx context.Context, old, union, added []string) (*newFiles, error) {
	var parents []string
	for _, d := range added {
		for p := path.Dir(d); p != "." && !slices.Contains(parents, p+"/"); p = path.Dir(p) {
			parents = append(parents, p+"/") // their own files enter the cone too
		}
	}
	var entries []treeEntry
	for _, list := range []struct {
		args  []string
		paths []string
	}{{[]string{"ls-tree", "-r", "-z"}, added}, {[]string{"ls-tree", "-z"}, parents}} {
		if len(list.paths) == 0 {
			continue
		}
		args := append(append(append([]string{"--literal-pathspecs"}, list.args...), w.rec.Head, "--"), list.paths...)
		out, err := w.repo.git.Run(ctx, gitcmd.Cmd{Dir: w.repo.dir, Args: args})
		if err != nil {
			return nil, fmt.Errorf("list the files of %s: %w", strings.Join(added, ", "), err)
		}
		es, err := parseTreeEntries(out)
		if err != nil {
			return nil, err
		}
		entries = append(entries, es...)
	}
	in := &newFiles{existed: map[string]bool{}}
	for _, e := range entries {
		if e.mode == "040000" || e.mode == "160000" || inCone(old, e.path) || !inCone(union, e.path) {
			continue
		}
		if p, ok := present(w.Dir(), e.path, in.existed); ok {
			return nil, gitcmd.Refusef("the worktree already has %s, where the widened sparse checkout would put %s; move it out of the way first", p, e.path)
		}
		in.files = append(in.files, e.path)
	}
	return in, nil
}

// newFiles are the files a widening checks out, none of which the worktree
// had, and the folders on their way that it had.
type newFiles struct {
	files   []string
	existed map[string]bool
}

// undo removes what a failed widening may have checked out: those files,
// and the folders on their way that it made, once empty. Through an
// os.Root, as the agent may be changing the worktree meanwhile.
func (n *newFiles) undo(dir string, log *slog.Logger) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		log.Warn("undo a failed widening", "dir", dir, "err", err)
		return
	}
	defer root.Close()
	made := map[string]bool{}
	for _, f := range n.files {
		if err := root.Remove(f); err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.Warn("undo a failed widening", "dir", dir, "file", f, "err", err)
		}
		for p := path.Dir(f); p != "." && !n.existed[p]; p = path.Dir(p) {
			made[p] = true
		}
	}
	// Deepest first; a folder something else was put in stays.
	for _, p := range slices.SortedFunc(maps.Keys(made), func(a, b string) int { return len(b) - len(a) }) {
		_ = root.Remove(p)
	}
}

// present reports the first part of rel (a file's path) that exists under
// root other than as a folder on the way to it, or the file itself; dirs
// remembers the folders found.
func present(root, rel string, dirs map[string]bool) (string, bool) {
	parts := strings.Split(rel, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		last := i == len(parts)-1
		if !last && dirs[p] {
			continue
		}
		fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(p)))
		if errors.Is(err, fs.ErrNotExist) {
			return "", false
		}
		if err != nil || last || !fi.IsDir() {
			return p, true
		}
		dirs[p] = true
	}
	return "", false
}

// underCone reports whether dir lies in (or is) one of the cone's folders.
func underCone(cone []string, dir string) bool {
	return slices.ContainsFunc(cone, func(c string) bool { return dir == c || strings.HasPrefix(dir, c+"/") })
}

// inCone reports whether cone mode checks out file: a top-level file, a
// file of a folder on the way to one of the cone's folders, or anything
// under one (see conePatterns).
func inCone(cone []string, file string) bool {
	dir := path.Dir(file)
	return dir == "." || underCone(cone, dir) ||
		slices.ContainsFunc(cone, func(c string) bool { return strings.HasPrefix(c, dir+"/") })
}
