//go:build linux

package workspace

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"drover/internal/testkit/ciskip"
)

// bothTrees records the worktree's files twice: as a publication does (the
// monitor's narrowed add when it can vouch for the changes) and with the
// monitor hidden (git's full scan of the worktree). It returns how the
// first was made and fails the test unless both trees are equal.
func (f *cacheFixture) bothTrees(w *Worktree) (tree, how string) {
	f.t.Helper()
	var narrow, full *snapshot
	noErr(f.t, f.cache.withLock(f.ctx, w.repo, lockClone, func() error {
		var err error
		if narrow, err = w.recordFiles(f.ctx, w.rec.Head); err != nil {
			return err
		}
		mon := w.mon
		w.mon = nil
		defer func() { w.mon = mon }()
		full, err = w.recordFiles(f.ctx, w.rec.Head)
		return err
	}))
	defer narrow.drop()
	defer full.drop()
	if full.how != "full scan" {
		f.t.Fatalf("the reference snapshot was made by %q", full.how)
	}
	if narrow.tree != full.tree {
		f.t.Fatalf("the %s publication differs from git's full scan:\n%s\nfull scan:\n%s", narrow.how,
			f.git(w.Dir(), "ls-tree", "-r", narrow.tree), f.git(w.Dir(), "ls-tree", "-r", full.tree))
	}
	return narrow.tree, narrow.how
}

// change runs the shell steps in the worktree, each fully recorded by its
// monitor before the next; held holds the monitor's reader up during each
// step, so that its events come as one batch. With vouch, the monitor must
// not break.
func (f *cacheFixture) change(w *Worktree, steps []string, held, vouch bool) {
	f.t.Helper()
	for _, step := range steps {
		if held {
			w.mon.mu.Lock()
		}
		f.sh(w.Dir(), step)
		if held {
			w.mon.mu.Unlock()
		}
		if _, ok := w.mon.mark(); !ok && vouch {
			f.t.Fatalf("the monitor broke: %s", w.mon.broken)
		}
	}
}

// Each change, made after the worktree was prepared (and so watched), is
// published exactly as git's full scan records it, and only through the
// changed paths unless the monitor cannot vouch for them.
func TestMonitorNarrowedPublicationEqualsFullScan(t *testing.T) {
	files := map[string]string{".gitignore": "*.log\nbuild/\n", "a.txt": "a\n", "b.txt": "b\n",
		"dir/x.txt": "x\n", "dir/sub/y.txt": "y\n", "other/z.txt": "z\n", "tool*": "#!/bin/sh\n", "keep.log": "tracked\n"}
	cases := []struct {
		name   string
		change []string // shell steps, each fully recorded by the monitor before the next
		held   bool     // the monitor's reader is held up during each step, so its events come as one batch
		how    string   // "" when it depends on how quickly the reader runs
		has    []string // entries (ls-tree -r --name-only) the tree must hold
		lacks  []string // and must not
	}{
		{name: "modified file", change: []string{"echo changed > a.txt"}, how: "narrowed"},
		{name: "same-size edit", change: []string{"echo A > a.txt"}, how: "narrowed"},
		{name: "new file in new nested folders", change: []string{"mkdir -p n/b/c && echo x > n/b/c/f.txt && echo y > n/top.txt"},
			how: "narrowed", has: []string{"n/b/c/f.txt", "n/top.txt"}},
		{name: "deleted file", change: []string{"rm b.txt"}, how: "narrowed", lacks: []string{"b.txt"}},
		{name: "rename across folders", change: []string{"mv dir/x.txt other/moved.txt"}, how: "narrowed",
			has: []string{"other/moved.txt"}, lacks: []string{"dir/x.txt"}},
		{name: "deleted folder", change: []string{"rm -r dir"}, how: "narrowed", lacks: []string{"dir/x.txt", "dir/sub/y.txt"}},
		{name: "renamed folder, then a file in it changed", change: []string{"mv dir renamed", "echo more >> renamed/sub/y.txt && echo n > renamed/sub/new.txt"},
			how: "narrowed", has: []string{"renamed/sub/new.txt", "renamed/x.txt"}, lacks: []string{"dir/x.txt"}},
		{name: "file replaced by a symlink", change: []string{"rm a.txt && ln -s b.txt a.txt"}, how: "narrowed"},
		{name: "folder replaced by a file", change: []string{"rm -r dir && echo f > dir"}, how: "narrowed", has: []string{"dir"}},
		{name: "file replaced by a folder", change: []string{"rm b.txt && mkdir b.txt && echo in > b.txt/in"}, how: "narrowed", has: []string{"b.txt/in"}},
		{name: "chmod +x only", change: []string{"chmod +x a.txt"}, how: "narrowed"},
		{name: "chmod -x only", change: []string{"chmod -x tool"}, how: "narrowed"},
		{name: "new ignored files", change: []string{"echo l > debug.log && mkdir -p build/o && echo o > build/o/x.o && echo t > dir/trace.log"},
			how: "narrowed", lacks: []string{"debug.log", "build/o/x.o", "dir/trace.log"}},
		{name: "tracked file that matches an ignore rule", change: []string{"echo more >> keep.log"}, how: "narrowed"},
		{name: "names that look like patterns", change: []string{"echo s > 'dir/*' && echo q > 'dir/[a].txt' && echo c > ':(glob)x'"},
			how: "narrowed", has: []string{"dir/*", "dir/[a].txt", ":(glob)x"}},
		{name: "temporary file written and renamed into place", change: []string{"echo new > a.tmp && mv a.tmp a.txt"}, how: "narrowed"},
		{name: "symlink replaced in place (ln -sf renames a temporary link)", change: []string{"ln -s a.txt l && ln -sf b.txt l"}, how: "narrowed"},
		{name: "temporary file renamed, one batch", change: []string{"echo new > a.tmp && mv a.tmp a.txt"}, held: true, how: "narrowed"},
		{name: "file made and deleted", change: []string{"echo t > gone.txt && rm gone.txt"}, how: ""},
		{name: "file made, seen, then deleted", change: []string{"echo t > gone.txt", "rm gone.txt"}, how: "narrowed", lacks: []string{"gone.txt"}},
		{name: "ignored file and a new file together", change: []string{"echo l > debug.log && echo n > n.txt"}, how: "narrowed",
			has: []string{"n.txt"}, lacks: []string{"debug.log"}},
		{name: "nothing changed", change: []string{"cat a.txt >/dev/null"}, how: "narrowed"},
		// Full scans: the monitor cannot vouch for these.
		{name: "ignore rules changed", change: []string{"echo l > debug.log", "echo '*.tmp' > .gitignore"}, how: "full scan", has: []string{"debug.log"}},
		{name: "nested repository", change: []string{"mkdir v && cd v && git init -q && echo v > v && git add v && git commit -qm v"},
			how: "full scan", lacks: []string{"v", "v/v"}},
		{name: "hard link written through", change: []string{"ln a.txt dir/alias", "echo through-link > dir/alias"}, how: "full scan"},
		{name: "hard link written through and removed, one batch", change: []string{"ln a.txt dir/alias && echo through-link > dir/alias && rm dir/alias"},
			held: true, how: "full scan"},
		{name: "file made and deleted, one batch", change: []string{"echo t > gone.txt && rm gone.txt"}, held: true, how: "full scan"},
		{name: "hard link in a new folder, one batch", change: []string{"mkdir n && ln a.txt n/alias"}, held: true, how: "full scan"},
		{name: "hard link written through and moved out of the tree, one batch",
			change: []string{"ln a.txt dir/alias && echo through-link > dir/alias && mv dir/alias ../alias.outside"}, held: true, how: "full scan"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, _, w := startedJob(t, files)
			f.change(w, tc.change, tc.held, tc.how == "narrowed")
			tree, how := f.bothTrees(w)
			if tc.how != "" && how != tc.how {
				t.Errorf("published by %s, want %s", how, tc.how)
			}
			names := "\n" + f.git(w.Dir(), "ls-tree", "-r", "--name-only", tree) + "\n"
			for _, p := range tc.has {
				if !strings.Contains(names, "\n"+p+"\n") {
					t.Errorf("the publication lacks %s:%s", p, names)
				}
			}
			for _, p := range tc.lacks {
				if strings.Contains(names, "\n"+p+"\n") {
					t.Errorf("the publication holds %s:%s", p, names)
				}
			}
		})
	}
}

// A file renamed after its creation was read but before its link count
// was checked (a temporary file renamed into place while the reader ran)
// is settled by its rename's events: the publication stays narrowed.
func TestMonitorFileRenamedBeforeItsCheck(t *testing.T) {
	f, _, w := startedJob(t, map[string]string{"a.txt": "a\n"})
	m := w.mon
	m.mu.Lock()
	f.sh(w.Dir(), "echo new > a.tmp")
	noErr(t, m.rc.Control(func(fd uintptr) { m.readQueued(int(fd)) }))
	f.sh(w.Dir(), "mv a.tmp a.txt")
	noErr(t, m.rc.Control(func(fd uintptr) {
		if gone := m.checkLinks(); len(gone) != 1 || gone[0] != "a.tmp" {
			t.Errorf("gone before the check: %q, want a.tmp", gone)
		}
		m.drain(int(fd))
	}))
	m.mu.Unlock()
	if tree, how := f.bothTrees(w); how != "narrowed" || f.git(w.Dir(), "cat-file", "blob", tree+":a.txt") != "new" {
		t.Fatalf("published by %s", how)
	}
}

// Publications in a row (checkpoints): each is narrowed, holds what changed
// since the previous one, and equals the full scan.
func TestMonitorCheckpointsInARow(t *testing.T) {
	f, base, w := startedJob(t, map[string]string{"a.txt": "a\n", "d/b.txt": "b\n"})
	parent := base
	for i, step := range []string{
		"echo one > a.txt && mkdir -p new/deep && echo n > new/deep/n.txt",
		"echo two > a.txt && rm d/b.txt && echo c > new/c.txt",
		"echo three >> new/deep/n.txt",
	} {
		f.sh(w.Dir(), step)
		if _, how := f.bothTrees(w); how != "narrowed" {
			t.Fatalf("checkpoint %d: published by %s", i, how)
		}
		commit, p := f.publish(w)
		if commit == "" || p.Parent != parent {
			t.Fatalf("checkpoint %d: commit %q on %s, want on %s", i, commit, p.Parent, parent)
		}
		if w.pending.how != "narrowed" {
			t.Fatalf("checkpoint %d: published by %s", i, w.pending.how)
		}
		noErr(t, w.Adopt(f.ctx, commit))
		parent = commit
	}
	if got := f.git(w.Dir(), "show", parent+":new/deep/n.txt"); got != "n\nthree" {
		t.Fatalf("last checkpoint holds %q", got)
	}
	if c, err := w.Commit(f.ctx, testInfo); err != nil || c != "" {
		t.Fatalf("nothing changed after the last checkpoint: %q %v", c, err)
	}
}

// A change made while no monitor watched (the runner restarted and resumed
// the kept worktree) is found by the full scan; once that publication is
// adopted the monitor vouches again.
func TestMonitorChangeBeforeItStartedFallsBack(t *testing.T) {
	f, base, w := startedJob(t, map[string]string{"a.txt": "a\n", "b.txt": "b\n"})
	noErr(t, w.Keep())
	write(t, filepath.Join(w.Dir(), "a.txt"), "while nobody watched\n", 0o644)
	w = f.prepare(f.newCache(f.home), "job1", base) // a restarted runner: the idle monitor was the old one's
	defer w.Keep()
	if !w.Resumed() || w.mon == nil {
		t.Fatalf("resumed=%v monitor=%v", w.Resumed(), w.mon)
	}
	tree, how := f.bothTrees(w)
	if how != "full scan" || f.git(w.Dir(), "cat-file", "blob", tree+":a.txt") != "while nobody watched" {
		t.Fatalf("published by %s: %q", how, f.git(w.Dir(), "cat-file", "blob", tree+":a.txt"))
	}
	commit, _ := f.publish(w)
	noErr(t, w.Adopt(f.ctx, commit))
	write(t, filepath.Join(w.Dir(), "b.txt"), "watched\n", 0o644)
	if _, how := f.bothTrees(w); how != "narrowed" {
		t.Fatalf("after an adopted full scan: %s", how)
	}
}

// Lost events (the kernel's queue overflowed) make every later
// publication of the attempt a full scan, and the monitor lets go of its
// descriptor, until the worktree is reset and watched anew.
func TestMonitorOverflowFallsBack(t *testing.T) {
	f, _, w := startedJob(t, map[string]string{"a.txt": "a\n"})
	m := w.mon
	m.mu.Lock()
	m.event(-1, unix.IN_Q_OVERFLOW, 0, "")
	m.mu.Unlock()
	write(t, filepath.Join(w.Dir(), "a.txt"), "after the overflow\n", 0o644) // wakes the reader, which sees the monitor broken
	select {
	case <-m.done:
	case <-time.After(10 * time.Second):
		t.Fatal("a broken monitor kept reading")
	}
	for range 2 {
		if _, how := f.bothTrees(w); how != "full scan" {
			t.Fatalf("after an overflow: %s", how)
		}
		commit, _ := f.publish(w)
		noErr(t, w.Adopt(f.ctx, commit))
		write(t, filepath.Join(w.Dir(), "b.txt"), "more\n", 0o644)
	}
	// Discarding the changes (observe mode) starts a new monitor.
	noErr(t, w.Discard(f.ctx))
	write(t, filepath.Join(w.Dir(), "a.txt"), "after the discard\n", 0o644)
	if _, how := f.bothTrees(w); how != "narrowed" || w.mon == m {
		t.Fatalf("after a discard: %s (same monitor: %v)", how, w.mon == m)
	}
}

// inSandbox runs script in the worktree through bubblewrap's bind mount of
// it (at /work), as the agent's sandbox does; the test is skipped where
// bwrap cannot run.
func (f *cacheFixture) inSandbox(w *Worktree, script string) {
	f.t.Helper()
	bwrap, err := exec.LookPath("bwrap")
	if err != nil {
		ciskip.Skipf(f.t, "no bwrap: %v", err)
	}
	cmd := exec.CommandContext(f.ctx, bwrap, "--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp",
		"--bind", w.Dir(), "/work", "--unshare-all", "--die-with-parent", "sh", "-c", "cd /work && "+script)
	if out, err := cmd.CombinedOutput(); err != nil {
		ciskip.Skipf(f.t, "bwrap cannot run here: %v: %s", err, out)
	}
}

// The agent writes through bubblewrap's bind mount of the worktree; the
// runner's inotify watches see those writes (same inodes).
func TestMonitorSeesWritesFromASandbox(t *testing.T) {
	f, _, w := startedJob(t, map[string]string{"a.txt": "a\n", "d/b.txt": "b\n"})
	f.inSandbox(w, "echo sandboxed > a.txt && mkdir -p new/deep && echo n > new/deep/n.txt && rm d/b.txt")
	tree, how := f.bothTrees(w)
	if how != "narrowed" {
		t.Fatalf("published by %s", how)
	}
	if got := f.git(w.Dir(), "ls-tree", "-r", "--name-only", tree); got != "a.txt\nnew/deep/n.txt" {
		t.Fatalf("published %q", got)
	}
}

// A worktree's monitor outlives the attempt, kept or pooled (the idle
// worktree stays watched for its next reset), but a worktree never has
// more than one, and it ends with the worktree's removal.
func TestMonitorLeavesNoDescriptorOrGoroutine(t *testing.T) {
	f := newCacheFixture(t)
	base := f.commit(map[string]string{"a.txt": "a\n", "d/b.txt": "b\n"})
	fds := func() int { return len(listDir(t, "/proc/self/fd")) }
	// One round first: the cache's own lasting descriptors (none expected)
	// and the runtime's poller are set up.
	noErr(t, f.prepare(f.cache, "warm", base).Keep())
	settle := func(want int) int {
		n := runtime.NumGoroutine()
		for i := 0; i < 100 && n > want; i++ {
			time.Sleep(10 * time.Millisecond)
			n = runtime.NumGoroutine()
		}
		return n
	}
	fd0, g0, p0 := fds(), settle(0), f.cache.parked()
	check := func(what string) {
		t.Helper()
		idle := f.cache.parked() - p0
		if got := fds(); got != fd0+idle {
			t.Errorf("%s: %d descriptors open, %d before and %d idle monitors more", what, got, fd0, idle)
		}
		if got := settle(g0 + idle); got > g0+idle {
			t.Errorf("%s: %d goroutines, %d before and %d idle monitors more", what, got, g0, idle)
		}
	}
	for _, end := range []string{"keep", "release", "resume and keep", "discard and release"} {
		w := f.prepare(f.cache, "job-"+strings.ReplaceAll(end, " ", "-"), base)
		if w.mon == nil {
			t.Fatal("no monitor")
		}
		if fds() <= fd0 {
			t.Fatal("the monitor holds no descriptor")
		}
		write(t, filepath.Join(w.Dir(), "a.txt"), end, 0o644)
		switch end {
		case "keep":
			noErr(t, w.Keep())
		case "release":
			noErr(t, w.Release(f.ctx))
		case "resume and keep":
			noErr(t, w.Keep())
			w = f.prepare(f.cache, w.Job(), base)
			if !w.Resumed() || w.mon == nil {
				t.Fatal("the kept worktree resumed without its monitor")
			}
			noErr(t, w.Keep())
		case "discard and release":
			noErr(t, w.Discard(f.ctx))
			noErr(t, w.Release(f.ctx))
		}
		check(end)
	}
	// A worktree removed because the pool is full.
	f.cache.poolSize = 0
	w := f.prepare(f.cache, "removed", base)
	noErr(t, w.Release(f.ctx))
	if _, err := os.Stat(w.Dir()); !os.IsNotExist(err) {
		t.Fatalf("worktree not removed: %v", err)
	}
	check("removed")
}

// Two files of the tree that are hard links of one file would hide writes
// (inotify names the path written through): the monitor refuses to start
// on such a tree, and publications scan everything.
func TestMonitorRefusesHardLinksFoundAtStart(t *testing.T) {
	f := newCacheFixture(t)
	base := f.commit(map[string]string{"a.txt": "same\n", "d/b.txt": "same\n"})
	w := f.prepare(f.cache, "job1", base)
	noErr(t, w.Keep())
	f.sh(w.Dir(), "rm d/b.txt && ln a.txt d/b.txt")
	w = f.prepare(f.cache, "job1", base) // resumed, link and all
	defer w.Keep()
	if _, ok := w.mon.mark(); ok {
		t.Fatal("the monitor vouches for a worktree with hard links")
	}
	if _, err := startMonitor(w.Dir(), f.cache.log); err == nil || !strings.Contains(err.Error(), "hard links") {
		t.Fatalf("startMonitor: %v", err)
	}
	write(t, filepath.Join(w.Dir(), "a.txt"), "through-link\n", 0o644)
	if tree, how := f.bothTrees(w); how != "full scan" || f.git(w.Dir(), "cat-file", "blob", tree+":d/b.txt") != "through-link" {
		t.Fatalf("published by %s", how)
	}
}

// Prepare returns before the monitor of a fresh worktree watches every
// folder; what is written before Ready (here, while its first walk most
// likely runs) is never left out: the publication scans the whole
// worktree, and the next reset checks out all of it. After Ready the
// monitor vouches again.
func TestMonitorVouchesOnlyAfterReady(t *testing.T) {
	f := newCacheFixture(t)
	files := map[string]string{"a.txt": "a\n"}
	for i := range 400 {
		files[fmt.Sprintf("d%03d/e/f.txt", i)] = "f\n"
	}
	base := f.commit(files)
	w, err := f.cache.Prepare(f.ctx, f.source(), "job1", base)
	noErr(t, err)
	walking := !w.mon.mu.TryLock()
	if !walking {
		w.mon.mu.Unlock()
	}
	// The walk goes through the folders from the last: these are among
	// the first and last it reaches.
	f.sh(w.Dir(), "for d in d000 d001 d200 d398 d399; do echo new > $d/e/new.txt; echo changed > $d/e/f.txt; done")
	t.Logf("written while the first walk ran: %v", walking)
	tree, how := f.bothTrees(w)
	if how != "full scan" {
		t.Fatalf("published before Ready by %s", how)
	}
	if got := f.git(w.Dir(), "show", tree+":d000/e/new.txt"); got != "new" {
		t.Fatalf("the publication holds %q for d000/e/new.txt", got)
	}
	noErr(t, w.Release(f.ctx))

	// The pooled worktree's reset cannot rely on the monitor either.
	next := f.commit(map[string]string{"a.txt": "A\n"})
	w, err = f.cache.Prepare(f.ctx, f.source(), "job2", next)
	noErr(t, err)
	defer w.Keep()
	if w.resetHow != "full" {
		t.Fatalf("the worktree written before Ready was reset %q", w.resetHow)
	}
	if _, err := os.Lstat(filepath.Join(w.Dir(), "d399/e/new.txt")); !os.IsNotExist(err) {
		t.Fatalf("the reset left d399/e/new.txt: %v", err)
	}
	w.Ready()
	f.change(w, []string{"echo later > d100/e/later.txt"}, false, true)
	if _, how := f.bothTrees(w); how != "narrowed" {
		t.Fatalf("published after Ready by %s", how)
	}
}
