package workspace

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"drover/internal/gitcmd"
)

// A sparse job's worktree holds only its cone (the top level's files, the
// files of the folders on the way, everything under each folder), and its
// publications are exact: what lies outside the cone stays as it is in the
// result, through a second publication and a reset to a new head.
func TestSparseWorktreePublishesExactly(t *testing.T) {
	f := newCacheFixture(t)
	base := f.commit(map[string]string{"top.txt": "t\n", "a/x.txt": "x\n", "a/b/y.txt": "y\n", "a/q/n.txt": "n\n", "c/z.txt": "z\n"})
	src := f.source()
	src.Sparse = []string{"a/b"}
	w, err := f.cache.Prepare(f.ctx, src, "job1", base)
	noErr(t, err)
	have := func(w *Worktree) []string { return worktreeFiles(t, w) }
	if got, want := have(w), []string{"a/b/y.txt", "a/x.txt", "top.txt"}; !slices.Equal(got, want) {
		t.Fatalf("sparse worktree holds %v, want %v", got, want)
	}
	everything := func(commit string) string { return f.git(f.src, "ls-tree", "-r", "--name-only", commit) }

	f.publishes(w, "echo y2 > a/b/y.txt && echo new > a/b/new.txt", everything,
		"a/b/new.txt\na/b/y.txt\na/q/n.txt\na/x.txt\nc/z.txt\ntop.txt")
	// Without the saved index the publication scans the whole worktree:
	// still nothing outside the cone is taken for deleted.
	noErr(t, os.Remove(w.path(".index")))
	f.publishes(w, "rm a/b/new.txt", everything, "a/b/y.txt\na/q/n.txt\na/x.txt\nc/z.txt\ntop.txt")
	noErr(t, w.Keep())

	// The next attempt starts from the base again: a whole reset that
	// keeps the cone.
	w, err = f.cache.Prepare(f.ctx, src, "job1", base)
	noErr(t, err)
	if got, want := have(w), []string{"a/b/y.txt", "a/x.txt", "top.txt"}; !slices.Equal(got, want) || w.resetHow != "full" {
		t.Fatalf("reset sparse worktree holds %v (reset %q), want %v", got, w.resetHow, want)
	}
	if b, _ := os.ReadFile(filepath.Join(w.Dir(), "a/b/y.txt")); string(b) != "y\n" {
		t.Fatalf("a/b/y.txt after reset = %q", b)
	}
	noErr(t, w.Release(f.ctx))
	recs, err := f.cache.records(w.repo)
	noErr(t, err)
	if len(recs) != 0 {
		t.Fatalf("a released sparse worktree was pooled: %v", recs)
	}

	// A whole job after it gets a whole worktree.
	w = f.prepare(f.cache, "job2", base)
	if got := have(w); len(got) != 5 {
		t.Fatalf("whole worktree after a sparse one holds %v", got)
	}
	noErr(t, w.Release(f.ctx))
}

// A sparse path the commit lacks (or that is a file) fails the preparation
// with a refusal that names it.
func TestSparsePathMatchingNothingIsRefused(t *testing.T) {
	f := newCacheFixture(t)
	base := f.commit(map[string]string{"a/x.txt": "x\n", "file": "f\n"})
	for _, p := range []string{"nope", "file", "a/x.txt"} {
		src := f.source()
		src.Sparse = []string{"a", p}
		_, err := f.cache.Prepare(f.ctx, src, "job-"+strings.ReplaceAll(p, "/", "-"), base)
		var r *gitcmd.Refusal
		if !errors.As(err, &r) || !strings.Contains(r.Reason, p) {
			t.Fatalf("sparse path %q: %v, want a refusal naming it", p, err)
		}
	}
}

// What the agent writes outside the cone is published like anything else
// (a new folder, a file of the commit it wrote back), and what it did not
// write there stays as it is; a publication refused for it lost the whole
// attempt's work. Narrowed and full-scan publications alike, and the next
// attempt's reset leaves the worktree the cone of the new head.
func TestSparsePublishesWhatTheAgentWroteOutsideTheCone(t *testing.T) {
	f := newCacheFixture(t)
	base := f.commit(map[string]string{"top.txt": "t\n", "a/b/y.txt": "y\n", "c/z.txt": "z\n", "c/w.txt": "w\n"})
	src := f.source()
	src.Sparse = []string{"a/b"}
	w, err := f.cache.Prepare(f.ctx, src, "job1", base)
	noErr(t, err)
	w.Ready()
	var heads []string
	for i, how := range []string{"narrowed", "full scan"} {
		if how == "full scan" {
			noErr(t, os.Remove(w.path(".index")))
		}
		script := fmt.Sprintf("mkdir -p d c && echo new%d > d/new.txt && echo mine%d > c/z.txt && echo n%d > a/b/n.txt", i, i, i)
		if i == 0 {
			script += " && rm a/b/y.txt"
		}
		commit := f.publishes(w, script, func(commit string) string { return f.git(f.src, "ls-tree", "-r", "--name-only", commit) },
			"a/b/n.txt\nc/w.txt\nc/z.txt\nd/new.txt\ntop.txt")
		for p, want := range map[string]string{"c/z.txt": fmt.Sprintf("mine%d\n", i), "d/new.txt": fmt.Sprintf("new%d\n", i), "c/w.txt": "w\n"} {
			if got := f.git(f.src, "show", commit+":"+p); got+"\n" != want {
				t.Fatalf("%s publication: %s = %q, want %q", how, p, got, want)
			}
		}
		heads = append(heads, commit)
	}
	noErr(t, w.Keep())
	w, err = f.cache.Prepare(f.ctx, src, "job1", heads[0])
	noErr(t, err)
	files := worktreeFiles(t, w)
	if want := []string{"a/b/n.txt", "top.txt"}; !slices.Equal(files, want) {
		t.Fatalf("the next attempt's sparse worktree holds %v, want %v", files, want)
	}
	noErr(t, w.Release(f.ctx))
}

// worktreeFiles lists the files in a worktree (not .git), sorted.
func worktreeFiles(t *testing.T, w *Worktree) []string {
	t.Helper()
	var files []string
	noErr(t, filepath.WalkDir(w.Dir(), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && d.Name() != ".git" {
			rel, _ := filepath.Rel(w.Dir(), p)
			files = append(files, filepath.ToSlash(rel))
		}
		return err
	}))
	slices.Sort(files)
	return files
}

// A job whose attempt removed one of its sparse folders, then published,
// still prepares at its new head: the folder stays in the cone, matching
// nothing, and the publication keeps everything else. At the job's base
// (or with no base known) a missing folder is still refused.
func TestSparseFolderRemovedByTheJobStillPrepares(t *testing.T) {
	f := newCacheFixture(t)
	base := f.commit(map[string]string{"top.txt": "t\n", "a/y.txt": "y\n", "b/z.txt": "z\n", "c/w.txt": "w\n"})
	head := f.commit(map[string]string{"a/y.txt": "", "b/z.txt": "z2\n"})
	src := f.source()
	src.Sparse, src.Base = []string{"a", "b"}, base
	w, err := f.cache.Prepare(f.ctx, src, "job1", head)
	noErr(t, err)
	if got := worktreeFiles(t, w); !slices.Equal(got, []string{"b/z.txt", "top.txt"}) {
		t.Fatalf("worktree holds %v", got)
	}
	f.publishes(w, "echo z3 > b/z.txt", func(c string) string { return f.git(f.src, "ls-tree", "-r", "--name-only", c) },
		"b/z.txt\nc/w.txt\ntop.txt")
	noErr(t, w.Keep())
	for _, bad := range []string{"", head} {
		src.Base = bad
		if _, err := f.cache.Prepare(f.ctx, src, "job2", head); err == nil || !strings.Contains(err.Error(), "sparse path a ") {
			t.Fatalf("base %q: a folder the head lacks: %v", bad, err)
		}
	}
}
