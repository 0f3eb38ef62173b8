package e2e

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/e2e/e2ekit"
	"drover/internal/job"
	"drover/internal/testkit"
)

// A runner with no --sandbox runs jobs in bubblewrap, and the attempt's
// record says so.
func TestJobsRunSandboxedByDefault(t *testing.T) {
	t.Parallel()
	h := testkit.StartHub(t, bin)
	r := h.StartRunner(t, "r1")
	c := h.Client()
	token := filepath.Join(r.Home, "login.json")
	j := e2ekit.Submit(t, c, "sh", "-c", "id -u; cat "+token+" || echo no-token; touch /usr/x || echo no-write")
	v := testkit.WaitJob(t, c, j.ID, time.Minute, testkit.InState(job.Completed))
	log := testkit.Log(t, c, j.ID, 1)
	if !strings.HasPrefix(log, "1000\n") || !strings.Contains(log, "no-token\n") || !strings.HasSuffix(log, "no-write\n") {
		t.Fatalf("log:\n%s", log)
	}
	iso := v.Attempts[0].Isolation
	if iso == nil || iso.Kind != "bwrap" || iso.Network != "none (loopback only)" || !strings.HasPrefix(iso.Version, "bubblewrap ") {
		t.Fatalf("isolation = %+v", iso)
	}
	if out, err := h.CLI("show", j.ID); err != nil || !strings.Contains(out, "bwrap, network none") {
		t.Fatalf("drover show: %v\n%s", err, out)
	}
}

// In a sandbox an observe job's worktree is read-only: its write fails at
// once, and nothing is published.
func TestObserveWorktreeIsReadOnlyInTheSandbox(t *testing.T) {
	t.Parallel()
	h := testkit.StartHub(t, bin)
	h.StartRunner(t, "r1")
	v := e2ekit.RunRepo(t, h, "--repo", e2ekit.SourceCheckout(t), "--mode", "observe", "--agent", "exec", "--", "sh", "-c", "echo tampered > a.txt")
	c := h.Client()
	end := testkit.WaitJob(t, c, v.ID, 2*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	log := testkit.Log(t, c, v.ID, 0)
	if end.State != job.Failed || end.Head != end.Base || !strings.Contains(log, "Read-only file system") {
		t.Fatalf("observe job ended %s (%s), head %s:\n%s", end.State, end.Reason, end.Head, log)
	}
	if iso := end.Attempts[0].Isolation; iso == nil || !strings.HasPrefix(iso.Filesystem, "worktree read-only (observe)") {
		t.Fatalf("isolation = %+v", iso)
	}
}
