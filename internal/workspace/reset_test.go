//go:build linux

package workspace

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"drover/internal/gitcmd"
)

// resetResult is what a reset leaves: the files (folders without their
// permission bits, which git does not track), the index entries, what
// `git status` reports (nothing, for a worktree exactly at head), and
// whether the index's stat data is fresh (nothing for git to re-read).
type resetResult struct {
	files, index, status string
	statFresh            bool
}

func (f *cacheFixture) resetResult(w *Worktree) resetResult {
	f.t.Helper()
	var files []string
	for _, l := range snapshotDir(f.t, w.Dir()) {
		if name, mode, _ := strings.Cut(l, " "); strings.HasPrefix(mode, "d") {
			l = name + " folder"
		}
		files = append(files, l)
	}
	dirs := []string{"--git-dir=" + w.admin(), "--work-tree=" + w.Dir()}
	_, dirty := gitcmd.Git{}.Run(f.ctx, gitcmd.Cmd{Dir: w.Dir(), Args: append(dirs, "--no-optional-locks", "diff-files", "--quiet")})
	return resetResult{
		statFresh: dirty == nil,
		files:     strings.Join(files, "\n"),
		index:     f.git(w.Dir(), append(dirs, "ls-files", "--stage")...),
		status:    f.git(w.Dir(), append(dirs, "--no-optional-locks", "status", "--porcelain=v2", "--ignored", "--untracked-files=all")...),
	}
}

// bothResets resets the worktree to head twice from the same state: as a
// pooled worktree is (narrowed when the monitor vouches for the changes),
// and then, with the files, saved index and record put back as they were
// and the monitor hidden, by the full checkout, clean and checks. It
// returns how the first went and fails the test unless both left the same
// files and index, and git sees nothing to report in either.
func (f *cacheFixture) bothResets(w *Worktree, head string) string {
	f.t.Helper()
	noErr(f.t, f.cache.withLock(f.ctx, w.repo, lockClone, func() error { return f.cache.ensureCommit(f.ctx, w.repo, w.src, head) }))
	saved := filepath.Join(f.t.TempDir(), "saved")
	// The saved index's shared part too: the first reset may replace it.
	f.sh(filepath.Dir(saved), "cp -a "+w.Dir()+" saved/ && cp -a "+w.path(".index")+" saved.index && mkdir shared && cp -a "+w.admin()+"/sharedindex.* shared/")
	rec := w.rec
	noErr(f.t, w.reset(f.ctx, head, nil))
	how, wrote := w.resetHow, w.resetWrote
	fast := f.resetResult(w)

	mon := w.mon
	w.mon = nil
	f.sh(filepath.Dir(saved), "rm -rf "+w.Dir()+" && cp -a saved/ "+w.Dir()+" && cp -a saved.index "+w.path(".index")+" && cp -a shared/* "+w.admin())
	w.rec = rec
	noErr(f.t, w.reset(f.ctx, head, nil))
	if w.resetHow != "full" {
		f.t.Fatalf("the reference reset went %q", w.resetHow)
	}
	full := f.resetResult(w)
	w.unwatch()
	w.mon = mon
	if fast != full {
		f.t.Fatalf("the %s reset differs from the full one:\nfiles:\n%s\nindex:\n%s\nstatus: %q, stat data fresh: %v\nfull reset:\nfiles:\n%s\nindex:\n%s\nstatus: %q, stat data fresh: %v",
			how, fast.files, fast.index, fast.status, fast.statFresh, full.files, full.index, full.status, full.statFresh)
	}
	if fast.status != "" || !fast.statFresh {
		f.t.Fatalf("after the reset: git status %q, stat data fresh: %v", fast.status, fast.statFresh)
	}
	f.wrote = wrote
	return how
}

// Each change an attempt leaves, on top of a new base that itself renames,
// deletes, retypes and re-modes files, is reset through the changed paths
// exactly as the full checkout, clean and checks reset it, unless the
// monitor cannot vouch for the changes.
func TestResetNarrowedEqualsFullReset(t *testing.T) {
	files := map[string]string{".gitignore": "*.log\nbuild/\n", "a.txt": "a\n", "b.txt": "b\n", "dir/x.txt": "x\n",
		"dir/sub/y.txt": "y\n", "other/z.txt": "z\n", "tool*": "#!/bin/sh\n", "link": "->a.txt", "keep.log": "tracked\n",
		"gone/only.txt": "o\n"}
	// The new base: modified, deleted, added, renamed, chmod, retargeted
	// symlink, a file that becomes a symlink, a folder emptied.
	next := map[string]string{"a.txt": "A\n", "b.txt": "", "new/deep/n.txt": "n\n", "dir/x.txt": "", "dir/x2.txt": "x\n",
		"other/z.txt*": "z\n", "link": "->other/z.txt", "dir/sub/y.txt": "->../x2.txt", "gone/only.txt": ""}
	cases := []struct {
		name string
		next map[string]string // the new base's changes; nil: next above
		// nextScript makes the new base instead, in the source.
		nextScript string
		change     []string // shell steps, each fully recorded by the monitor before the next
		held       bool     // the monitor's reader is held up during each step
		broken     bool     // the kernel reports a queue overflow after the steps
		forget     []string // paths taken out of the monitor's record after the steps, as if it had missed them
		how        string   // "" when it depends on how quickly the reader runs
	}{
		{name: "nothing changed", how: "changed paths"},
		{name: "same head, nothing changed", next: map[string]string{}, how: "changed paths"},
		{name: "same head, files changed", next: map[string]string{}, change: []string{"echo changed > a.txt && rm b.txt && echo u > u.txt"}, how: "changed paths"},
		{name: "modified file", change: []string{"echo changed > other/z.txt"}, how: "changed paths"},
		{name: "same-size edit of a file the base changes too", change: []string{"echo B > a.txt"}, how: "changed paths"},
		{name: "deleted file", change: []string{"rm tool"}, how: "changed paths"},
		{name: "deleted folder", change: []string{"rm -r dir"}, how: "changed paths"},
		{name: "rename across folders", change: []string{"mv dir/sub/y.txt other/y.txt"}, how: "changed paths"},
		{name: "renamed folder", change: []string{"mv dir renamed", "echo more >> renamed/sub/y.txt"}, how: "changed paths"},
		{name: "mode changes", change: []string{"chmod +x a.txt && chmod -x tool && chmod +x other/z.txt"}, how: "changed paths"},
		{name: "symlinks", change: []string{"ln -sf tool link && rm other/z.txt && ln -s ../a.txt other/z.txt && ln -s /etc ext"}, how: "changed paths"},
		{name: "folder replaced by a file", change: []string{"rm -r dir && echo f > dir"}, how: "changed paths"},
		{name: "file replaced by a folder", change: []string{"rm a.txt && mkdir a.txt && echo in > a.txt/in"}, how: "changed paths"},
		{name: "folder replaced by a symlink", change: []string{"rm -r other && ln -s dir other"}, how: "changed paths"},
		{name: "untracked and ignored files", change: []string{"echo u > u.txt && mkdir -p build/o && echo o > build/o/x.o && echo t > dir/trace.log && echo n > new.log"},
			how: "changed paths"},
		{name: "empty folders", change: []string{"mkdir -p e/f/g dir/sub/empty"}, how: "changed paths"},
		{name: "tracked file that matches an ignore rule", change: []string{"echo more >> keep.log"}, how: "changed paths"},
		{name: "names that look like patterns", change: []string{"echo s > 'dir/*' && echo q > 'dir/[a].txt' && echo c > ':(glob)x' && echo sp > ' lead'"},
			how: "changed paths"},
		{name: "file made, seen, then deleted", change: []string{"echo t > made.txt", "rm made.txt"}, how: "changed paths"},
		{name: "temporary file written and renamed into place", change: []string{"echo new > a.tmp && mv a.tmp a.txt"}, how: "changed paths"},
		{name: "base turns a file into a folder", nextScript: "git rm -q other/z.txt && mkdir -p other/z.txt && echo i > other/z.txt/in && git add other && git commit -qm folder",
			change: []string{"echo w > other/z.txt"}, how: "changed paths"},
		{name: "base turns a folder into a file", nextScript: "git rm -rq dir && echo file > dir && git add dir && git commit -qm file",
			change: []string{"echo w > dir/new.txt"}, how: "changed paths"},
		{name: "base empties a folder the agent wrote in", change: []string{"echo w > gone/agent.txt"}, how: "changed paths"},
		{name: "base from unrelated history", nextScript: "git checkout -q --orphan side && git rm -rqf . && printf '*.log\\nbuild/\\n' > .gitignore && echo s > a.txt && mkdir -p dir/new && echo x > dir/new/x.txt && git add -A && git commit -qm unrelated",
			change: []string{"echo changed > other/z.txt && rm b.txt"}, how: "changed paths"},
		// Full resets: the monitor cannot vouch for these.
		{name: "file made and deleted, one batch", change: []string{"echo t > made.txt && rm made.txt"}, held: true, how: "full"},
		{name: "overflowed monitor", change: []string{"echo changed > a.txt"}, broken: true, how: "full"},
		{name: "hard link written through", change: []string{"ln a.txt dir/alias", "echo through-link > dir/alias"}, how: "full"},
		{name: "ignore rules changed", change: []string{"echo l > debug.txt", "echo '*.txt' >> .gitignore"}, how: "full"},
		{name: "base changes the ignore rules", next: map[string]string{".gitignore": "*.tmp\n"}, change: []string{"echo l > debug.log"}, how: "full"},
		{name: "narrowed reset fails: a folder above a path to reset is a file", change: []string{"rm -r dir && echo f > dir"},
			forget: []string{"dir"}, how: "full"},
		{name: "nested repository", change: []string{"mkdir v && cd v && git init -q && echo v > v && git add v && git commit -qm v"}, how: "full"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, _, w := startedJob(t, files)
			nextFiles := tc.next
			if nextFiles == nil {
				nextFiles = next
			}
			var head string
			if tc.nextScript != "" {
				f.sh(f.src, tc.nextScript)
				head = f.git(f.src, "rev-parse", "HEAD")
			} else {
				head = f.commit(nextFiles)
			}
			f.change(w, tc.change, tc.held, tc.how == "changed paths")
			if tc.forget != nil {
				w.mon.mu.Lock()
				for _, p := range tc.forget {
					delete(w.mon.paths, p)
				}
				w.mon.mu.Unlock()
			}
			if tc.broken {
				w.mon.mu.Lock()
				w.mon.event(-1, unix.IN_Q_OVERFLOW, 0, "")
				w.mon.mu.Unlock()
			}
			if how := f.bothResets(w, head); tc.how != "" && how != tc.how {
				t.Errorf("reset went %q, want %q", how, tc.how)
			}
		})
	}
}

// The narrowed reset writes head's files itself (no folder at a path in
// either base, no attribute file that could apply) and ends exactly as the
// full reset does; otherwise git restores them.
func TestResetWritesFilesLikeCheckout(t *testing.T) {
	files := map[string]string{"a.txt": "a\n", "tool*": "#!/bin/sh\n", "link": "->a.txt", "d/only.txt": "o\n",
		"d/keep.txt": "k\n", "crlf/.gitattributes": "*.txt text eol=crlf\n", "crlf/c.txt": "c\n"}
	cases := []struct {
		name   string
		next   map[string]string
		change []string
		wrote  bool
	}{
		{name: "file becomes a symlink and a symlink a file", next: map[string]string{"a.txt": "->tool", "link": "now a file\n"}, wrote: true},
		{name: "agent swaps a symlink and a file", next: map[string]string{}, change: []string{"rm link a.txt && echo f > link && ln -s tool a.txt"}, wrote: true},
		{name: "mode-only changes", next: map[string]string{"a.txt*": "a\n", "tool": "#!/bin/sh\n"}, wrote: true},
		{name: "agent changes modes only", next: map[string]string{}, change: []string{"chmod +x a.txt && chmod -x tool"}, wrote: true},
		{name: "agent replaces a file by a folder", next: map[string]string{"a.txt": "A\n"}, change: []string{"rm a.txt && mkdir -p a.txt/in && echo x > a.txt/in/x"}, wrote: true},
		{name: "agent replaces a folder's file by a folder and back", next: map[string]string{}, change: []string{"rm d/keep.txt && mkdir d/keep.txt", "rmdir d/keep.txt && echo back > d/keep.txt"}, wrote: true},
		{name: "base deletes the last file of a folder", next: map[string]string{"d/only.txt": "", "d/keep.txt": ""}, wrote: true},
		{name: "base adds a file in new folders", next: map[string]string{"n/e/w.txt": "w\n", "a.txt": ""}, wrote: true},
		{name: "agent deletes a folder", next: map[string]string{}, change: []string{"rm -r d"}, wrote: false},
		{name: "base turns a file into a folder", next: map[string]string{"a.txt": "", "a.txt/in.txt": "i\n"}, wrote: false},
		{name: "more bytes than the reset writes itself", next: map[string]string{"big.txt": strings.Repeat("big\n", maxWriteBytes/4+1)}, wrote: false},
		{name: "an attribute file applies", next: map[string]string{"crlf/c.txt": "c\nd\n"}, change: []string{"echo agent > crlf/c.txt"}, wrote: false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f, _, w := startedJob(t, files)
			head := f.commit(tc.next)
			f.change(w, tc.change, false, true)
			if how := f.bothResets(w, head); how != "changed paths" || f.wrote != tc.wrote {
				t.Errorf("reset went %q, wrote the files %v; want narrowed, wrote them %v", how, f.wrote, tc.wrote)
			}
		})
	}
}

// fromPoolLikeFresh prepares job at head from the pool, kept when the test
// ends, and fails the test unless the reset was narrowed and left what a
// fresh worktree of head, prepared by another runner, has.
func (f *cacheFixture) fromPoolLikeFresh(job, head string) {
	f.t.Helper()
	w := f.prepare(f.cache, job, head)
	f.t.Cleanup(func() { w.Keep() })
	if w.resetHow != "changed paths" {
		f.t.Fatalf("the pooled worktree was reset %q", w.resetHow)
	}
	fresh := f.prepare(f.newCache(filepath.Join(f.t.TempDir(), "other")), "fresh", head)
	defer fresh.Keep()
	if got, want := f.resetResult(w), f.resetResult(fresh); got != want {
		f.t.Fatalf("reset worktree:\n%+v\nfresh one:\n%+v", got, want)
	}
}

// A worktree released to the pool is reset for the next job through what
// changed, by the monitor that went on watching it while pooled, and ends
// up as a fresh worktree of the new base is.
func TestPooledResetUsesTheIdleMonitor(t *testing.T) {
	f := newCacheFixture(t)
	base := f.commit(map[string]string{"a.txt": "a\n", "d/b.txt": "b\n", "d/c.txt": "c\n", "tool*": "#!/bin/sh\n"})
	next := f.commit(map[string]string{"a.txt": "A\n", "d/c.txt": "", "n/new.txt": "n\n"})
	w := f.prepare(f.cache, "job1", base)
	f.sh(w.Dir(), "echo agent > d/b.txt && echo u > untracked.txt && chmod -x tool")
	noErr(t, w.Release(f.ctx))
	if f.cache.parked() != 1 {
		t.Fatalf("%d idle monitors, want 1", f.cache.parked())
	}
	f.sh(w.Dir(), "echo while-pooled > a.txt && mkdir -p late && echo l > late/l.txt") // another process, or a straggler
	f.fromPoolLikeFresh("job2", next)
}

// A saved index another process replaced while the worktree was idle is
// not what the idle monitor's base refers to: the reset is the full one.
func TestIdleMonitorDroppedWhenTheSavedIndexChanged(t *testing.T) {
	f := newCacheFixture(t)
	base := f.commit(map[string]string{"a.txt": "a\n"})
	next := f.commit(map[string]string{"a.txt": "A\n"})
	w := f.prepare(f.cache, "job1", base)
	noErr(t, w.Release(f.ctx))
	idx := w.path(".index")
	b, err := os.ReadFile(idx)
	noErr(t, err)
	noErr(t, os.Remove(idx))
	noErr(t, os.WriteFile(idx, b, 0o600))
	w = f.prepare(f.cache, "job2", next)
	defer w.Keep()
	if w.resetHow != "full" {
		t.Fatalf("reset %q with a monitor parked for another index", w.resetHow)
	}
	if got := f.git(w.Dir(), "show", "HEAD:a.txt"); got != "A" || !slices.Contains(listDir(t, w.Dir()), "a.txt") {
		t.Fatalf("a.txt at HEAD is %q", got)
	}
}

// Writes through the sandbox's bind mount of the worktree are seen by the
// monitor, so the narrowed reset undoes them as the full one does.
func TestResetAfterWritesFromASandbox(t *testing.T) {
	f, _, w := startedJob(t, map[string]string{"a.txt": "a\n", "d/b.txt": "b\n", "d/c.txt": "c\n"})
	head := f.commit(map[string]string{"d/c.txt": "C\n"})
	f.inSandbox(w, "echo sandboxed > a.txt && mkdir -p new/deep && echo n > new/deep/n.txt && rm d/b.txt && chmod +x d/c.txt")
	if _, ok := w.mon.mark(); !ok {
		t.Fatalf("the monitor broke: %s", w.mon.broken)
	}
	if how := f.bothResets(w, head); how != "changed paths" {
		t.Fatalf("reset went %q", how)
	}
}

// A publication the job adopted becomes the saved index, but leaves out
// ignored files: the next job's narrowed reset still removes them, and the
// files the publication recorded are reset too.
func TestPooledResetAfterAnAdoptedPublication(t *testing.T) {
	f := newCacheFixture(t)
	base := f.commit(map[string]string{".gitignore": "*.log\nbuild/\n", "a.txt": "a\n", "d/b.txt": "b\n"})
	next := f.commit(map[string]string{"d/b.txt": "B\n"})
	w := f.prepare(f.cache, "job1", base)
	f.sh(w.Dir(), "echo agent > a.txt && echo n > new.txt && echo l > debug.log && mkdir -p build/o && echo o > build/o/x.o")
	commit, _ := f.publish(w)
	noErr(t, w.Adopt(f.ctx, commit))
	f.sh(w.Dir(), "echo after > d/after.txt")
	commit, _ = f.publish(w)
	noErr(t, w.Adopt(f.ctx, commit))
	noErr(t, w.Release(f.ctx))
	f.fromPoolLikeFresh("job2", next)
}

// An idle monitor whose worktree another runner removed ends, and the
// cache drops it when it next parks one.
func TestIdleMonitorOfARemovedWorktreeIsDropped(t *testing.T) {
	f := newCacheFixture(t)
	base := f.commit(map[string]string{"a.txt": "a\n"})
	w := f.prepare(f.cache, "job1", base)
	noErr(t, w.Release(f.ctx))
	f.cache.idle.mu.Lock()
	mon := f.cache.idle.byDir[w.Dir()].mon
	f.cache.idle.mu.Unlock()
	other := f.newCache(f.home)
	other.poolSize = 0
	noErr(t, f.prepare(other, "job2", base).Release(f.ctx)) // the pooled worktree, then removed
	for i := 0; i < 500 && !mon.ended(); i++ {
		time.Sleep(10 * time.Millisecond)
	}
	if !mon.ended() {
		t.Fatal("the idle monitor of a removed worktree goes on")
	}
	noErr(t, f.prepare(f.cache, "job3", base).Keep())
	if n := f.cache.parked(); n != 1 {
		t.Fatalf("%d idle monitors, want the kept worktree's only", n)
	}
}

// The check for untracked files under a narrowed reset's paths finds
// whatever head does not have there.
func TestUntrackedUnderTheResetPaths(t *testing.T) {
	f, base, w := startedJob(t, map[string]string{"a.txt": "a\n", "d/b.txt": "b\n", "d/e/c.txt": "c\n", "link": "->a.txt"})
	scope := &resetScope{paths: []string{"a.txt", "d", "gone.txt", "link"},
		head: map[string]string{"a.txt": "blob", "d": "tree", "link": "blob"}}
	for _, tc := range []struct{ name, script, want string }{
		{name: "exactly head"},
		{name: "file head lacks", script: "echo g > gone.txt", want: "gone.txt"},
		{name: "folder where head has a file", script: "rm a.txt && mkdir a.txt", want: "a.txt/"},
		{name: "untracked file in a folder", script: "echo u > d/e/u.txt", want: "d/e/u.txt"},
		{name: "empty folder in a folder", script: "mkdir -p d/x/y", want: "d/x/"},
		{name: "ignored-looking file", script: "echo o > d/build.o", want: "d/build.o"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.script != "" {
				f.sh(w.Dir(), tc.script)
				defer f.sh(w.Dir(), "git reset -q --hard && git clean -qffdx")
			}
			left, err := w.untrackedIn(f.ctx, base, scope)
			noErr(t, err)
			if got := strings.Join(left, " "); got != tc.want {
				t.Fatalf("left %q, want %q", got, tc.want)
			}
		})
	}
}

// A saved index whose shared part is gone cannot be read: the narrowed
// reset fails, and so would the full checkout over it, which then checks
// out without an index.
func TestResetWithoutTheSharedIndex(t *testing.T) {
	f := newCacheFixture(t)
	base := f.commit(map[string]string{"a.txt": "a\n", "d/b.txt": "b\n"})
	next := f.commit(map[string]string{"a.txt": "A\n"})
	w := f.prepare(f.cache, "job1", base)
	noErr(t, w.Release(f.ctx))
	f.sh(w.admin(), "ls sharedindex.* && rm sharedindex.*")
	w = f.prepare(f.cache, "job2", next)
	defer w.Keep()
	if w.resetHow != "full" {
		t.Fatalf("reset went %q", w.resetHow)
	}
	fresh := f.prepare(f.newCache(filepath.Join(t.TempDir(), "other")), "fresh", next)
	defer fresh.Keep()
	if got, want := f.resetResult(w), f.resetResult(fresh); got != want {
		t.Fatalf("reset worktree:\n%+v\nfresh one:\n%+v", got, want)
	}
}
