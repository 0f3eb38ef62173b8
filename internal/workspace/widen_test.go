package workspace

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"

	"drover/internal/gitcmd"
	"drover/internal/hubrepo"
)

// widenState is what a refused widening must leave as it was: the files,
// the record's cone, the cone git applies and the saved index.
func widenState(t *testing.T, w *Worktree) []string {
	t.Helper()
	cone, err := os.ReadFile(filepath.Join(w.admin(), "info", "sparse-checkout"))
	noErr(t, err)
	idx, err := os.ReadFile(w.path(".index"))
	noErr(t, err)
	return append(snapshotDir(t, w.Dir()), "cone "+string(cone), "record "+strings.Join(w.Sparse(), ","), "index "+string(idx))
}

// The agent widens its sparse checkout: the new folder's files (and those
// of the folders on the way) are checked out, and the next publications
// take a change and a deletion there, along with a change made before,
// while nothing still outside the cone is taken for deleted: through the
// monitor's narrowed add and git's full scan alike, after the saved index
// is lost, and in the worktree kept for the job's next attempt. Paths
// against the sparse rule, missing from the head, or where the agent put
// files first are refused and change nothing.
func TestWidenedSparseWorktreePublishesExactly(t *testing.T) {
	f := newCacheFixture(t)
	base := f.commit(map[string]string{"top.txt": "t\n", "a/b/y.txt": "y\n", "a/x.txt": "x\n",
		"other/far.txt": "far\n", "other/dir/d.txt": "d\n", "other/dir/e.txt": "e\n", "other/dir/sub/s.txt": "s\n", "c/z.txt": "z\n"})
	src := f.source()
	src.Sparse = []string{"a/b"}
	w, err := f.cache.Prepare(f.ctx, src, "job1", base)
	noErr(t, err)
	f.sh(w.Dir(), "echo y2 > a/b/y.txt")

	before := widenState(t, w)
	for _, bad := range [][]string{{"../up"}, {"/abs"}, {"oth*"}, {"other/[d]ir"}, {".git"}, {"nope"}, {"a/x.txt"}, {"other/dir", "nope"}, {}} {
		_, err := w.Widen(f.ctx, bad)
		var r *gitcmd.Refusal
		if !errors.As(err, &r) {
			t.Fatalf("widen %q: %v, want a refusal", bad, err)
		}
		if len(bad) > 0 && !strings.Contains(err.Error(), bad[len(bad)-1]) {
			t.Fatalf("widen %q: %v does not name the path", bad, err)
		}
		if after := widenState(t, w); !slices.Equal(before, after) {
			t.Fatalf("refused widening %q changed the worktree:\n%v\nwas\n%v", bad, after, before)
		}
	}
	// A tracked file outside the cone that the agent wrote itself would be
	// left out of the index by git: refused, naming it.
	f.sh(w.Dir(), "mkdir c && echo mine > c/z.txt")
	before = widenState(t, w)
	if _, err := w.Widen(f.ctx, []string{"c"}); err == nil || !strings.Contains(err.Error(), "c/z.txt") {
		t.Fatalf("widening over the agent's own c/z.txt: %v", err)
	}
	if after := widenState(t, w); !slices.Equal(before, after) {
		t.Fatalf("refused widening changed the worktree:\n%v", after)
	}
	f.sh(w.Dir(), "rm -r c")
	// Nor is a worktree widened whose saved index is gone.
	before = widenState(t, w)
	idx, err := os.ReadFile(w.path(".index"))
	noErr(t, err)
	noErr(t, os.Remove(w.path(".index")))
	if _, err := w.Widen(f.ctx, []string{"other/dir"}); err == nil || !strings.Contains(err.Error(), "no saved index") {
		t.Fatalf("widening without the saved index: %v", err)
	}
	write(t, w.path(".index"), string(idx), 0o600)
	if after := widenState(t, w); !slices.Equal(before, after) {
		t.Fatalf("refused widening changed the worktree:\n%v", after)
	}
	// A git stopped after it checked the files out (here: one that fails
	// once done) leaves nothing behind either.
	stopped := filepath.Join(t.TempDir(), "git")
	write(t, stopped, "#!/bin/sh\ngit \"$@\"; rc=$?\nfor a in \"$@\"; do [ \"$a\" = sparse-checkout ] && { echo stopped >&2; exit 1; }; done\nexit $rc\n", 0o755)
	real := w.repo.git
	w.repo.git.Bin = stopped
	if _, err := w.Widen(f.ctx, []string{"other/dir"}); err == nil || !strings.Contains(err.Error(), "stopped") {
		t.Fatalf("widening with a git that stops: %v", err)
	}
	w.repo.git = real
	if after := widenState(t, w); !slices.Equal(before, after) {
		t.Fatalf("failed widening changed the worktree:\n%v\nwas\n%v", after, before)
	}

	added, err := w.Widen(f.ctx, []string{"other/dir", "a/b/inner"})
	noErr(t, err)
	if !slices.Equal(added, []string{"other/dir"}) {
		t.Fatalf("added %v, want [other/dir] (a/b/inner is in the cone already)", added)
	}
	var files []string
	for _, l := range snapshotDir(t, w.Dir()) {
		if name, mode, _ := strings.Cut(l, " "); !strings.HasPrefix(mode, "d") {
			files = append(files, name)
		}
	}
	if want := []string{"a/b/y.txt", "a/x.txt", "other/dir/d.txt", "other/dir/e.txt", "other/dir/sub/s.txt", "other/far.txt", "top.txt"}; !slices.Equal(files, want) {
		t.Fatalf("widened worktree holds %v, want %v", files, want)
	}
	if again, err := w.Widen(f.ctx, []string{"other/dir/sub"}); err != nil || len(again) != 0 {
		t.Fatalf("widening to a folder already in the cone: %v, %v", again, err)
	}

	f.sh(w.Dir(), "echo e2 > other/dir/e.txt && rm other/dir/d.txt")
	f.bothTrees(w)
	changes := func(commit string) string {
		return f.git(f.src, "diff", "--name-status", "--no-renames", base, commit)
	}
	f.publishes(w, "true", changes, "M\ta/b/y.txt\nD\tother/dir/d.txt\nM\tother/dir/e.txt")

	// Without the saved index, git's full scan keeps to the new cone too.
	noErr(t, os.Remove(w.path(".index")))
	second := f.publishes(w, "echo s2 > other/dir/sub/s.txt", changes,
		"M\ta/b/y.txt\nD\tother/dir/d.txt\nM\tother/dir/e.txt\nM\tother/dir/sub/s.txt")
	noErr(t, w.Keep())

	// The record on disk holds the new cone: after a runner restart the
	// job's next attempt resumes the kept worktree with it, whatever the
	// job's spec says, and still publishes exactly.
	restarted := f.cache.newCacheLike(t)
	recs, err := restarted.records(w.repo)
	noErr(t, err)
	if rec := recs[w.name]; !slices.Equal(rec.Sparse, []string{"a/b", "other/dir"}) {
		t.Fatalf("saved record's cone %v", rec.Sparse)
	}
	w, err = restarted.Prepare(f.ctx, src, "job1", second)
	noErr(t, err)
	if !w.Resumed() {
		t.Fatal("the kept worktree was not resumed")
	}
	f.publishes(w, "rm other/dir/sub/s.txt", changes,
		"M\ta/b/y.txt\nD\tother/dir/d.txt\nM\tother/dir/e.txt\nD\tother/dir/sub/s.txt")
	noErr(t, w.Keep())

	// A reset to the base keeps the widened cone too.
	w, err = f.cache.Prepare(f.ctx, src, "job1", base)
	noErr(t, err)
	if b, err := os.ReadFile(filepath.Join(w.Dir(), "other/dir/d.txt")); err != nil || string(b) != "d\n" {
		t.Fatalf("reset widened worktree: other/dir/d.txt = %q, %v", b, err)
	}
	f.sh(w.Dir(), "rm other/dir/e.txt")
	third, p := f.publish(w)
	f.git(f.src, "fetch", "--quiet", p.Path, "+"+PublishRef+":refs/drover/jobs/job1-next")
	if got := changes(third); got != "D\tother/dir/e.txt" {
		t.Fatalf("publication of the next attempt changes\n%s", got)
	}
	noErr(t, w.Release(f.ctx))

	// A whole worktree has nothing to widen.
	w = f.prepare(f.cache, "job2", base)
	var r *gitcmd.Refusal
	if _, err := w.Widen(f.ctx, []string{"other/dir"}); !errors.As(err, &r) || !strings.Contains(err.Error(), "not sparse") {
		t.Fatalf("widening a whole worktree: %v", err)
	}
	noErr(t, w.Release(f.ctx))
}

// publishes runs script in the worktree, publishes, and fails unless
// describe(the commit) is want; the worktree then adopts the commit.
func (f *cacheFixture) publishes(w *Worktree, script string, describe func(string) string, want string) string {
	f.t.Helper()
	f.sh(w.Dir(), script)
	commit, p := f.publish(w)
	f.receive(p)
	if got := describe(commit); got != want {
		f.t.Fatalf("after %q the publication holds\n%s\nwant\n%s", script, got, want)
	}
	noErr(f.t, w.Adopt(f.ctx, commit))
	return commit
}

// newCacheLike is another Cache on the same home, as a restarted runner
// would open it.
func (c *Cache) newCacheLike(t *testing.T) *Cache {
	t.Helper()
	o, err := NewCache(CacheConfig{Home: c.home, Git: c.git, Logger: c.log})
	noErr(t, err)
	return o
}

// Widening a partial clone's sparse worktree fetches the new part's blobs
// from the hub; when the hub cannot serve them the widening fails saying
// so, and nothing changes: no file, no cone, no saved index, and the
// publication is still exact.
func TestWidenFetchesBlobsOrChangesNothing(t *testing.T) {
	f := newCacheFixture(t)
	base := f.commit(map[string]string{"top.txt": "t\n", "a/y.txt": "y\n", "far/f.txt": "f\n", "far/g.txt": "g\n"})
	backend, err := hubrepo.Repos{Root: filepath.Dir(f.src)}.HTTPBackend(false, os.Stderr)
	noErr(t, err)
	var down atomic.Bool
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if down.Load() || r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "unavailable", http.StatusServiceUnavailable)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	defer srv.Close()
	c := f.newCache(t.TempDir())
	src := Source{Project: "proj", URL: srv.URL + "/src", Token: "tok", Large: true, Sparse: []string{"a"}}
	w, err := c.Prepare(f.ctx, src, "job1", base)
	noErr(t, err)
	f.sh(w.Dir(), "echo y2 > a/y.txt")

	down.Store(true)
	before := widenState(t, w)
	if _, err := w.Widen(f.ctx, []string{"far"}); err == nil || !strings.Contains(err.Error(), "hub") {
		t.Fatalf("widening without the hub: %v", err)
	}
	if after := widenState(t, w); !slices.Equal(before, after) {
		t.Fatalf("failed widening changed the worktree:\n%v\nwas\n%v", after, before)
	}
	down.Store(false)
	_, err = w.Widen(f.ctx, []string{"far"})
	noErr(t, err)
	f.sh(w.Dir(), "rm far/g.txt")
	commit, p := f.publish(w)
	f.receive(p)
	if got := f.git(f.src, "diff", "--name-status", base, commit); got != "M\ta/y.txt\nD\tfar/g.txt" {
		t.Fatalf("publication changes\n%s", got)
	}
	noErr(t, w.Release(f.ctx))

	// Widening is no change of the agent's: an observe-mode check after it
	// finds none.
	w, err = c.Prepare(f.ctx, src, "job2", base)
	noErr(t, err)
	_, err = w.Widen(f.ctx, []string{"far"})
	noErr(t, err)
	ch, err := w.Changes(f.ctx)
	noErr(t, err)
	if !ch.Empty() {
		t.Fatalf("widening shows as changes: %s", ch)
	}
	noErr(t, w.Release(f.ctx))
}
