package workspace

import (
	"context"
	"drover/internal/gitcmd"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// resetScope is what a narrowed reset touched: its (folded, sorted)
// paths, what head has at each: "blob" (a file or symlink), "tree" (a
// folder), or "" (nothing), and whether it wrote the files itself.
type resetScope struct {
	paths []string
	head  map[string]string
	wrote bool
}

// resetPaths is the narrowed reset: the worktree's index holds from (the
// restored saved index), and every path where the files may differ from it
// is in changed (the monitor vouches for that). It removes whatever is at
// the changed paths and at those where from and head differ, then writes
// head's entries there, index and files: itself when it can (headFiles),
// else in one `git restore`. That is what checkout --force and clean -ffdx
// would do, in proportion to the change.
// diff is the comparison of from and head when already read.
// It returns those paths (the scope the checks look at) or why the whole
// worktree must be reset instead.
func (w *Worktree) resetPaths(ctx context.Context, from, head string, changed []string, diff *treeDiff, lap func(string)) (*resetScope, error) {
	set := map[string]bool{}
	for _, p := range changed {
		set[p] = true
	}
	if from != head {
		if diff == nil || diff.from != from || diff.to != head {
			var err error
			if diff, err = diffTrees(ctx, w.repo, from, head); err != nil {
				return nil, err
			}
		}
		for _, e := range diff.entries {
			p := e.path
			if rulesFile(p) {
				return nil, fmt.Errorf("%s changes %s", gitcmd.Short(head), p)
			}
			set[p] = true
		}
	}
	scope := &resetScope{}
	for p := range set {
		if !coveredBy(set, p) {
			scope.paths = append(scope.paths, p)
		}
	}
	sort.Strings(scope.paths)
	if len(scope.paths) > maxNarrowPaths {
		return nil, fmt.Errorf("%d paths to reset (more than %d)", len(scope.paths), maxNarrowPaths)
	}
	if err := writeAtomic(filepath.Join(w.admin(), "HEAD"), []byte(head+"\n")); err != nil {
		return nil, fmt.Errorf("move HEAD to %s: %w", gitcmd.Short(head), err)
	}
	if len(scope.paths) == 0 {
		return scope, nil
	}
	// The saved index holds exactly from's tree, so what it has at a path
	// is what from has there: asked of the clone's objects, which spares
	// reading the index of 100,000 entries once more.
	lap("compare bases")
	types, known := typesFromDiff(scope.paths, diff, from, head)
	if types == nil {
		var err error
		if types, err = w.pathTypes(ctx, scope.paths, from, head); err != nil {
			return nil, err
		}
	}
	lap("look up paths")
	scope.head = types[head]
	files, err := w.headFiles(ctx, head, scope.paths, types, known)
	if err != nil {
		return nil, err
	}
	lap("read contents")
	var restore strings.Builder
	for _, p := range scope.paths {
		if err := w.removeChanged(p); err != nil {
			return nil, err
		}
		if types[from][p] != "" || types[head][p] != "" { // git refuses a pathspec that matches nothing it knows
			restore.WriteString(p + "\x00")
		}
	}
	switch {
	case restore.Len() == 0:
	case files != nil:
		if err := w.writeFiles(ctx, files, restore.String()); err != nil {
			return nil, err
		}
		scope.wrote = true
	default:
		// No overlay (restore's default): entries under the paths that
		// head lacks leave the index too. Preloading would stat every
		// entry's file in threads; restore looks only at those under the
		// paths.
		if _, err := w.gitRaw(ctx, nil, strings.NewReader(restore.String()), "-c", "core.preloadIndex=false", "--literal-pathspecs", "restore", "--quiet",
			"--source="+head, "--staged", "--worktree", "--no-recurse-submodules", "--pathspec-from-file=-", "--pathspec-file-nul"); err != nil {
			return nil, fmt.Errorf("restore the changed paths from %s: %w", gitcmd.Short(head), err)
		}
	}
	// Folders left empty go, as checkout and clean -d remove them.
	for _, p := range scope.paths {
		for d := p; d != "." && d != "/"; d = path.Dir(d) {
			abs := filepath.Join(w.Dir(), filepath.FromSlash(d))
			fi, err := os.Lstat(abs)
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			if err != nil || !fi.IsDir() || os.Remove(abs) != nil {
				break
			}
		}
	}
	return scope, nil
}

// typesFromDiff is pathTypes and head's entries at the paths, read from
// the bases' comparison, when every path is a file, a symlink or nothing
// in each base there: each path is an entry of the comparison, with no
// other entry under it (which would make it a folder on one side). Else
// it returns nil.
func typesFromDiff(paths []string, diff *treeDiff, from, head string) (map[string]map[string]string, map[string]treeEntry) {
	if diff == nil || diff.from != from || diff.to != head {
		return nil, nil
	}
	scope := map[string]bool{}
	for _, p := range paths {
		scope[p] = true
	}
	byPath := map[string]treeEntry{}
	for _, e := range diff.entries {
		if !scope[e.path] || coveredBy(scope, e.path) {
			return nil, nil
		}
		byPath[e.path] = e
	}
	types := map[string]map[string]string{from: {}, head: {}}
	known := map[string]treeEntry{}
	for _, p := range paths {
		e, ok := byPath[p]
		if !ok {
			return nil, nil
		}
		for c, m := range map[string]string{from: e.oldMode, head: e.mode} {
			switch m {
			case "000000":
			case "100644", "100755", "120000":
				types[c][p] = "blob"
			default:
				return nil, nil
			}
		}
		if e.mode != "000000" {
			known[p] = e
		}
	}
	return types, known
}

// pathTypes asks the clone, in one `cat-file --batch-check`, what each
// commit has at each path: "blob", "tree" or "" (nothing; a path through
// a file or symlink is nothing too).
func (w *Worktree) pathTypes(ctx context.Context, paths []string, commits ...string) (map[string]map[string]string, error) {
	var in strings.Builder
	for _, c := range commits {
		for _, p := range paths {
			if strings.ContainsAny(p, "\n\x00") {
				return nil, fmt.Errorf("path %q has a newline", p) // its answer could not be told apart
			}
			in.WriteString(c + ":" + p + "\x00")
		}
	}
	out, err := w.repo.git.Run(ctx, gitcmd.Cmd{Dir: w.repo.dir, Stdin: strings.NewReader(in.String()),
		Args: []string{"cat-file", "-z", "--batch-check=%(objecttype)"}})
	if err != nil {
		return nil, fmt.Errorf("look up the paths to reset: %w", err)
	}
	lines := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(lines) != len(commits)*len(paths) {
		return nil, fmt.Errorf("look up the paths to reset: %d answers to %d questions", len(lines), len(commits)*len(paths))
	}
	types := map[string]map[string]string{}
	for i, c := range commits {
		types[c] = map[string]string{}
		for j, p := range paths {
			switch l := lines[i*len(paths)+j]; {
			case l == "blob" || l == "tree":
				types[c][p] = l
			case strings.HasSuffix(l, " missing"):
			default:
				return nil, fmt.Errorf("look up %s in %s: %q", p, gitcmd.Short(c), l)
			}
		}
	}
	return types, nil
}

// removeChanged removes what is at p (relative to the worktree), checking
// first that every folder above it is one: anything else there would be a
// change the monitor did not report.
func (w *Worktree) removeChanged(p string) error {
	if p == "" || p == ".git" || strings.HasPrefix(p, ".git/") || path.IsAbs(p) || path.Clean(p) != p || strings.HasPrefix(p, "../") {
		return fmt.Errorf("will not reset path %q", p)
	}
	d := w.Dir()
	parts := strings.Split(p, "/")
	for _, part := range parts[:len(parts)-1] {
		d = filepath.Join(d, part)
		fi, err := os.Lstat(d)
		if errors.Is(err, os.ErrNotExist) {
			return nil // nothing there to remove
		}
		if err != nil {
			return fmt.Errorf("reset %s: %w", p, err)
		}
		if !fi.IsDir() {
			return fmt.Errorf("reset %s: %s is not a folder", p, d)
		}
	}
	if err := os.RemoveAll(filepath.Join(w.Dir(), filepath.FromSlash(p))); err != nil {
		return fmt.Errorf("reset %s: %w", p, err)
	}
	return nil
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
			return fmt.Errorf("check out %s: %w", gitcmd.Short(head), err)
		}
	}
	lap("checkout")
	if _, err := w.git(ctx, nil, "clean", "-ffdxq"); err != nil {
		return fmt.Errorf("remove untracked files: %w", err)
	}
	lap("clean")
	return w.settle(ctx, head, lap, cut, watched, nil)
}
