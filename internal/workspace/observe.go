package workspace

import (
	"context"
	"fmt"
	"os"
	"strings"

	"drover/internal/gitcmd"
)

// Changes is what an observe-mode attempt changed in its worktree.
type Changes struct {
	Head    string   // the agent's HEAD when it moved off the job's head ("" when it did not)
	Index   []string // paths whose staged content differs from the job's head
	Tracked []string // tracked files changed, deleted or with another mode
}

// Empty reports that nothing observe mode forbids changed.
func (c Changes) Empty() bool { return c.Head == "" && len(c.Index) == 0 && len(c.Tracked) == 0 }

func (c Changes) String() string {
	var parts []string
	if c.Head != "" {
		parts = append(parts, "HEAD moved to "+c.Head)
	}
	if len(c.Index) > 0 {
		parts = append(parts, "the index stages "+clipList(c.Index, 5))
	}
	if len(c.Tracked) > 0 {
		parts = append(parts, "tracked files changed: "+clipList(c.Tracked, 5))
	}
	if len(parts) == 0 {
		return "nothing changed"
	}
	return strings.Join(parts, "; ")
}

// Changes compares the worktree with the job's head as observe mode needs:
// the agent's HEAD, its index, and every tracked file (read through a
// temporary index of the runner's, so the agent's index cannot hide a
// change). Untracked files do not count.
func (w *Worktree) Changes(ctx context.Context) (Changes, error) {
	var ch Changes
	head := w.rec.Head
	err := w.c.withLock(ctx, w.repo, lockClone, func() error { return w.c.sanitize(w.repo) })
	if err != nil {
		return ch, err
	}
	if err := w.writeAdmin(); err != nil {
		return ch, err
	}
	switch got, err := w.git(ctx, nil, "rev-parse", "--verify", "--quiet", "HEAD^{commit}"); {
	case err != nil || got == "":
		ch.Head = "an unreadable commit"
	case got != head:
		ch.Head = got
	}
	if out, err := w.git(ctx, nil, "diff-index", "--cached", "--name-only", "-z", "--no-renames", head); err != nil {
		ch.Index = []string{"(the index is unreadable: " + err.Error() + ")"}
	} else {
		ch.Index = splitZ(out)
	}
	idx, err := os.CreateTemp(w.repo.trees, w.name+".tmpindex-")
	if err != nil {
		return ch, fmt.Errorf("make temporary index: %w", err)
	}
	idx.Close()
	defer os.Remove(idx.Name())
	env := []string{"GIT_INDEX_FILE=" + idx.Name()}
	if _, err := w.tempIndex(ctx, env, idx.Name(), head); err != nil {
		return ch, err
	}
	// Refresh re-reads files whose stat data changed; exit 1 only means
	// some need updating, which diff-files then lists.
	if _, err := w.git(ctx, env, "update-index", "-q", "--refresh"); err != nil {
		if ge, ok := err.(*gitcmd.Error); !ok || ge.Code != 1 {
			return ch, fmt.Errorf("refresh temporary index: %w", err)
		}
	}
	out, err := w.git(ctx, env, "diff-files", "--name-only", "-z")
	if err != nil {
		return ch, fmt.Errorf("compare tracked files: %w", err)
	}
	ch.Tracked = splitZ(out)
	return ch, nil
}

// Discard puts the worktree back at the job's head, dropping every change:
// tracked, staged, untracked and ignored.
func (w *Worktree) Discard(ctx context.Context) error {
	w.dropPending()
	if err := w.reset(ctx, w.rec.Head, nil); err != nil {
		return fmt.Errorf("discard changes of %s: %w", w.rec.Job, err)
	}
	w.rec.IndexHead = w.rec.Head
	return w.save()
}

func splitZ(s string) []string {
	var out []string
	for _, p := range strings.Split(s, "\x00") {
		if p != "" {
			out = append(out, p)
		}
	}
	return out
}
