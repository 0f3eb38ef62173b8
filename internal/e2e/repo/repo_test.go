package repo

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/e2e/e2ekit"
	"drover/internal/gitcmd"
	"drover/internal/job"
	"drover/internal/localrepo"
	"drover/internal/protocol"
	"drover/internal/testkit"
)

func TestRepoJobPublishesExactlyItsChanges(t *testing.T) {
	t.Parallel()
	h := testkit.StartHub(t, bin)
	h.StartRunner(t, "r1")
	src := e2ekit.SourceCheckout(t)
	base := e2ekit.Git(t, src, "rev-parse", "HEAD")

	notes := filepath.Join(t.TempDir(), "notes.md")
	if err := os.WriteFile(notes, []byte("from the context\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	v := e2ekit.RunRepo(t, h, "--repo", src, "--context", notes, "--agent", "exec", "--", "sh", "-c",
		`echo changed > a.txt && cp "$DROVER_CONTEXT_DIR/notes.md" added.txt && chmod +x script.sh && echo noise > build.log`)
	if v.Project != "demo" || v.Base != base || v.Mode != protocol.ModeFix {
		t.Fatalf("submitted: %+v", v)
	}
	c := h.Client()
	end := testkit.WaitJob(t, c, v.ID, 120*time.Second, func(v apitypes.JobView) bool { return v.State.Terminal() })
	if end.State != job.Completed || end.Head == base || end.Head == "" {
		t.Fatalf("job ended %s (head %s):\n%s", end.State, end.Head, testkit.Log(t, c, v.ID, 0))
	}

	clone := filepath.Join(t.TempDir(), "clone")
	e2ekit.Git(t, src, "clone", "--quiet", src, clone)
	if out, err := h.CLI("fetch", v.ID, "--repo", clone); err != nil {
		t.Fatalf("drover fetch: %v\n%s", err, out)
	}
	branch := "drover/" + v.ID
	if got := e2ekit.Git(t, clone, "rev-parse", branch); got != end.Head {
		t.Fatalf("branch at %s, want %s", got, end.Head)
	}
	if got := e2ekit.Git(t, clone, "rev-parse", branch+"^"); got != base {
		t.Fatalf("result's parent is %s, want the base %s", got, base)
	}
	if got := e2ekit.Git(t, clone, "diff", "--name-status", base, branch); got != "M\ta.txt\nA\tadded.txt\nM\tscript.sh" {
		t.Fatalf("result changes:\n%s", got)
	}
	if got := e2ekit.Git(t, clone, "ls-tree", branch, "script.sh"); !strings.HasPrefix(got, "100755 ") {
		t.Fatalf("script.sh in the result: %s", got)
	}
	if got := e2ekit.Git(t, clone, "show", branch+":a.txt"); got != "changed" {
		t.Fatalf("a.txt in the result: %q", got)
	}
	if got := e2ekit.Git(t, clone, "show", branch+":added.txt"); got != "from the context" {
		t.Fatalf("added.txt (a copy of the context file) in the result: %q", got)
	}
	diff, err := h.CLI("diff", v.ID, "--repo", clone)
	if err != nil || !strings.Contains(diff, "new mode 100755") || !strings.Contains(diff, "+changed") {
		t.Fatalf("drover diff: %v\n%s", err, diff)
	}
	// Plain git reads the result too.
	plain := t.TempDir()
	e2ekit.Git(t, plain, "init", "--quiet", "--bare", plain)
	if _, err := (localrepo.Checkout{Git: gitcmd.Git{}, Dir: plain}).FetchRef(context.Background(),
		h.URL+"/git/demo", h.Admin, gitcmd.JobRef(v.ID), "refs/heads/result"); err != nil {
		t.Fatalf("plain git fetch: %v", err)
	}
}

func TestObserveJobThatChangesTheTreeFails(t *testing.T) {
	t.Parallel()
	h := testkit.StartHub(t, bin)
	// Unisolated, so that the write happens and the check after the run is
	// what fails the job (a sandbox mounts an observe worktree read-only).
	h.StartRunner(t, "r1", "--sandbox", "none")
	src := e2ekit.SourceCheckout(t)
	v := e2ekit.RunRepo(t, h, "--repo", src, "--mode", "observe", "--agent", "exec", "--", "sh", "-c", "echo tampered > a.txt")
	c := h.Client()
	end := testkit.WaitJob(t, c, v.ID, 120*time.Second, func(v apitypes.JobView) bool { return v.State.Terminal() })
	log := testkit.Log(t, c, v.ID, 1)
	// The runner's check fails the attempt; an execution boundary that
	// mounts the worktree read-only stops the write first. Either way the
	// job fails and publishes nothing.
	readOnly := end.Reason == job.ReasonExited && strings.Contains(log, "Read-only file system")
	if end.State != job.Failed || (end.Reason != job.ReasonObserveChanged && !readOnly) || end.Head != end.Base {
		t.Fatalf("observe job ended %s (%s), head %s:\n%s", end.State, end.Reason, end.Head, log)
	}
}
