package repo

import (
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/e2e/e2ekit"
	"drover/internal/gitcmd"
	"drover/internal/job"
	"drover/internal/testkit"
)

// An agent in the default sandbox uses plain git in its worktree, a commit
// included; drover publishes the edit as its own commit on the base, and
// the runner's clone never holds the agent's commit.
func TestAgentUsesGitInsideTheSandbox(t *testing.T) {
	t.Parallel()
	h := testkit.StartHub(t, bin)
	r := h.StartRunner(t, "r1")
	src := e2ekit.SourceCheckout(t)
	base := e2ekit.Git(t, src, "rev-parse", "HEAD")
	v := e2ekit.RunRepo(t, h, "--repo", src, "--agent", "exec", "--", "sh", "-c", `set -e
		echo "status<$(git status --porcelain)>"
		echo "log=$(git log -1 --format=%H)"
		echo edited > a.txt
		git status --porcelain
		git add a.txt
		git -c user.name=a -c user.email=a@b commit -m x
		echo "agent=$(git rev-parse HEAD)"`)
	c := h.Client()
	end := testkit.WaitJob(t, c, v.ID, 2*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	log := testkit.Log(t, c, v.ID, 0)
	if end.State != job.Completed || end.Head == base {
		t.Fatalf("job ended %s (%s), head %s:\n%s", end.State, end.Reason, end.Head, log)
	}
	m := regexp.MustCompile(`agent=([0-9a-f]{40})`).FindStringSubmatch(log)
	if !strings.Contains(log, "status<>\n") || !strings.Contains(log, "log="+base+"\n") || !strings.Contains(log, " M a.txt\n") ||
		!strings.Contains(log, "1 file changed") || m == nil {
		t.Fatalf("log:\n%s", log)
	}
	if iso := end.Attempts[0].Isolation; iso == nil || iso.Kind != "bwrap" {
		t.Fatalf("isolation = %+v", iso)
	}

	clone := filepath.Join(t.TempDir(), "clone")
	e2ekit.Git(t, src, "clone", "--quiet", src, clone)
	if out, err := h.CLI("fetch", v.ID, "--repo", clone); err != nil {
		t.Fatalf("drover fetch: %v\n%s", err, out)
	}
	branch := "drover/" + v.ID
	if got := e2ekit.Git(t, clone, "log", "-1", "--format=%H|%P|%cn", branch); got != end.Head+"|"+base+"|drover" || end.Head == m[1] {
		t.Fatalf("fetched %s, want drover's publication %s on %s (the agent committed %s)", got, end.Head, base, m[1])
	}
	if got := e2ekit.Git(t, clone, "diff", "--name-status", base, branch); got != "M\ta.txt" {
		t.Fatalf("result changes: %s", got)
	}
	if got := e2ekit.Git(t, clone, "show", branch+":a.txt"); got != "edited" {
		t.Fatalf("a.txt in the result: %q", got)
	}
	runnerClone := filepath.Join(r.Home, "repos", "demo.git")
	e2ekit.Git(t, runnerClone, "cat-file", "-e", end.Head) // drover's publication is there
	if _, err := (gitcmd.Git{}).Out(t.Context(), runnerClone, "cat-file", "-e", m[1]+"^{commit}"); err == nil {
		t.Fatal("the agent's commit is in the runner's clone")
	}
}
