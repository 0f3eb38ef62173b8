package workspace

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"drover/internal/gitcmd"
)

func TestPrepareFreshThenResumeWithoutCheckout(t *testing.T) {
	f := newCacheFixture(t)
	base := f.commit(map[string]string{"a.txt": "a\n", "bin/run*": "#!/bin/sh\n", "link": "->a.txt"})
	w := f.prepare(f.cache, "job1", base)
	if w.Resumed() || w.Head() != base {
		t.Fatalf("fresh worktree: resumed=%v head=%s", w.Resumed(), w.Head())
	}
	want := snapshotDir(t, f.src)
	want = slices.DeleteFunc(want, func(s string) bool { return strings.HasPrefix(s, ".git") })
	if got := snapshotDir(t, w.Dir()); !slices.Equal(got, want) {
		t.Fatalf("worktree files\n got %q\nwant %q", got, want)
	}
	// Work in progress, then the attempt ends and the job comes back.
	write(t, filepath.Join(w.Dir(), "wip.txt"), "half done", 0o644)
	untouched, err := os.Stat(filepath.Join(w.Dir(), "a.txt"))
	noErr(t, err)
	dir := w.Dir()
	noErr(t, w.Keep())

	w2 := f.prepare(f.cache, "job1", base)
	if !w2.Resumed() || w2.Dir() != dir {
		t.Fatalf("second attempt: resumed=%v dir=%s, want the kept %s", w2.Resumed(), w2.Dir(), dir)
	}
	if b, err := os.ReadFile(filepath.Join(dir, "wip.txt")); err != nil || string(b) != "half done" {
		t.Fatalf("work in progress lost on resume: %q %v", b, err)
	}
	after, err := os.Stat(filepath.Join(dir, "a.txt"))
	noErr(t, err)
	if !after.ModTime().Equal(untouched.ModTime()) {
		t.Fatal("resume rewrote a file: it must not check anything out")
	}
	noErr(t, w2.Keep())
}

func TestPrepareSkipsFetchWhenCommitPresent(t *testing.T) {
	f := newCacheFixture(t)
	base := f.commit(map[string]string{"a": "1"})
	noErr(t, f.prepare(f.cache, "job1", base).Keep())
	// The source is gone: a second job at the same commit needs no fetch.
	noErr(t, os.RemoveAll(f.src))
	w := f.prepare(f.cache, "job2", base)
	noErr(t, w.Keep())
}

// A recycled worktree must be indistinguishable from a fresh one, whatever
// the previous job's agent did to it.
func TestRecycledWorktreeIsIndistinguishableFromFresh(t *testing.T) {
	f := newCacheFixture(t)
	c1 := f.commit(map[string]string{".gitignore": "*.log\nbuild/\n", "a.txt": "a\n", "keep.log": "tracked though ignored\n",
		"dir/b.txt": "b\n", "dir/tool*": "#!/bin/sh\necho 1\n", "link": "->a.txt", "gone.txt": "x\n"})
	w := f.prepare(f.cache, "job1", c1)
	// A messy agent: edits, deletions, mode changes, untracked and ignored
	// files, nested repositories, its own commits, branches, tags, stash,
	// index tricks and junk in the worktree's git dir.
	f.sh(w.Dir(), `
		echo changed > a.txt && rm gone.txt && chmod -x dir/tool && rm link && ln -s dir link
		echo new > untracked.txt && mkdir -p build/deep && echo o > build/deep/out.o && echo l > debug.log
		mkdir -p nested && (cd nested && git init -q && echo n > n && git add n && git commit -qm n)
		git add -A && git commit -qm "agent commit" && git branch agent-branch && git tag agent-tag
		echo stash > dir/b.txt && git stash -q
		echo hidden > dir/b.txt && git update-index --assume-unchanged dir/b.txt
		git update-index --skip-worktree a.txt
		git config --worktree core.sparseCheckout true
		echo junk > "$(git rev-parse --git-dir)/MERGE_HEAD"
	`)
	noErr(t, w.Release(f.ctx))

	c2 := f.commit(map[string]string{"a.txt": "a2\n", "dir/c.txt": "c\n", "gone.txt": ""})
	recycled := f.prepare(f.cache, "job2", c2)
	if recycled.Dir() != w.Dir() {
		t.Fatalf("job2 got %s, want the pooled %s", recycled.Dir(), w.Dir())
	}
	fresh := f.prepare(f.cache, "job3", c2) // the pool is empty now
	if fresh.Dir() == recycled.Dir() {
		t.Fatal("job3 got the same worktree")
	}
	if got, want := snapshotDir(t, recycled.Dir()), snapshotDir(t, fresh.Dir()); !slices.Equal(got, want) {
		t.Fatalf("recycled and fresh worktrees differ\nrecycled %q\n   fresh %q", got, want)
	}
	// Each has its index's shared part, named by its content (which holds
	// stat data).
	adminNames := func(dir string) []string {
		names := listDir(t, dir)
		for i, n := range names {
			if IsSharedIndex(n) {
				names[i] = "sharedindex.*"
			}
		}
		return names
	}
	if got, want := adminNames(recycled.admin()), adminNames(fresh.admin()); !slices.Equal(got, want) {
		t.Fatalf("git dirs differ: recycled %q, fresh %q", got, want)
	}
	for _, args := range [][]string{
		{"rev-parse", "HEAD"},
		{"ls-files", "--stage", "--debug"}, // entries and flags, not stat data
		{"ls-files", "-v"},                 // assume-unchanged and skip-worktree tags
		{"status", "--porcelain", "--ignored"},
		{"stash", "list"},
		{"config", "--list", "--show-scope"},
	} {
		r, fr := f.git(recycled.Dir(), args...), f.git(fresh.Dir(), args...)
		if slices.Contains(args, "--debug") {
			r, fr = stripStat(r), stripStat(fr)
		}
		if r != fr {
			t.Errorf("git %v differs:\nrecycled %q\n   fresh %q", args, r, fr)
		}
	}
	// Only drover's own refs remain (the agent's work was recorded as an
	// orphan before the reset).
	for _, ref := range strings.Fields(f.git(recycled.Dir(), "for-each-ref", "--format=%(refname)")) {
		if !strings.HasPrefix(ref, "refs/drover/") {
			t.Errorf("a ref the agent made survived: %s", ref)
		}
	}
	if orphan := f.git(f.cache.home, "--git-dir=repos/proj.git", "show", "refs/drover/orphans/job1:a.txt"); orphan != "changed" {
		t.Errorf("orphan records a.txt as %q, want the agent's edit", orphan)
	}
	noErr(t, recycled.Keep())
	noErr(t, fresh.Keep())
}

// stripStat keeps the entry lines of ls-files --debug and its flags line.
func stripStat(s string) string {
	var keep []string
	for _, l := range strings.Split(s, "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "ctime:") || strings.HasPrefix(l, "mtime:") || strings.HasPrefix(l, "dev:") || strings.HasPrefix(l, "uid:") || strings.HasPrefix(l, "size:") {
			continue
		}
		keep = append(keep, l)
	}
	return strings.Join(keep, "\n")
}

func TestRefusesSubmodulesAndFilters(t *testing.T) {
	f := newCacheFixture(t)
	clean := f.commit(map[string]string{"a": "1"})
	noErr(t, f.prepare(f.cache, "ok", clean).Release(f.ctx))

	lfs := f.commit(map[string]string{"sub/.gitattributes": "# media\n*.bin filter=lfs diff=lfs merge=lfs -text\n"})
	f.git(f.src, "rm", "--quiet", "--cached", "-r", "sub")
	f.git(f.src, "update-index", "--add", "--cacheinfo", "160000,"+clean+",vendor/lib")
	f.git(f.src, "commit", "--quiet", "-m", "gitlink")
	gitlink := f.git(f.src, "rev-parse", "HEAD")

	for name, c := range map[string]struct {
		commit, want string
		cache        *Cache
	}{
		"filter, pooled worktree": {lfs, "filter=lfs", f.cache},
		"gitlink, pooled":         {gitlink, "submodule (gitlink) at vendor/lib", f.cache},
		"filter, fresh":           {lfs, "filter=lfs", f.newCache(t.TempDir())},
		"gitlink, fresh":          {gitlink, "submodule (gitlink) at vendor/lib", f.newCache(t.TempDir())},
	} {
		_, err := c.cache.Prepare(f.ctx, f.source(), "refused", c.commit)
		var ref *gitcmd.Refusal
		if !errors.As(err, &ref) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want a refusal naming %q", name, err, c.want)
		}
	}
	// The refused jobs left the pooled worktree in the pool.
	after := f.prepare(f.cache, "after", clean)
	defer after.Keep()
	recs, err := f.cache.records(after.repo)
	noErr(t, err)
	if len(recs) != 1 {
		t.Fatalf("worktrees after the refusals: %v", recs)
	}
}

func TestPushFromWorktreeFails(t *testing.T) {
	f, _, w := startedJob(t, map[string]string{"a": "1"})
	out, err := shell(f.ctx, w.Dir(), "git push origin HEAD:refs/heads/x")
	if err == nil {
		t.Fatalf("git push origin succeeded: %s", out)
	}
	if !strings.Contains(out, "drover-push-disabled") {
		t.Fatalf("push failed for another reason: %s", out)
	}
}

func TestSameJobTwiceAtOnceIsRefused(t *testing.T) {
	f, base, _ := startedJob(t, map[string]string{"a": "1"})
	if _, err := f.cache.Prepare(f.ctx, f.source(), "job1", base); err == nil || !strings.Contains(err.Error(), "in use") {
		t.Fatalf("second prepare of a job in use: %v", err)
	}
}

func TestKeptWorktreeRemovedBehindOurBackIsReplaced(t *testing.T) {
	f := newCacheFixture(t)
	base := f.commit(map[string]string{"a": "1"})
	w := f.prepare(f.cache, "job1", base)
	noErr(t, w.Keep())
	noErr(t, os.RemoveAll(w.Dir()))
	w2 := f.prepare(f.cache, "job1", base)
	defer w2.Keep()
	if w2.Resumed() {
		t.Fatal("resumed a worktree that is gone")
	}
	if b, err := os.ReadFile(filepath.Join(w2.Dir(), "a")); err != nil || string(b) != "1" {
		t.Fatalf("replacement worktree: %q %v", b, err)
	}
}

// A commit last checked that the clone no longer has (collected) makes the
// check read the whole tree: it still refuses a gitlink, and passes a
// clean tree.
func TestCheckTreeSinceACommitGone(t *testing.T) {
	f := newCacheFixture(t)
	clean := f.commit(map[string]string{"a": "1"})
	w := f.prepare(f.cache, "ok", clean)
	defer w.Keep()
	f.git(f.src, "update-index", "--add", "--cacheinfo", "160000,"+clean+",vendor/lib")
	f.git(f.src, "commit", "--quiet", "-m", "gitlink")
	gitlink := f.git(f.src, "rev-parse", "HEAD")
	noErr(t, f.cache.withLock(f.ctx, w.repo, lockClone, func() error { return f.cache.ensureCommit(f.ctx, w.repo, w.src, gitlink) }))
	gone := strings.Repeat("1", 40)
	_, err := f.cache.checkTree(f.ctx, w.repo, gitlink, gone)
	var ref *gitcmd.Refusal
	if !errors.As(err, &ref) || !strings.Contains(err.Error(), "submodule (gitlink) at vendor/lib") {
		t.Fatalf("since a commit gone: err = %v, want the gitlink refused", err)
	}
	if d, err := f.cache.checkTree(f.ctx, w.repo, clean, gone); err != nil || d != nil {
		t.Fatalf("clean tree since a commit gone: %v, %v", d, err)
	}
}

// Every worktree, whole or sparse, checks out with git's parallel
// checkout, which overlaps the disk's waits of a large checkout.
func TestWorktreesCheckOutInParallel(t *testing.T) {
	f := newCacheFixture(t)
	head := f.commit(map[string]string{"a/b/f.txt": "x\n", "c.txt": "y\n"})
	whole := f.prepare(f.cache, "whole", head)
	src := f.source()
	src.Sparse = []string{"a/b"}
	sparse, err := f.cache.Prepare(f.ctx, src, "sparse", head)
	noErr(t, err)
	for _, w := range []*Worktree{whole, sparse} {
		if got := f.git(w.Dir(), "config", "--get", "checkout.workers"); got != "8" {
			t.Errorf("%s: checkout.workers = %q, want 8", w.Job(), got)
		}
	}
}
