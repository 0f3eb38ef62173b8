package workspace

import (
	"bytes"
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
// is in changed (the monitor vouches for that). It brings the index to head
// by the difference of the two commits, removes whatever is at the changed
// paths and those the commits' difference names, and checks out head's
// entries there: what checkout --force and clean -ffdx would do, in
// proportion to the change. It returns those paths (the scope the checks
// look at) or why the whole worktree must be reset instead.
func (w *Worktree) resetPaths(ctx context.Context, from, head string, changed []string) ([]string, error) {
	set := map[string]bool{}
	for _, p := range changed {
		set[p] = true
	}
	var info bytes.Buffer
	if from != head {
		out, err := w.c.git.Run(ctx, Cmd{Dir: w.repo.dir, Args: []string{"diff-tree", "-r", "-z", "--no-renames", "--no-commit-id", from, head}})
		if err != nil {
			return nil, fmt.Errorf("compare %s with %s: %w", short(head), short(from), err)
		}
		del, add, err := indexInfo(out)
		if err != nil {
			return nil, err
		}
		for _, e := range append(del, add...) {
			if rulesFile(e.path) {
				return nil, fmt.Errorf("%s changes %s", short(head), e.path)
			}
			set[e.path] = true
			// Deletions first: a file replaced by a folder of the same
			// name (or the other way round) must leave the index before
			// its successor enters.
			fmt.Fprintf(&info, "%s %s\t%s\x00", e.mode, e.object, e.path)
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
	if info.Len() > 0 {
		if _, err := w.gitRaw(ctx, nil, &info, "update-index", "-z", "--index-info"); err != nil {
			return nil, fmt.Errorf("update the index to %s: %w", short(head), err)
		}
	}
	if err := writeAtomic(filepath.Join(w.admin(), "HEAD"), []byte(head+"\n")); err != nil {
		return nil, fmt.Errorf("move HEAD to %s: %w", short(head), err)
	}
	for _, p := range scope {
		if err := w.removeChanged(p); err != nil {
			return nil, err
		}
	}
	if len(scope) == 0 {
		return scope, nil
	}
	listed, err := w.gitRaw(ctx, nil, nil, append([]string{"--literal-pathspecs", "ls-files", "--cached", "-z", "--"}, scope...)...)
	if err != nil {
		return nil, fmt.Errorf("list entries to check out: %w", err)
	}
	if len(listed) > 0 {
		// -u records the new files' stat data in the index.
		if _, err := w.gitRaw(ctx, nil, bytes.NewReader(listed), "checkout-index", "--force", "-u", "-z", "--stdin"); err != nil {
			return nil, fmt.Errorf("check out changed paths: %w", err)
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

// indexInfo turns `diff-tree -r -z` output into `update-index
// --index-info` entries: the deleted paths (mode 0) and the added or
// changed ones.
func indexInfo(out []byte) (del, add []treeEntry, err error) {
	fields := bytes.Split(bytes.TrimSuffix(out, []byte{0}), []byte{0})
	for i := 0; i < len(fields); i++ {
		f := string(fields[i])
		if f == "" {
			continue
		}
		parts := strings.Fields(strings.TrimPrefix(f, ":"))
		if !strings.HasPrefix(f, ":") || len(parts) != 5 || i+1 >= len(fields) {
			return nil, nil, fmt.Errorf("unexpected diff-tree line %q", f)
		}
		i++
		p := string(fields[i])
		if parts[4] == "D" {
			del = append(del, treeEntry{mode: "0", object: parts[2], path: p})
		} else {
			add = append(add, treeEntry{mode: parts[1], object: parts[3], path: p})
		}
	}
	return del, add, nil
}
