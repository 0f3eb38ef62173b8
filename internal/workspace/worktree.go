package workspace

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"drover/internal/gitcmd"
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
	return w.repo.git.Run(ctx, gitcmd.Cmd{Dir: w.Dir(), Args: full, Env: env, Stdin: stdin})
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
			if _, err := w.repo.git.Run(ctx, gitcmd.Cmd{Dir: w.repo.dir, Args: []string{"worktree", "remove", "--force", "--force", w.Dir()}}); err != nil {
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
