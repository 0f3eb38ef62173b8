package workspace

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"
)

// unracySavedIndex has git rewrite the saved index when a second has passed
// since it was written (always, once an agent has run), so that no entry is
// racily clean any more and its split index gets a fresh shared part. A fresh checkout saves its index
// within the second its last files were written: git would otherwise
// re-hash each of those entries (thousands) and copy it into the split part
// at the next reset's index write. git smudges a racy entry whose file
// changed meanwhile, so the rewrite can only make an entry look changed;
// the monitor vouches for what was written since the index was saved. The
// new shared part lands in the admin dir (git puts it next to its git dir),
// where the next reset's dropSharedIndexes keeps it. Call with the
// worktree's lock held and no publication pending.
func (w *Worktree) unracySavedIndex(ctx context.Context) error {
	saved := w.path(".index")
	st, err := os.Stat(saved)
	if err != nil {
		return fmt.Errorf("stat saved index: %w", err)
	}
	if time.Now().Before(st.ModTime().Truncate(time.Second).Add(time.Second)) {
		// Still racy: released within the second its index was saved,
		// which only an attempt that ran nothing does. Waiting would hold
		// the runner's slot; the next reset re-reads those entries.
		w.c.log.Debug("saved index not rewritten: written less than a second ago", "dir", w.Dir())
		return nil
	}
	tmp := filepath.Join(w.admin(), "index.unracy")
	defer os.Remove(tmp)
	// copyFile keeps the mtime, which git compares the entries' with.
	if err := copyFile(saved, tmp); err != nil {
		return fmt.Errorf("copy saved index: %w", err)
	}
	env := []string{"GIT_INDEX_FILE=" + tmp}
	for _, arg := range []string{"--no-split-index", "--split-index"} {
		if _, err := w.git(ctx, env, "update-index", arg); err != nil {
			return fmt.Errorf("rewrite saved index (%s): %w", arg, err)
		}
	}
	if err := copyFile(tmp, saved); err != nil {
		return fmt.Errorf("save rewritten index: %w", err)
	}
	return nil
}
