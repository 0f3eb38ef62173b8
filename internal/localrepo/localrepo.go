// Package localrepo is the CLI's side of git: a user's own repository, the
// source of `drover run --repo` and the target of `drover fetch`.
package localrepo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"drover/internal/gitcmd"
)

// Checkout is a user's repository on the machine the CLI runs on: the
// source of `drover run --repo` and the target of `drover fetch`. Its git
// calls get the same sanitized environment as every other; the user's own
// global ignore file is honoured when Excludes names it.
type Checkout struct {
	Git      gitcmd.Git
	Dir      string // top level of the working tree (or a bare repository)
	Excludes string // core.excludesFile to apply, "" for none
}

// Open finds the working tree that holds dir.
func Open(ctx context.Context, g gitcmd.Git, dir, excludes string) (Checkout, error) {
	top, err := g.Out(ctx, dir, "rev-parse", "--show-toplevel")
	if err != nil || top == "" {
		return Checkout{}, fmt.Errorf("%s is not inside a git working tree", dir)
	}
	return Checkout{Git: g, Dir: top, Excludes: excludes}, nil
}

// TempRepo makes an empty bare repository in a temporary directory, for
// commands that need objects but no working tree (drover diff outside a
// repository). remove deletes it.
func TempRepo(ctx context.Context, g gitcmd.Git) (c Checkout, remove func(), err error) {
	dir, err := os.MkdirTemp("", "drover-repo-")
	if err != nil {
		return Checkout{}, nil, fmt.Errorf("make a temporary repository: %w", err)
	}
	remove = func() { os.RemoveAll(dir) }
	if _, err := g.Run(ctx, gitcmd.Cmd{Dir: dir, Args: []string{"init", "--bare", "--quiet", dir}}); err != nil {
		remove()
		return Checkout{}, nil, fmt.Errorf("make a temporary repository: %w", err)
	}
	return Checkout{Git: g, Dir: dir}, remove, nil
}

// run runs git in the checkout with extra environment.
func (c Checkout) run(ctx context.Context, env []string, stdout io.Writer, args ...string) (string, error) {
	if c.Excludes != "" {
		args = append([]string{"-c", "core.excludesFile=" + c.Excludes}, args...)
	}
	out, err := c.Git.Run(ctx, gitcmd.Cmd{Dir: c.Dir, Env: env, Stdout: stdout, Args: args})
	return strings.TrimSpace(string(out)), err
}

// Resolve returns the full id of the commit rev names.
func (c Checkout) Resolve(ctx context.Context, rev string) (string, error) {
	id, err := c.run(ctx, nil, nil, "rev-parse", "--verify", "--quiet", "--end-of-options", rev+"^{commit}")
	if err != nil || !gitcmd.ValidCommitID(id) {
		return "", fmt.Errorf("%q does not name a commit in %s", rev, c.Dir)
	}
	return id, nil
}

// Changes lists what differs from HEAD: tracked paths that are modified,
// staged, deleted or renamed, and untracked paths that are not ignored.
func (c Checkout) Changes(ctx context.Context) (tracked, untracked []string, err error) {
	var out bytes.Buffer
	if _, err := c.run(ctx, nil, &out, "status", "--porcelain=v1", "-z", "--untracked-files=all", "--ignore-submodules=none"); err != nil {
		return nil, nil, fmt.Errorf("read the status of %s: %w", c.Dir, err)
	}
	ents := strings.Split(out.String(), "\x00")
	for i := 0; i < len(ents); i++ {
		e := ents[i]
		if len(e) < 4 {
			continue
		}
		xy, p := e[:2], e[3:]
		switch {
		case xy == "??":
			untracked = append(untracked, p)
		default:
			tracked = append(tracked, p)
			if xy[0] == 'R' || xy[0] == 'C' {
				i++ // the source path follows
			}
		}
	}
	return tracked, untracked, nil
}

// Snapshot commits the working tree as it is (tracked files and untracked
// files that are not ignored) on top of HEAD, without touching the user's
// index, HEAD or branches: it stages into a temporary copy of the index and
// uses commit-tree. It returns HEAD itself when nothing differs.
func (c Checkout) Snapshot(ctx context.Context, message string) (string, error) {
	head, err := c.Resolve(ctx, "HEAD")
	if err != nil {
		return "", fmt.Errorf("snapshot %s: the repository has no commit to build on", c.Dir)
	}
	tmp, err := os.MkdirTemp("", "drover-index-")
	if err != nil {
		return "", fmt.Errorf("snapshot: %w", err)
	}
	defer os.RemoveAll(tmp)
	index := filepath.Join(tmp, "index")
	// Starting from a copy of the real index reuses its file stat data, so
	// only changed files are hashed again.
	real, err := c.run(ctx, nil, nil, "rev-parse", "--path-format=absolute", "--git-path", "index")
	if err != nil {
		return "", fmt.Errorf("snapshot: find the index: %w", err)
	}
	env := []string{"GIT_INDEX_FILE=" + index}
	if b, err := os.ReadFile(real); err == nil {
		if err := os.WriteFile(index, b, 0o600); err != nil {
			return "", fmt.Errorf("snapshot: copy the index: %w", err)
		}
	} else if _, err := c.run(ctx, env, nil, "read-tree", head); err != nil {
		return "", fmt.Errorf("snapshot: %w", err)
	}
	if _, err := c.run(ctx, env, nil, "add", "--all", "--", "."); err != nil {
		return "", fmt.Errorf("snapshot: stage the working tree: %w", err)
	}
	tree, err := c.run(ctx, env, nil, "write-tree")
	if err != nil {
		return "", fmt.Errorf("snapshot: write the tree: %w", err)
	}
	if headTree, err := c.run(ctx, nil, nil, "rev-parse", head+"^{tree}"); err == nil && headTree == tree {
		return head, nil
	}
	id, err := c.run(ctx, nil, nil, "commit-tree", tree, "-p", head, "-m", message)
	if err != nil {
		return "", fmt.Errorf("snapshot: commit: %w", err)
	}
	return id, nil
}

// Push sends commit to ref at url. Git's negotiation sends only the objects
// the other side lacks.
func (c Checkout) Push(ctx context.Context, url, token, commit, ref string) error {
	if _, err := c.run(ctx, gitcmd.HeaderEnv(token), nil, "push", "--quiet", "--no-verify", "--end-of-options", url, commit+":"+ref); err != nil {
		return fmt.Errorf("push %s to %s: %w", gitcmd.Short(commit), url, err)
	}
	return nil
}

// FetchRef fetches remoteRef from url into localRef (replacing it),
// validating every object, and returns the commit it points at.
func (c Checkout) FetchRef(ctx context.Context, url, token, remoteRef, localRef string) (string, error) {
	if _, err := c.run(ctx, gitcmd.HeaderEnv(token), nil, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head",
		"--no-recurse-submodules", "--end-of-options", url, "+"+remoteRef+":"+localRef); err != nil {
		return "", fmt.Errorf("fetch %s from %s: %w", remoteRef, url, err)
	}
	id, err := gitcmd.RefValue(ctx, c.Git, c.Dir, localRef)
	if err != nil {
		return "", err
	}
	if id == "" {
		return "", fmt.Errorf("fetch %s from %s: nothing arrived", remoteRef, url)
	}
	return id, nil
}

// DeleteRef removes a ref if it exists.
func (c Checkout) DeleteRef(ctx context.Context, ref string) error {
	if _, err := c.run(ctx, nil, nil, "update-ref", "-d", ref); err != nil {
		return fmt.Errorf("delete %s: %w", ref, err)
	}
	return nil
}

// IsAncestor reports whether commit a is an ancestor of (or equal to) b.
func (c Checkout) IsAncestor(ctx context.Context, a, b string) (bool, error) {
	return gitcmd.IsAncestor(ctx, c.Git, c.Dir, nil, a, b)
}

// Branch outcomes of UpdateBranch.
const (
	BranchCreated       = "created"
	BranchFastForwarded = "fast-forwarded"
	BranchUpToDate      = "up to date"
)

// UpdateBranch points branch at commit if that loses nothing: it creates
// the branch, or fast-forwards it when commit contains its tip (updating
// the working tree when the branch is checked out here and clean). A
// branch that moved elsewhere, local changes, or the branch checked out in
// another worktree are refused (a *gitcmd.Refusal); nothing is overwritten.
func (c Checkout) UpdateBranch(ctx context.Context, branch, commit string) (string, error) {
	if _, err := c.run(ctx, nil, nil, "check-ref-format", "--branch", branch); err != nil || strings.HasPrefix(branch, "-") {
		return "", gitcmd.Refusef("%q is not a valid branch name", branch)
	}
	ref := "refs/heads/" + branch
	cur, err := gitcmd.RefValue(ctx, c.Git, c.Dir, ref)
	if err != nil {
		return "", err
	}
	switch {
	case cur == "":
		if _, err := c.run(ctx, nil, nil, "update-ref", "-m", "drover fetch", ref, commit, gitcmd.ZeroID); err != nil {
			return "", fmt.Errorf("create branch %s: %w", branch, err)
		}
		return BranchCreated, nil
	case cur == commit:
		return BranchUpToDate, nil
	}
	ok, err := c.IsAncestor(ctx, cur, commit)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", gitcmd.Refusef("branch %s has moved: its tip %s is not part of the result %s; nothing was changed (pick another --branch, or move the branch back)",
			branch, gitcmd.Short(cur), gitcmd.Short(commit))
	}
	where, err := c.checkedOutAt(ctx, ref)
	if err != nil {
		return "", err
	}
	switch {
	case where == "":
		if _, err := c.run(ctx, nil, nil, "update-ref", "-m", "drover fetch", ref, commit, cur); err != nil {
			return "", fmt.Errorf("fast-forward branch %s: %w", branch, err)
		}
	case filepath.Clean(where) != filepath.Clean(c.Dir):
		return "", gitcmd.Refusef("branch %s is checked out in %s; run drover fetch there, or pick another --branch", branch, where)
	default:
		tracked, _, err := c.Changes(ctx)
		if err != nil {
			return "", err
		}
		if len(tracked) > 0 {
			return "", gitcmd.Refusef("branch %s is checked out here with local changes (%s); commit or stash them first, nothing was changed",
				branch, ListPaths(tracked))
		}
		if _, err := c.run(ctx, nil, nil, "merge", "--ff-only", "--quiet", commit); err != nil {
			var ge *gitcmd.Error
			if errors.As(err, &ge) {
				return "", gitcmd.Refusef("fast-forward of the checked-out branch %s failed: %s", branch, ge.Stderr)
			}
			return "", err
		}
	}
	return BranchFastForwarded, nil
}

// checkedOutAt returns the worktree that has ref checked out, "" for none.
func (c Checkout) checkedOutAt(ctx context.Context, ref string) (string, error) {
	out, err := c.run(ctx, nil, nil, "worktree", "list", "--porcelain")
	if err != nil {
		return "", fmt.Errorf("list worktrees: %w", err)
	}
	var wt string
	for _, line := range strings.Split(out, "\n") {
		if p, ok := strings.CutPrefix(line, "worktree "); ok {
			wt = p
		}
		if line == "branch "+ref {
			return wt, nil
		}
	}
	return "", nil
}

// Diff writes the patch from base to head.
func (c Checkout) Diff(ctx context.Context, base, head string, w io.Writer) error {
	if _, err := c.run(ctx, nil, w, "diff", "--no-ext-diff", "--no-textconv", "--no-color", base, head, "--"); err != nil {
		return fmt.Errorf("diff %s..%s: %w", gitcmd.Short(base), gitcmd.Short(head), err)
	}
	return nil
}

// ListPaths shows the first few paths of a list, for messages.
func ListPaths(ps []string) string {
	const most = 10
	if len(ps) <= most {
		return strings.Join(ps, ", ")
	}
	return strings.Join(ps[:most], ", ") + fmt.Sprintf(" and %d more", len(ps)-most)
}

// UserExcludesFile finds the user's global ignore file, which drover's
// sanitized git calls would otherwise not read: core.excludesFile in
// HOME/.gitconfig, else git's default XDG location. "" when there is none.
func UserExcludesFile(ctx context.Context, g gitcmd.Git, home, xdgConfig string) string {
	if home == "" {
		return ""
	}
	if xdgConfig == "" {
		xdgConfig = filepath.Join(home, ".config")
	}
	for _, cfg := range []string{filepath.Join(home, ".gitconfig"), filepath.Join(xdgConfig, "git", "config")} {
		if _, err := os.Stat(cfg); err != nil {
			continue
		}
		p, err := g.Out(ctx, home, "config", "--file", cfg, "--get", "core.excludesFile")
		if err != nil || p == "" {
			continue
		}
		if rest, ok := strings.CutPrefix(p, "~/"); ok {
			p = filepath.Join(home, rest)
		}
		return p
	}
	def := filepath.Join(xdgConfig, "git", "ignore")
	if _, err := os.Stat(def); err == nil {
		return def
	}
	return ""
}
