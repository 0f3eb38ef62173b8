package workspace

import (
	"crypto/sha256"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

func TestObserveChanges(t *testing.T) {
	f := newCacheFixture(t)
	base := f.commit(map[string]string{".gitignore": "*.o\n", "a.txt": "a\n", "b.txt": "b\n", "run*": "#!/bin/sh\n"})
	for name, c := range map[string]struct {
		script string
		check  func(Changes) bool
	}{
		// each case runs in its own job's worktree
		"untracked and ignored files are allowed": {"echo x > new.txt && echo o > x.o && touch a.txt", Changes.Empty},
		"tracked file edited":                     {"echo z > a.txt", func(c Changes) bool { return slices.Equal(c.Tracked, []string{"a.txt"}) }},
		"tracked file deleted":                    {"rm b.txt", func(c Changes) bool { return slices.Equal(c.Tracked, []string{"b.txt"}) }},
		"exec bit dropped":                        {"chmod -x run", func(c Changes) bool { return slices.Equal(c.Tracked, []string{"run"}) }},
		"edit hidden from the agent's index": {"echo z > a.txt && git update-index --assume-unchanged a.txt",
			func(c Changes) bool { return slices.Equal(c.Tracked, []string{"a.txt"}) }},
		"staged only": {"echo z > a.txt && git add a.txt && git show HEAD:a.txt > a.txt",
			func(c Changes) bool { return slices.Equal(c.Index, []string{"a.txt"}) && len(c.Tracked) == 0 }},
		"HEAD moved": {"git commit -q --allow-empty -m x", func(c Changes) bool { return c.Head != "" && len(c.Tracked) == 0 }},
	} {
		func() {
			w := f.prepare(f.cache, fmt.Sprintf("job%x", sha256.Sum256([]byte(name)))[:12], base)
			defer w.Keep()
			f.sh(w.Dir(), c.script)
			ch, err := w.Changes(f.ctx)
			noErr(t, err)
			if !c.check(ch) {
				t.Fatalf("%s: changes %+v (%s)", name, ch, ch)
			}
			if ch.Empty() {
				return
			}
			noErr(t, w.Discard(f.ctx))
			ch, err = w.Changes(f.ctx)
			noErr(t, err)
			if !ch.Empty() {
				t.Fatalf("%s: after discard: %s", name, ch)
			}
			if _, err := os.Stat(filepath.Join(w.Dir(), "new.txt")); err == nil {
				t.Fatalf("%s: discard kept an untracked file", name)
			}
		}()
	}
}
