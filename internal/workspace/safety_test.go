package workspace

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// An agent can write to the clone (it commits through its worktree), so it
// can arm hooks and filter drivers there and declare filters in attributes.
// None of them may ever run in the runner's own git calls: publication,
// observe checks, recycling the worktree for the next job.
func TestHooksAndFiltersNeverRun(t *testing.T) {
	f := newCacheFixture(t)
	base := f.commit(map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	next := f.commit(map[string]string{"a.txt": "next\n", "c.txt": "c\n"})
	w := f.prepare(f.cache, "job1", base)

	marks := t.TempDir()
	evil := filepath.Join(marks, "evil.sh")
	write(t, evil, "#!/bin/sh\ntouch \""+marks+"/ran-$(basename \"$0\")-$1\"\ncat\n", 0o755)
	clone := filepath.Join(f.home, "repos", "proj.git")
	for _, hook := range []string{"post-checkout", "pre-commit", "post-commit", "reference-transaction", "post-index-change", "pre-auto-gc"} {
		noErr(t, os.Symlink(evil, filepath.Join(clone, "hooks", hook)))
	}
	f.sh(w.Dir(), `
		git config --file `+clone+`/config filter.evil.clean "`+evil+` clean"
		git config --file `+clone+`/config filter.evil.smudge "`+evil+` smudge"
		git config --file `+clone+`/config filter.evil.required true
		git config --file `+clone+`/config core.hooksPath `+clone+`/hooks
		git config --file `+clone+`/config core.fsmonitor "`+evil+` fsmonitor"
		git config --worktree core.hooksPath `+clone+`/hooks
		echo "* filter=evil" > .gitattributes
		echo "* filter=evil" > `+clone+`/info/attributes
		echo changed > a.txt
	`)
	// The traps are armed: plain git in the worktree runs them.
	f.sh(w.Dir(), "echo probe > probe.txt && git add probe.txt && git rm -q --cached probe.txt && rm probe.txt")
	if ran, _ := filepath.Glob(filepath.Join(marks, "ran-*")); len(ran) == 0 {
		t.Fatal("control: plain git did not run the armed filter or hooks")
	}
	for _, m := range must1(filepath.Glob(filepath.Join(marks, "ran-*"))) {
		noErr(t, os.Remove(m))
	}

	commit, err := w.Commit(f.ctx, testInfo)
	noErr(t, err)
	if got := f.git(f.src, "--git-dir="+clone, "cat-file", "blob", commit+":a.txt"); got != "changed" {
		t.Fatalf("a.txt published as %q: a clean filter ran", got)
	}
	if _, err := w.Changes(f.ctx); err != nil {
		t.Fatal(err)
	}
	noErr(t, w.Release(f.ctx))
	w2 := f.prepare(f.cache, "job2", next) // recycles the same worktree: checkout, clean, status
	noErr(t, w2.Keep())
	if b, err := os.ReadFile(filepath.Join(w2.Dir(), "a.txt")); err != nil || string(b) != "next\n" {
		t.Fatalf("a.txt checked out as %q (%v): a smudge filter ran", b, err)
	}
	if ran, _ := filepath.Glob(filepath.Join(marks, "ran-*")); len(ran) > 0 {
		t.Fatalf("repository code ran on the runner: %v", ran)
	}
	// The poisoned config was put back to drover's own.
	if cfg, err := os.ReadFile(filepath.Join(clone, "config")); err != nil || strings.Contains(string(cfg), "evil") {
		t.Fatalf("clone config after use: %s %v", cfg, err)
	}
}

func must1[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}
