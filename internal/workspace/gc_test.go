package workspace

import (
	"crypto/rand"
	"encoding/base64"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"drover/internal/gitcmd"
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
	_, err := f.cache.GC(f.ctx, GCOptions{Live: func(j string) bool { return j == "live" }, MaxIdle: time.Minute})
	noErr(t, err)

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

// Under a budget the worktrees exceed, pooled worktrees go, least recently
// used first, until the rest fit; a worktree kept for a job whose next
// attempt waits, and one in use, stay whatever the budget.
func TestGCKeepsWorktreesWithinTheBudget(t *testing.T) {
	f := newCacheFixture(t)
	base := f.commit(map[string]string{"a.txt": strings.Repeat("a", 64<<10), "d/b.txt": "b\n"})
	f.cache.poolSize = 5
	var mu sync.Mutex
	clock := time.Now()
	f.cache.now = func() time.Time {
		mu.Lock()
		defer mu.Unlock()
		clock = clock.Add(time.Second)
		return clock
	}
	waiting := f.prepare(f.cache, "waiting", base)
	write(t, filepath.Join(waiting.Dir(), "work.txt"), "unpublished\n", 0o644)
	noErr(t, waiting.Keep())
	busy := f.prepare(f.cache, "busy", base)
	defer busy.Keep()
	var ws []*Worktree
	var pooled []string
	for _, job := range []string{"old", "mid", "new"} {
		ws = append(ws, f.prepare(f.cache, "pooled-"+job, base))
	}
	for _, w := range ws { // released oldest first
		noErr(t, w.Release(f.ctx))
		pooled = append(pooled, w.Dir())
	}

	rep, err := f.cache.GC(f.ctx, GCOptions{Live: func(j string) bool { return j == "busy" }})
	noErr(t, err)
	if rep.Freed != 0 || len(rep.Removed) != 0 || rep.Used != 0 {
		t.Fatalf("without a budget: %+v", rep)
	}
	size := diskUsage(waiting.Dir())
	// Room for the two job worktrees and one pooled one, not two.
	budget := 3*size + size/2
	rep, err = f.cache.GC(f.ctx, GCOptions{Live: func(j string) bool { return j == "busy" }, Budget: budget})
	noErr(t, err)
	if !slices.Equal(rep.Removed, pooled[:2]) {
		t.Fatalf("removed %v, want the two least recently used of %v", rep.Removed, pooled)
	}
	if rep.Freed < 2*size*9/10 || rep.Used-rep.Freed > budget {
		t.Fatalf("report %+v against worktrees of about %d bytes, budget %d", rep, size, budget)
	}
	for _, dir := range append(pooled[:2:2], waiting.Dir(), busy.Dir(), pooled[2]) {
		_, err := os.Stat(dir)
		if gone := slices.Contains(rep.Removed, dir); gone != os.IsNotExist(err) {
			t.Fatalf("%s: removed %v, stat %v", dir, gone, err)
		}
	}
	// A budget nothing can meet removes the last pooled one and no more.
	rep, err = f.cache.GC(f.ctx, GCOptions{Live: func(j string) bool { return j == "busy" }, Budget: 1})
	noErr(t, err)
	if !slices.Equal(rep.Removed, pooled[2:]) {
		t.Fatalf("removed %v, want only %s", rep.Removed, pooled[2])
	}
	if got := f.git(waiting.Dir(), "--git-dir="+waiting.admin(), "status", "--porcelain"); got != "?? work.txt" {
		t.Fatalf("the waiting job's worktree: %q", got)
	}
	w := f.prepare(f.cache, "waiting", base)
	defer w.Keep()
	if !w.Resumed() {
		t.Fatal("the waiting job's worktree was not kept")
	}
}

// Over the budget, the clone's unreferenced objects go before any pooled
// worktree: a commit fetched for a job whose worktree is gone is deleted
// once older than pruneExpiry, while a fresh one (a preparation about to
// add its worktree) and every worktree's base stay. A collection that
// would find nothing new to delete (the objects did not grow) is skipped,
// and the pooled worktree goes next.
func TestGCDeletesUnreferencedObjectsFirst(t *testing.T) {
	f := newCacheFixture(t)
	base := f.commit(map[string]string{"a.txt": "a\n"})
	random := make([]byte, 256<<10)
	_, _ = rand.Read(random)
	old := f.commit(map[string]string{"big.bin": base64.StdEncoding.EncodeToString(random)})
	f.git(f.src, "checkout", "--quiet", "--detach", base) // fresh shares nothing with old
	fresh := f.commit(map[string]string{"b.txt": "b\n"})
	w := f.prepare(f.cache, "pooled", base)
	dir := w.Dir()
	noErr(t, w.Release(f.ctx))
	r, err := f.cache.repoOf("proj")
	noErr(t, err)
	fetch := func(commit string) {
		noErr(t, f.cache.withLock(f.ctx, r, lockClone, func() error { return f.cache.ensureCommit(f.ctx, r, f.source(), commit) }))
	}
	fetch(old)
	objects := filepath.Join(r.dir, "objects")
	longAgo := time.Now().Add(-2 * pruneExpiry)
	noErr(t, filepath.WalkDir(objects, func(p string, d fs.DirEntry, err error) error {
		if err == nil {
			err = os.Chtimes(p, longAgo, longAgo)
		}
		return err
	}))
	fetch(fresh)
	has := func(commit string) bool {
		_, err := f.cache.git.Run(f.ctx, gitcmd.Cmd{Dir: r.dir, Args: []string{"cat-file", "-e", commit + "^{tree}"}})
		return err == nil
	}

	used := diskUsage(objects) + diskUsage(dir)
	budget := used - 64<<10
	rep, err := f.cache.GC(f.ctx, GCOptions{Budget: budget})
	noErr(t, err)
	if rep.Used != used || rep.Pruned < 128<<10 || rep.Freed != rep.Pruned || len(rep.Removed) != 0 {
		t.Fatalf("report %+v; used %d, budget %d", rep, used, budget)
	}
	if has(old) || !has(fresh) || !has(base) {
		t.Fatalf("after the collection: old %v (want deleted), fresh %v, base %v", has(old), has(fresh), has(base))
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatalf("the pooled worktree went although deleting objects met the budget: %v", err)
	}

	mark, err := os.Stat(filepath.Join(r.dir, gcMark))
	noErr(t, err)
	rep, err = f.cache.GC(f.ctx, GCOptions{Budget: 1})
	noErr(t, err)
	if rep.Pruned != 0 || !slices.Equal(rep.Removed, []string{dir}) {
		t.Fatalf("second collection: %+v, want no objects deleted and %s removed", rep, dir)
	}
	if again, err := os.Stat(filepath.Join(r.dir, gcMark)); err != nil || !os.SameFile(mark, again) {
		t.Fatalf("the objects, which did not grow, were collected again (%v)", err)
	}
	w = f.prepare(f.cache, "again", fresh) // the clone still works
	noErr(t, w.Release(f.ctx))
}
