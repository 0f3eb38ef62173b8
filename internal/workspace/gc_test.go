package workspace

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestGCRetiresGoneJobsRecordingUnpublishedWork(t *testing.T) {
	f := newCacheFixture(t)
	base := f.commit(map[string]string{"a.txt": "a\n"})
	f.cache.poolSize = 1

	dirty := f.prepare(f.cache, "gone-dirty", base)
	write(t, filepath.Join(dirty.Dir(), "work.txt"), "unpublished\n", 0o644)
	noErr(t, dirty.Keep())
	clean := f.prepare(f.cache, "gone-clean", base)
	noErr(t, clean.Keep())
	live := f.prepare(f.cache, "live", base)
	noErr(t, live.Keep())
	busy := f.prepare(f.cache, "busy", base) // an attempt still runs in it
	write(t, filepath.Join(busy.Dir(), "wip.txt"), "wip\n", 0o644)
	leftover := filepath.Join(f.home, "trees", "proj", "w0123456789abcdef")
	noErr(t, os.MkdirAll(leftover, 0o700))

	f.cache.now = func() time.Time { return time.Now().Add(time.Hour) }
	noErr(t, f.cache.GC(f.ctx, GCOptions{Live: func(j string) bool { return j == "live" }, MaxIdle: time.Minute}))

	clone := "--git-dir=" + filepath.Join(f.home, "repos", "proj.git")
	if got := f.git(f.home, clone, "show", "refs/drover/orphans/gone-dirty:work.txt"); got != "unpublished" {
		t.Fatalf("orphan of gone-dirty holds %q", got)
	}
	if out, err := shell(f.ctx, f.home, "git "+clone+" rev-parse --verify -q refs/drover/orphans/gone-clean"); err == nil {
		t.Fatalf("a clean worktree was recorded as an orphan: %s", out)
	}
	recs, err := f.cache.records(dirty.repo)
	noErr(t, err)
	jobs := map[string]int{}
	for _, r := range recs {
		jobs[r.Job]++
	}
	// Two gone jobs: one worktree pooled (pool size 1), the other removed.
	if len(recs) != 3 || jobs["live"] != 1 || jobs["busy"] != 1 || jobs[""] != 1 {
		t.Fatalf("after GC: %v", jobs)
	}
	if _, err := os.Stat(filepath.Join(busy.Dir(), "wip.txt")); err != nil {
		t.Fatal("GC touched a worktree in use")
	}
	if _, err := os.Stat(leftover); err == nil {
		t.Fatal("a folder without a record survived")
	}
	noErr(t, busy.Keep())
}
