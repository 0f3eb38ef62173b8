package workspace

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"

	"drover/internal/gitcmd"
)

// checkTree refuses (with a *gitcmd.Refusal) a commit whose tree holds a gitlink
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
		return nil, gitcmd.CheckSourceTree(ctx, r.git, r.dir, commit)
	}
	d, err := diffTrees(ctx, r, since, commit)
	if err != nil {
		// Asked only now, sparing a git call when it is there.
		if !c.hasCommit(ctx, r, since) {
			return nil, gitcmd.CheckSourceTree(ctx, r.git, r.dir, commit)
		}
		return nil, err
	}
	for _, e := range d.entries {
		if e.mode == "160000" {
			return nil, gitcmd.GitlinkRefusal(commit, e.path)
		}
		if e.mode == "000000" || filepath.Base(e.path) != ".gitattributes" {
			continue
		}
		blob, err := r.git.Run(ctx, gitcmd.Cmd{Dir: r.dir, Args: []string{"cat-file", "blob", e.object}})
		if err != nil {
			return nil, fmt.Errorf("read %s of %s: %w", e.path, gitcmd.Short(commit), err)
		}
		if err := gitcmd.CheckAttributes(commit, e.path, blob); err != nil {
			return nil, err
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
	out, err := r.git.Run(ctx, gitcmd.Cmd{Dir: r.dir, Args: []string{"diff-tree", "-r", "-z", "--no-renames", "--no-commit-id", from, to}})
	if err != nil {
		return nil, fmt.Errorf("compare %s with %s: %w", gitcmd.Short(to), gitcmd.Short(from), err)
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
