package workspace

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

var testInfo = CommitInfo{Job: "job1", Attempt: "at1", Requester: "alice"}

// publish commits the worktree and bundles the result.
func (f *cacheFixture) publish(w *Worktree) (string, Publication) {
	f.t.Helper()
	commit, err := w.Commit(f.ctx, testInfo)
	noErr(f.t, err)
	if commit == "" {
		return "", Publication{}
	}
	p, err := w.Bundle(f.ctx, commit, filepath.Join(f.t.TempDir(), "pub.bundle"), 0)
	noErr(f.t, err)
	return commit, p
}

// receive imports a bundle into the source repository, as the hub would,
// and returns what its one ref points at.
func (f *cacheFixture) receive(p Publication) string {
	f.t.Helper()
	heads := f.git(f.src, "bundle", "list-heads", p.Path)
	if len(strings.Split(heads, "\n")) != 1 || !strings.HasSuffix(heads, " "+PublishRef) {
		f.t.Fatalf("bundle advertises %q, want exactly %s", heads, PublishRef)
	}
	f.git(f.src, "fetch", "--quiet", p.Path, PublishRef+":refs/drover/jobs/job1")
	return f.git(f.src, "rev-parse", "refs/drover/jobs/job1")
}

func TestPublishRoundTripsModesSymlinksUntrackedNotIgnored(t *testing.T) {
	f := newCacheFixture(t)
	base := f.commit(map[string]string{".gitignore": "*.log\n", "keep.log": "tracked\n", "a.txt": "a\n",
		"tool*": "#!/bin/sh\n", "plain.sh": "#!/bin/sh\n", "old-link": "->a.txt"})
	w := f.prepare(f.cache, "job1", base)
	defer w.Keep()
	f.sh(w.Dir(), `
		chmod +x plain.sh && chmod -x tool
		ln -s a.txt new-link && rm old-link && ln -s tool old-link
		echo new > untracked.txt && mkdir -p deep/er && echo x > deep/er/f.txt
		echo noise > debug.log && echo more >> keep.log
	`)
	commit, p := f.publish(w)
	if commit == "" {
		t.Fatal("nothing published")
	}
	if p.Parent != base || p.Size == 0 {
		t.Fatalf("publication %+v", p)
	}
	b, err := os.ReadFile(p.Path)
	noErr(t, err)
	if s := sha256.Sum256(b); hex.EncodeToString(s[:]) != p.SHA256 || int64(len(b)) != p.Size {
		t.Fatal("bundle digest or size does not match the file")
	}
	if got := f.receive(p); got != commit {
		t.Fatalf("bundle ref points at %s, want %s", got, commit)
	}
	tree := f.git(f.src, "ls-tree", "-r", commit)
	for _, want := range []string{"100755 blob", "\tplain.sh", "100644 blob", "\ttool", "120000 blob", "\tnew-link",
		"\tuntracked.txt", "\tdeep/er/f.txt", "\tkeep.log"} {
		if !strings.Contains(tree, want) {
			t.Errorf("published tree lacks %q:\n%s", want, tree)
		}
	}
	for _, line := range strings.Split(tree, "\n") {
		switch {
		case strings.HasSuffix(line, "\tdebug.log"):
			t.Error("an ignored file was published")
		case strings.HasSuffix(line, "\tplain.sh") && !strings.HasPrefix(line, "100755"),
			strings.HasSuffix(line, "\ttool") && !strings.HasPrefix(line, "100644"),
			strings.HasSuffix(line, "\told-link") && !strings.HasPrefix(line, "120000"):
			t.Errorf("mode not kept: %s", line)
		}
	}
	// Back out through a fresh runner cache: same files, same modes.
	other := f.prepare(f.newCache(t.TempDir()), "job2", commit)
	defer other.Keep()
	want := slices.DeleteFunc(snapshotDir(t, w.Dir()), func(s string) bool { return strings.HasPrefix(s, "debug.log") })
	if got := snapshotDir(t, other.Dir()); !slices.Equal(got, want) {
		t.Fatalf("round trip differs\n got %q\nwant %q", got, want)
	}
	// Commit metadata: requester authors, drover commits, trailers.
	meta := f.git(f.src, "log", "-1", "--format=%an <%ae>|%cn|%P|%(trailers:only,unfold)", commit)
	if !strings.HasPrefix(meta, "alice <alice@drover>|drover|"+base+"|") || !strings.Contains(meta, "Drover-Job: job1") || !strings.Contains(meta, "Drover-Attempt: at1") {
		t.Fatalf("commit metadata %q", meta)
	}
}

func TestPublishIgnoresAgentCommitsAndIndex(t *testing.T) {
	f, base, w := startedJob(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n", "c.txt": "c\n"})
	f.sh(w.Dir(), `
		echo 1 > a.txt && git commit -qam "agent one" && echo 2 > a.txt && git commit -qam "agent two"
		git checkout -q -b agent-branch
		echo staged > b.txt && git add b.txt && echo worktree > b.txt
		git rm -q --cached c.txt
		echo s > staged-only.txt && git add staged-only.txt && rm staged-only.txt
	`)
	commit, p := f.publish(w)
	if p.Parent != base {
		t.Fatalf("published on %s, want the job's head %s (not the agent's commits)", p.Parent, base)
	}
	if parents := f.git(f.cache.home, "--git-dir=repos/proj.git", "rev-list", "--parents", "-1", commit); parents != commit+" "+base {
		t.Fatalf("commit parents %q", parents)
	}
	files := map[string]string{"a.txt": "2", "b.txt": "worktree", "c.txt": "c"}
	for name, want := range files {
		if got := f.git(f.cache.home, "--git-dir=repos/proj.git", "show", commit+":"+name); got != want {
			t.Errorf("%s published as %q, want the working tree's %q", name, got, want)
		}
	}
	if tree := f.git(f.cache.home, "--git-dir=repos/proj.git", "ls-tree", "--name-only", commit); strings.Contains(tree, "staged-only") {
		t.Error("a file only in the agent's index was published")
	}
}

func TestPublishNothingChangedAndSameCommitTwice(t *testing.T) {
	f, _, w := startedJob(t, map[string]string{"a.txt": "a\n"})
	// Agent activity that changes no file.
	f.sh(w.Dir(), "touch a.txt && git commit -q --allow-empty -m empty")
	if commit, err := w.Commit(f.ctx, testInfo); err != nil || commit != "" {
		t.Fatalf("nothing changed: commit %q, %v", commit, err)
	}
	write(t, filepath.Join(w.Dir(), "a.txt"), "b\n", 0o644)
	c1, err := w.Commit(f.ctx, testInfo)
	noErr(t, err)
	c2, err := w.Commit(f.ctx, testInfo)
	noErr(t, err)
	if c1 == "" || c1 != c2 {
		t.Fatalf("the same files gave commits %s and %s", c1, c2)
	}
	noErr(t, w.Adopt(f.ctx, c1))
	if w.Head() != c1 {
		t.Fatalf("head %s after adopt, want %s", w.Head(), c1)
	}
	if c, err := w.Commit(f.ctx, testInfo); err != nil || c != "" {
		t.Fatalf("after adopting, nothing is left to publish: %q %v", c, err)
	}
	// A second change publishes only what the head lacks.
	write(t, filepath.Join(w.Dir(), "n.txt"), "n\n", 0o644)
	c3, p := f.publish(w)
	if p.Parent != c1 {
		t.Fatalf("next publication on %s, want %s", p.Parent, c1)
	}
	if objs := f.git(f.cache.home, "--git-dir=repos/proj.git", "rev-list", "--objects", c1+".."+c3); len(strings.Split(objs, "\n")) != 3 {
		t.Fatalf("objects new in %s: %q, want commit, tree, blob", c3, objs)
	}
}

func TestPublishOverCapIsRefused(t *testing.T) {
	f, _, w := startedJob(t, map[string]string{"a.txt": "a\n"})
	big := make([]byte, 64<<10)
	rand.Read(big) // incompressible
	noErr(t, os.WriteFile(filepath.Join(w.Dir(), "big.bin"), big, 0o644))
	commit, err := w.Commit(f.ctx, testInfo)
	noErr(t, err)
	path := filepath.Join(t.TempDir(), "b")
	_, err = w.Bundle(f.ctx, commit, path, 16<<10)
	if !errors.Is(err, ErrTooLarge) || !strings.Contains(err.Error(), "remote URL") {
		t.Fatalf("over the cap: %v", err)
	}
	if _, serr := os.Stat(path); serr == nil {
		t.Fatal("a partial bundle was left behind")
	}
}

// A reply was lost: the hub holds a newer head than the runner knew. The
// runner adopts it (fetching it if needed) only if it descends from the
// last head it knew.
func TestAdoptNewerHead(t *testing.T) {
	f, base, w := startedJob(t, map[string]string{"a.txt": "a\n"})
	newer := f.commit(map[string]string{"a.txt": "from elsewhere\n"})
	noErr(t, w.Adopt(f.ctx, newer))
	if w.Head() != newer {
		t.Fatalf("head %s, want %s", w.Head(), newer)
	}
	// The worktree still has a.txt = "a": publishing now states that.
	commit, p := f.publish(w)
	if p.Parent != newer || commit == "" {
		t.Fatalf("publication on %s, want on %s", p.Parent, newer)
	}
	f.git(f.src, "checkout", "--quiet", "--detach", base)
	unrelated := f.commit(map[string]string{"z": "z"})
	err := w.Adopt(f.ctx, unrelated)
	if err == nil || !strings.Contains(err.Error(), "does not descend") {
		t.Fatalf("adopting a head off the job's line: %v", err)
	}
}

func TestPublishLeavesOutNestedRepositories(t *testing.T) {
	f, _, w := startedJob(t, map[string]string{"a.txt": "a\n"})
	f.sh(w.Dir(), "mkdir vendor && cd vendor && git init -q && echo v > v && git add v && git commit -qm v && cd .. && echo b > b.txt")
	commit, _ := f.publish(w)
	tree := f.git(f.cache.home, "--git-dir=repos/proj.git", "ls-tree", "-r", commit)
	if strings.Contains(tree, "160000") || strings.Contains(tree, "vendor") || !strings.Contains(tree, "b.txt") {
		t.Fatalf("published tree:\n%s", tree)
	}
}

// git trusts an index entry's stat data (whole seconds) only for files older
// than the index file: a saved index copied with a fresh mtime hid a
// same-size edit made in the second the index was written, and publication
// found nothing changed.
func TestCopiedIndexKeepsItsTime(t *testing.T) {
	dir := t.TempDir()
	src, dst := filepath.Join(dir, "index"), filepath.Join(dir, "copy")
	write(t, src, "DIRC", 0o644)
	old := time.Now().Add(-time.Hour).Truncate(time.Second)
	noErr(t, os.Chtimes(src, time.Time{}, old))
	noErr(t, copyFile(src, dst))
	st, err := os.Stat(dst)
	noErr(t, err)
	if !st.ModTime().Equal(old) {
		t.Fatalf("copy has mtime %v, want the original's %v", st.ModTime(), old)
	}
}
