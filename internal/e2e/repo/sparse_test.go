package repo

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/e2e/e2ekit"
	"drover/internal/gitcmd"
	"drover/internal/job"
	"drover/internal/localrepo"
	"drover/internal/testkit"
)

// A large project's job with sparse folders, on a real hub and runner: the
// runner's clone is partial (history's blobs stay on the hub), the agent
// sees only its cone, and the result keeps everything outside the cone
// that the agent did not write.
func TestLargeSparseJobPublishesExactly(t *testing.T) {
	t.Parallel()
	h := testkit.StartHub(t, bin)
	r := h.StartRunner(t, "r1")
	src, base := largeSparseProject(t, h)
	if out, err := h.CLI("run", "--repo", src, "--sparse", "nope", "--agent", "exec", "--", "true"); err == nil || !strings.Contains(out, "nope") {
		t.Fatalf("a sparse folder the base lacks was accepted: %v\n%s", err, out)
	}

	v := e2ekit.RunRepo(t, h, "--repo", src, "--sparse", "lib", "--agent", "exec", "--", "sh", "-c",
		`test -f a.txt && test ! -e other && echo agent > lib/keep.txt && mkdir fresh && echo new > fresh/new.txt`)
	if !slices.Equal(v.Sparse, []string{"lib"}) {
		t.Fatalf("submitted job's sparse folders: %v", v.Sparse)
	}
	c := h.Client()
	end := testkit.WaitJob(t, c, v.ID, 120*time.Second, func(v apitypes.JobView) bool { return v.State.Terminal() })
	if end.State != job.Completed || end.Head == base {
		t.Fatalf("job ended %s (head %s):\n%s", end.State, end.Head, testkit.Log(t, c, v.ID, 0))
	}
	// A folder the agent made outside its cone is published too.
	if got := e2ekit.ResultChanges(t, h, src, base, v.ID); got != "A\tfresh/new.txt\nM\tlib/keep.txt" {
		t.Fatalf("result changes:\n%s", got)
	}

	var repo string
	_ = filepath.WalkDir(r.Home, func(p string, d fs.DirEntry, err error) error {
		if err == nil && d.IsDir() && d.Name() == "demo.git" && filepath.Base(filepath.Dir(p)) == "repos" {
			repo = p
		}
		return nil
	})
	if repo == "" {
		t.Fatal("no clone of demo in the runner's home")
	}
	missing := 0
	for _, l := range strings.Split(e2ekit.Git(t, repo, "rev-list", "--objects", "--missing=print", base), "\n") {
		if strings.HasPrefix(l, "?") {
			missing++
		}
	}
	if missing == 0 {
		t.Fatal("the runner's clone of a large project misses no blob")
	}
}

// largeSparseProject is the demo project with folders beyond lib (other,
// other/dir), on the hub and marked large; it returns the source checkout
// and the base commit.
func largeSparseProject(t *testing.T, h *testkit.Hub) (src, base string) {
	t.Helper()
	src = e2ekit.SourceCheckout(t)
	for name, content := range map[string]string{"other/far.txt": "far\n", "other/dir/edit.txt": "edit\n", "other/dir/gone.txt": "gone\n", "lib/keep.txt": "keep 2\n"} {
		if err := os.MkdirAll(filepath.Join(src, filepath.Dir(name)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(src, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	e2ekit.Git(t, src, "add", "-A")
	e2ekit.Git(t, src, "commit", "--quiet", "-m", "second")
	base = e2ekit.Git(t, src, "rev-parse", "HEAD")

	// The project exists on the hub (a user's first push) before any
	// runner fetches it; then its owner marks it large.
	co := localrepo.Checkout{Git: gitcmd.Git{}, Dir: src}
	if err := co.Push(context.Background(), h.URL+"/git/demo", h.Admin, base, gitcmd.UploadRefPrefix+"first"); err != nil {
		t.Fatal(err)
	}
	if out, err := h.CLI("projects", "config", "demo", "--large"); err != nil || !strings.Contains(out, "partial") {
		t.Fatalf("projects config --large: %v\n%s", err, out)
	}
	return src, base
}

// The agent of a large project's sparse job widens its cone from inside
// the sandbox with `drover tool sparse add` (a folder the base lacks is
// refused): the runner checks the folder out, fetching its blobs from the
// hub, and the result differs from the base by exactly the agent's change
// and deletion there.
func TestLargeSparseJobWidensItsCone(t *testing.T) {
	t.Parallel()
	h := testkit.StartHub(t, bin)
	h.StartRunner(t, "r1")
	src, base := largeSparseProject(t, h)
	v := e2ekit.RunRepo(t, h, "--repo", src, "--sparse", "lib", "--tools", "--agent", "exec", "--", "sh", "-c", `
		set -e
		test ! -e other
		if drover tool sparse add nope 2>refused.txt; then exit 5; fi
		grep "not a folder" refused.txt && rm refused.txt
		drover tool sparse add other/dir
		git sparse-checkout reapply
		test -f other/far.txt
		echo agent >> other/dir/edit.txt
		rm other/dir/gone.txt
		git status --short --untracked-files=no
		drover tool deliver "widened the cone and edited there"`)
	c := h.Client()
	end := testkit.WaitJob(t, c, v.ID, 120*time.Second, func(v apitypes.JobView) bool { return v.State.Terminal() })
	log := testkit.Log(t, c, v.ID, 0)
	// The agent's own git keeps to the widened cone too.
	if end.State != job.Completed || !strings.Contains(log, "sparse checkout widened by other/dir") ||
		!strings.Contains(log, " M other/dir/edit.txt\n D other/dir/gone.txt\n") {
		t.Fatalf("job ended %s (head %s):\n%s", end.State, end.Head, log)
	}
	// The hub took the widened cone from the publication: a later attempt
	// (a retry, another runner) starts from it.
	if !slices.Equal(end.Sparse, []string{"lib", "other/dir"}) {
		t.Fatalf("the job's cone after widening: %v", end.Sparse)
	}
	clone := filepath.Join(t.TempDir(), "clone")
	e2ekit.Git(t, src, "clone", "--quiet", src, clone)
	if out, err := h.CLI("fetch", v.ID, "--repo", clone); err != nil {
		t.Fatalf("drover fetch: %v\n%s", err, out)
	}
	if got := e2ekit.Git(t, clone, "diff", "--name-status", "--no-renames", base, "drover/"+v.ID); got != "M\tother/dir/edit.txt\nD\tother/dir/gone.txt" {
		t.Fatalf("result changes:\n%s", got)
	}
	if got := e2ekit.Git(t, clone, "show", "drover/"+v.ID+":other/dir/edit.txt"); got != "edit\nagent" {
		t.Fatalf("other/dir/edit.txt in the result: %q", got)
	}
}
