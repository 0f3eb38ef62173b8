package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// resetPaths is the narrowed reset: the worktree's index holds from (the
// restored saved index), and every path where the files may differ from it
// is in changed (the monitor vouches for that). It removes whatever is at
// the changed paths and at those where from and head differ, then restores
// head's entries there, index and files, in one `git restore`: what
// checkout --force and clean -ffdx would do, in proportion to the change.
// It returns those paths (the scope the checks look at) or why the whole
// worktree must be reset instead.
func (w *Worktree) resetPaths(ctx context.Context, from, head string, changed []string) ([]string, error) {
	set := map[string]bool{}
	for _, p := range changed {
		set[p] = true
	}
	known := map[string]bool{} // paths in from's index or in head, and the folders above them
	if from != head {
		out, err := w.repo.git.Run(ctx, Cmd{Dir: w.repo.dir, Args: []string{"diff-tree", "-r", "-z", "--no-renames", "--no-commit-id", from, head}})
		if err != nil {
			return nil, fmt.Errorf("compare %s with %s: %w", short(head), short(from), err)
		}
		entries, err := parseEntries(out, true)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			p := e.path
			if rulesFile(p) {
				return nil, fmt.Errorf("%s changes %s", short(head), p)
			}
			set[p] = true
			addKnown(known, p) // in from's index, or in head
		}
	}
	var scope []string
	for p := range set {
		if !coveredBy(set, p) {
			scope = append(scope, p)
		}
	}
	sort.Strings(scope)
	if len(scope) > maxNarrowPaths {
		return nil, fmt.Errorf("%d paths to reset (more than %d)", len(scope), maxNarrowPaths)
	}
	if err := writeAtomic(filepath.Join(w.admin(), "HEAD"), []byte(head+"\n")); err != nil {
		return nil, fmt.Errorf("move HEAD to %s: %w", short(head), err)
	}
	if len(scope) == 0 {
		return scope, nil
	}
	listed, err := w.gitRaw(ctx, nil, nil, append([]string{"--literal-pathspecs", "ls-files", "--cached", "-z", "--"}, scope...)...)
	if err != nil {
		return nil, fmt.Errorf("list the index's entries to reset: %w", err)
	}
	for _, p := range splitZ(string(listed)) {
		addKnown(known, p)
	}
	var restore strings.Builder
	for _, p := range scope {
		if err := w.removeChanged(p); err != nil {
			return nil, err
		}
		if known[p] { // git refuses a pathspec that matches nothing it knows
			restore.WriteString(p + "\x00")
		}
	}
	if restore.Len() > 0 {
		// No overlay (restore's default): entries under the paths that
		// head lacks leave the index too.
		if _, err := w.gitRaw(ctx, nil, strings.NewReader(restore.String()), "--literal-pathspecs", "restore", "--quiet",
			"--source="+head, "--staged", "--worktree", "--no-recurse-submodules", "--pathspec-from-file=-", "--pathspec-file-nul"); err != nil {
			return nil, fmt.Errorf("restore the changed paths from %s: %w", short(head), err)
		}
	}
	// Folders left empty go, as checkout and clean -d remove them.
	for _, p := range scope {
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

// addKnown adds p and every folder above it to known.
func addKnown(known map[string]bool, p string) {
	for ; p != "." && p != "/" && !known[p]; p = path.Dir(p) {
		known[p] = true
	}
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
