package workspace

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"strings"

	"drover/internal/gitcmd"
	"drover/internal/protocol"
)

// PublishRef is the one ref a publication bundle advertises.
const PublishRef = "refs/drover/publish"

// snapshot is the worktree's files recorded as a tree on top of parent.
type snapshot struct {
	parent string
	tree   string
	commit string // set once committed
	index  string // temporary index holding tree, with fresh stat data
	// mon and cut: the monitor that watched while the files were read, and
	// its cut when reading began (nil when none watched).
	mon *monitor
	cut uint64
	how string // "narrowed" or "full scan", for tests and logs
}

func (s *snapshot) drop() {
	if s != nil && s.index != "" {
		os.Remove(s.index)
	}
}

// snapshot records the worktree's files as a tree, compared with parent's:
// nil when they are equal. Untracked files are included, ignored ones are
// not, executable bits and symlinks are kept; nested repositories
// (gitlinks) are left out and logged. A temporary index is used, seeded from
// the runner's saved one so that only changed files are read: the agent's
// own index, HEAD and commits play no part. When the worktree's monitor
// vouches for every change since the saved index, git looks only at the
// changed paths (see addChanges). Call with the clone lock held.
func (w *Worktree) snapshot(ctx context.Context, parent string) (*snapshot, error) {
	s, err := w.recordFiles(ctx, parent)
	if err != nil {
		return nil, err
	}
	parentTree, err := w.repo.git.Out(ctx, w.repo.dir, "rev-parse", "--verify", parent+"^{tree}")
	if err != nil {
		s.drop()
		return nil, fmt.Errorf("read tree of %s: %w", gitcmd.Short(parent), err)
	}
	if s.tree == parentTree {
		s.drop()
		return nil, nil
	}
	return s, nil
}

// recordFiles is snapshot without the comparison with parent.
func (w *Worktree) recordFiles(ctx context.Context, parent string) (*snapshot, error) {
	if err := w.c.sanitize(w.repo); err != nil {
		return nil, err
	}
	if err := w.writeAdmin(); err != nil {
		return nil, err
	}
	f, err := os.CreateTemp(w.repo.trees, w.name+".tmpindex-")
	if err != nil {
		return nil, fmt.Errorf("make temporary index: %w", err)
	}
	f.Close()
	s := &snapshot{parent: parent, index: f.Name()}
	ok := false
	defer func() {
		if !ok {
			s.drop()
		}
	}()
	env := []string{"GIT_INDEX_FILE=" + s.index}
	lap := w.c.stopwatch("snapshot worktree", "dir", w.Dir())
	exact, err := w.tempIndex(ctx, env, s.index, parent)
	if err != nil {
		return nil, err
	}
	lap("temporary index")
	if err := w.addChanges(ctx, env, s, exact); err != nil {
		return nil, err
	}
	lap("add")
	if s.how != "narrowed" {
		if err := w.dropGitlinks(ctx, env, parent); err != nil {
			return nil, err
		}
	}
	if s.tree, err = w.git(ctx, env, "write-tree"); err != nil {
		return nil, fmt.Errorf("write tree: %w", err)
	}
	lap("write tree")
	ok = true
	return s, nil
}

// tempIndex makes a temporary index at path holding parent's tree, seeded
// from the runner's saved index so that its stat data spares re-reading
// unchanged files; the saved index is used as is when it already holds
// parent, and exact reports that.
func (w *Worktree) tempIndex(ctx context.Context, env []string, path, parent string) (exact bool, err error) {
	switch {
	case checkCommitID(w.rec.IndexHead) != nil || copyFile(w.path(".index"), path) != nil:
		os.Remove(path)
		_, err = w.git(ctx, env, "read-tree", parent)
	case w.rec.IndexHead != parent:
		// One tree with -m keeps the stat data of entries that match it.
		_, err = w.git(ctx, env, "read-tree", "-m", parent)
	default:
		exact = true
	}
	if err != nil {
		return false, fmt.Errorf("read %s into a temporary index: %w", gitcmd.Short(parent), err)
	}
	return exact, nil
}

// addChanges brings the temporary index (a copy of the saved one when
// exact) to the worktree's files: what `git add --all` records. With a
// monitor that saw every change since the saved index was written, only
// the changed paths are handed to git; on any doubt, or if that fails,
// git scans the whole worktree.
func (w *Worktree) addChanges(ctx context.Context, env []string, s *snapshot, exact bool) error {
	// The cut is taken before git reads anything, so a full scan too, once
	// adopted, is a base for the monitor.
	paths, cut, why := w.vouched(false)
	if w.mon != nil {
		s.mon, s.cut = w.mon, cut
	}
	if why == "" && !exact {
		why = "the saved index does not hold the parent"
	}
	if why == "" {
		err := w.addPaths(ctx, env, s, paths)
		if err == nil {
			s.how = "narrowed"
			w.c.log.Debug("publication narrowed by the file-system monitor", "dir", w.Dir(), "paths", len(paths))
			return nil
		}
		why = "the narrowed add failed: " + err.Error()
		if _, err := w.tempIndex(ctx, env, s.index, s.parent); err != nil {
			return err
		}
	}
	s.how = "full scan"
	w.c.log.Debug("publication scans the whole worktree", "dir", w.Dir(), "why", why)
	if len(w.rec.Sparse) > 0 {
		// git's add leaves alone every path outside the sparse checkout,
		// so that what is not checked out is not taken for deleted, and
		// refuses the whole add when the agent wrote files there. Those are
		// first added (or updated) with --sparse, recording no removal.
		if _, err := w.git(ctx, env, "add", "--sparse", "--ignore-removal", "--", "."); err != nil {
			return fmt.Errorf("record the worktree's files outside the sparse checkout: %w", err)
		}
	}
	if _, err := w.git(ctx, env, "add", "--all"); err != nil {
		return fmt.Errorf("record the worktree's files: %w", err)
	}
	return nil
}

// vouched is the one rule by which the monitor's record stands in for a
// look at the whole worktree (a publication's `git add --all`, a reset's
// checkout, clean and checks): the monitor ran since the saved index was
// written (for a reset: since the worktree was last verified exactly a
// commit, as a publication's index leaves ignored files out) and lost
// nothing since, and few enough paths changed. It returns those paths,
// folded (a folder stands for everything under it) and sorted, and the
// monitor's cut (taken even when it cannot vouch), or why the whole
// worktree must be looked at.
func (w *Worktree) vouched(forReset bool) (paths []string, cut uint64, why string) {
	if w.mon == nil {
		return nil, 0, "no file-system monitor"
	}
	paths, cut, why = w.mon.narrow(forReset)
	if why == "" && checkCommitID(w.rec.IndexHead) != nil {
		return nil, cut, "no saved index"
	}
	return paths, cut, why
}

// addPaths runs `git add --all` limited to paths (literal pathspecs: a
// name with * or [ is itself), which records what the full add would under
// them. git refuses a pathspec that names an ignored file (or lies in an
// ignored folder) or that neither exists nor is in the index (a file made
// and deleted). Then the temporary index is started again and git is given
// exactly what it would record under paths: the index entries there
// (deleted ones too) and the untracked files that are not ignored, as
// `ls-files` lists them with the same rules.
//
// Nested repositories, which `git add` records as gitlinks, make the
// monitor give up (see watchTree), so no gitlink can appear here and
// dropGitlinks is not needed.
func (w *Worktree) addPaths(ctx context.Context, env []string, s *snapshot, paths []string) error {
	if len(paths) == 0 {
		return nil
	}
	gitDirs := []string{"--git-dir=" + w.admin(), "--work-tree=" + w.Dir(), "--literal-pathspecs"}
	add := func(paths []string) error {
		args := append(gitDirs, "add", "--all", "--pathspec-from-file=-", "--pathspec-file-nul")
		in := strings.Join(paths, "\x00") + "\x00"
		_, err := w.repo.git.Run(ctx, gitcmd.Cmd{Dir: w.Dir(), Env: env, Args: args, Stdin: strings.NewReader(in)})
		return err
	}
	err := add(paths)
	if err == nil {
		return nil
	}
	w.c.log.Debug("narrowed add refused; listing what it may add", "dir", w.Dir(), "err", err)
	if _, err := w.tempIndex(ctx, env, s.index, s.parent); err != nil {
		return err
	}
	args := append(append(gitDirs, "ls-files", "-z", "--cached", "--others", "--exclude-standard", "--"), paths...)
	out, err := w.repo.git.Run(ctx, gitcmd.Cmd{Dir: w.Dir(), Env: env, Args: args})
	if err != nil {
		return fmt.Errorf("list changed paths: %w", err)
	}
	seen := map[string]bool{}
	var listed []string
	for _, p := range strings.Split(string(out), "\x00") {
		if p != "" && !seen[p] {
			seen[p] = true
			listed = append(listed, p)
		}
	}
	if len(listed) == 0 {
		return nil
	}
	if err := add(listed); err != nil {
		return fmt.Errorf("add changed paths: %w", err)
	}
	return nil
}

// dropGitlinks takes out of the temporary index the nested repositories
// `git add` turned into gitlinks: drover publishes no submodules.
func (w *Worktree) dropGitlinks(ctx context.Context, env []string, parent string) error {
	out, err := w.repo.git.Run(ctx, gitcmd.Cmd{Dir: w.Dir(), Env: env, Args: []string{"--git-dir=" + w.admin(), "--work-tree=" + w.Dir(),
		"diff-index", "--cached", "-r", "-z", "--no-renames", parent}})
	if err != nil {
		return fmt.Errorf("list changes: %w", err)
	}
	entries, err := parseTreeEntries(out)
	if err != nil {
		return err
	}
	var drop []string
	for _, e := range entries {
		if e.mode == "160000" {
			drop = append(drop, e.path)
		}
	}
	if len(drop) == 0 {
		return nil
	}
	w.c.log.Warn("not publishing nested git repositories (submodules)", "job", w.rec.Job, "paths", drop)
	in := strings.Join(drop, "\x00") + "\x00"
	if _, err := w.repo.git.Run(ctx, gitcmd.Cmd{Dir: w.Dir(), Env: env, Stdin: strings.NewReader(in), Args: []string{"--git-dir=" + w.admin(), "--work-tree=" + w.Dir(),
		"update-index", "--force-remove", "-z", "--stdin"}}); err != nil {
		return fmt.Errorf("leave out nested repositories: %w", err)
	}
	return nil
}

// CommitInfo describes a publication.
type CommitInfo struct {
	Job       string
	Attempt   string
	Requester string // the commit's author (REQUESTER@drover); drover is the committer
}

// Commit records the worktree's files as a commit on top of Head(), with
// the requester as author, drover as committer and the job and attempt in
// trailers. It returns "" when nothing differs from Head(). Until Adopt,
// the same files give the same commit, so a publication resent after a
// lost reply is the same commit.
func (w *Worktree) Commit(ctx context.Context, info CommitInfo) (string, error) {
	var commit string
	err := w.c.withLock(ctx, w.repo, lockClone, func() error {
		snap, err := w.snapshot(ctx, w.rec.Head)
		if err != nil || snap == nil {
			return err
		}
		if p := w.pending; p != nil && p.parent == snap.parent && p.tree == snap.tree {
			snap.drop()
			commit = p.commit
			return nil
		}
		msg := fmt.Sprintf("drover: result of job %s\n\nDrover-Job: %s\nDrover-Attempt: %s\n", info.Job, info.Job, info.Attempt)
		if snap.commit, err = w.commitTree(ctx, snap.tree, []string{snap.parent}, info.Requester, msg); err != nil {
			snap.drop()
			return err
		}
		w.dropPending()
		w.pending, commit = snap, snap.commit
		return nil
	})
	if err != nil {
		return "", fmt.Errorf("commit work of %s: %w", info.Job, err)
	}
	return commit, nil
}

// commitTree writes a commit of tree; author is a user name, drover commits.
func (w *Worktree) commitTree(ctx context.Context, tree string, parents []string, author, msg string) (string, error) {
	author = strings.Map(func(r rune) rune {
		if r == '<' || r == '>' || r == '\n' || r == '\r' || r == 0 {
			return -1
		}
		return r
	}, author)
	if strings.TrimSpace(author) == "" {
		author = "unknown"
	}
	args := []string{"commit-tree", "--no-gpg-sign", tree}
	for _, p := range parents {
		args = append(args, "-p", p)
	}
	env := []string{
		"GIT_AUTHOR_NAME=" + author, "GIT_AUTHOR_EMAIL=" + author + "@drover",
		"GIT_COMMITTER_NAME=drover", "GIT_COMMITTER_EMAIL=drover@drover",
	}
	out, err := w.repo.git.Run(ctx, gitcmd.Cmd{Dir: w.repo.dir, Args: args, Env: env, Stdin: strings.NewReader(msg)})
	if err != nil {
		return "", fmt.Errorf("commit tree: %w", err)
	}
	return strings.TrimSpace(string(out)), nil
}

func (w *Worktree) dropPending() {
	w.pending.drop()
	w.pending = nil
}

// Publication is a bundle ready to upload.
type Publication struct {
	Path   string
	Commit string
	Parent string // the job's head the commit is on; the bundle's only prerequisite
	Size   int64
	SHA256 string // hex
}

// ErrTooLarge is a transfer over its cap.
var ErrTooLarge = errors.New("transfer too large")

// Bundle writes the commit made by Commit to path as a git bundle that
// holds only the new objects (Head() is its prerequisite) and advertises
// one ref, PublishRef. A bundle over limit bytes is refused with ErrTooLarge.
func (w *Worktree) Bundle(ctx context.Context, commit, path string, limit int64) (Publication, error) {
	if w.pending == nil || w.pending.commit != commit {
		return Publication{}, fmt.Errorf("bundle %s: not the worktree's pending publication", gitcmd.Short(commit))
	}
	if limit <= 0 {
		limit = protocol.DefaultTransferCap
	}
	b := Publication{Path: path, Commit: commit, Parent: w.pending.parent}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return b, fmt.Errorf("bundle %s: %w", gitcmd.Short(commit), err)
	}
	cw := &cappedWriter{w: f, h: sha256.New(), limit: limit}
	err = w.c.withLock(ctx, w.repo, lockClone, func() error {
		if _, err := w.repo.git.Run(ctx, gitcmd.Cmd{Dir: w.repo.dir, Args: []string{"update-ref", PublishRef, commit}}); err != nil {
			return err
		}
		_, err := w.repo.git.Run(ctx, gitcmd.Cmd{Dir: w.repo.dir, Stdout: cw, Args: []string{"bundle", "create", "--quiet", "-", PublishRef, "^" + b.Parent}})
		if _, derr := w.repo.git.Run(ctx, gitcmd.Cmd{Dir: w.repo.dir, Args: []string{"update-ref", "-d", PublishRef}}); err == nil {
			err = derr
		}
		return err
	})
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if cw.over {
		os.Remove(path)
		return b, fmt.Errorf("the result of %s is over the transfer cap of %d MiB (%w): publish smaller changes, or map the project to a remote URL so that sources do not travel through the hub", w.rec.Job, limit>>20, ErrTooLarge)
	}
	if err != nil {
		os.Remove(path)
		return b, fmt.Errorf("bundle %s: %w", gitcmd.Short(commit), err)
	}
	b.Size, b.SHA256 = cw.n, hex.EncodeToString(cw.h.Sum(nil))
	return b, nil
}

// cappedWriter writes and hashes, and fails past limit so that git stops.
type cappedWriter struct {
	w     io.Writer
	h     hash.Hash
	n     int64
	limit int64
	over  bool
}

func (c *cappedWriter) Write(p []byte) (int, error) {
	if c.n+int64(len(p)) > c.limit {
		c.over = true
		return 0, ErrTooLarge
	}
	n, err := c.w.Write(p)
	c.h.Write(p[:n])
	c.n += int64(n)
	return n, err
}

// Adopt makes head the job's head: after the hub accepted the commit made
// by Commit, or after it answered that it already holds a newer head (an
// earlier reply was lost). A head not made here is fetched unless present
// and must descend from the last head known; the next Commit then
// publishes only what that head lacks.
func (w *Worktree) Adopt(ctx context.Context, head string) error {
	if err := checkCommitID(head); err != nil {
		return fmt.Errorf("adopt head: %w", err)
	}
	if head == w.rec.Head {
		return nil
	}
	if p := w.pending; p != nil && p.commit == head {
		w.rec.Head = head
		if err := os.Rename(p.index, w.path(".index")); err == nil {
			w.rec.IndexHead = head
			if p.mon != nil && p.mon == w.mon {
				w.mon.rebase(p.cut, false)
			}
		}
		w.pending = nil
		return w.save()
	}
	err := w.c.withLock(ctx, w.repo, lockClone, func() error {
		if err := w.c.ensureCommit(ctx, w.repo, w.src, head); err != nil {
			return err
		}
		ok, err := gitcmd.IsAncestor(ctx, w.repo.git, w.repo.dir, nil, w.rec.Head, head)
		if err == nil && !ok {
			err = fmt.Errorf("the hub's head %s does not descend from %s, the last head this runner knew", gitcmd.Short(head), gitcmd.Short(w.rec.Head))
		}
		return err
	})
	if err != nil {
		return fmt.Errorf("adopt head %s of %s: %w", gitcmd.Short(head), w.rec.Job, err)
	}
	w.c.log.Info("adopted the hub's newer head", "job", w.rec.Job, "from", gitcmd.Short(w.rec.Head), "to", gitcmd.Short(head))
	w.dropPending()
	w.rec.Head = head
	return w.save()
}

// DiffStat summarizes what a commit changes against its first parent, for
// the attempt's log.
func (w *Worktree) DiffStat(ctx context.Context, commit string) (string, error) {
	out, err := w.repo.git.Run(ctx, gitcmd.Cmd{Dir: w.repo.dir, Args: []string{"diff-tree", "--no-commit-id", "--shortstat", commit}})
	return string(bytes.TrimSpace(out)), err
}
