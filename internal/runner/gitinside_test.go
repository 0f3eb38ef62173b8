package runner

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"drover/internal/gitcmd"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/sandbox"
	"drover/internal/sandbox/sandboxtest"
)

// An agent in the default sandbox uses plain git in its worktree, commits
// included, while the shared clone stays as it was: its commit lives in the
// attempt's own object directory, a fetch into the clone meanwhile still
// works, drover publishes the files (not the agent's commit) and the pooled
// worktrees prepare fine for the next jobs.
func TestAgentCommitsInsideTheSandbox(t *testing.T) {
	h := newRepoHub(t)
	base := h.commit(map[string]string{"a.txt": "a\n"})
	tr := startRunner(t, h.fakeHub, "", func(c *Config) { c.Sandbox = sandbox.Policy{}; c.Slots = 2 })
	h.waitConn(0)
	clone := filepath.Join(tr.home, "repos", project+".git")

	first := newRef()
	h.offer(first, h.spec(first, base, protocol.ModeFix, `set -e
		git status --porcelain; echo x > a.txt; git status --porcelain
		git add a.txt
		git -c user.name=a -c user.email=a@b commit -q -m x
		echo agent=$(git log -1 --format=%H); touch waiting
		while [ ! -e release ]; do sleep 0.05; done; rm release waiting`))
	var agentCommit string
	sandboxtest.WaitFor(t, "the agent's commit", func() bool {
		m := regexp.MustCompile(`agent=([0-9a-f]{40})`).FindStringSubmatch(string(h.log(first.Attempt)))
		if m != nil {
			agentCommit = m[1]
		}
		return m != nil
	})

	// Another job needs a commit the clone lacks while the first agent's
	// HEAD names an object only its attempt holds.
	h.git("checkout", "--quiet", "--detach", base)
	other := h.commit(map[string]string{"b.txt": "b\n"})
	second := newRef()
	h.offer(second, h.spec(second, other, protocol.ModeFix, "git log -1 --format=second=%H"))
	wantOutcome(t, h.waitFinish(second.Attempt), job.AttemptCompleted, job.ReasonExited, intp(0))
	if log := string(h.log(second.Attempt)); !strings.Contains(log, "second="+other) {
		t.Fatalf("second log:\n%s", log)
	}

	waiting, _ := filepath.Glob(filepath.Join(tr.home, "trees", project, "w*", "waiting"))
	if len(waiting) != 1 {
		t.Fatalf("worktree of the first job: %v", waiting)
	}
	must(t, os.WriteFile(filepath.Join(filepath.Dir(waiting[0]), "release"), nil, 0o644))
	fin := h.waitFinish(first.Attempt)
	log := string(h.log(first.Attempt))
	wantOutcome(t, fin, job.AttemptCompleted, job.ReasonExited, intp(0))
	if !strings.Contains(log, " M a.txt\n") || !strings.Contains(log, "drover: published ") {
		t.Fatalf("first log:\n%s", log)
	}
	head := h.head(first.Job)
	if meta := h.hubGit("log", "-1", "--format=%P|%cn", head); meta != base+"|drover" || head == agentCommit {
		t.Fatalf("published %s: %s (the agent committed %s)", head, meta, agentCommit)
	}
	if got := h.hubGit("show", head+":a.txt"); got != "x" {
		t.Fatalf("a.txt published: %q", got)
	}
	g := gitcmd.Git{}
	if _, err := g.Out(t.Context(), clone, "cat-file", "-e", agentCommit+"^{commit}"); err == nil {
		t.Fatal("the agent's commit is in the shared clone")
	}
	if refs, err := g.Out(t.Context(), clone, "for-each-ref", "--format=%(refname)", "refs/heads", "refs/tags"); err != nil || refs != "" {
		t.Fatalf("refs in the clone: %q %v", refs, err)
	}

	// Both pooled worktrees (one where the agent committed) serve new jobs.
	third, fourth := newRef(), newRef()
	for _, ref := range []protocol.AttemptRef{third, fourth} {
		h.offer(ref, h.spec(ref, base, protocol.ModeFix, "git status --porcelain; git log -1 --format=head=%H"))
	}
	for _, ref := range []protocol.AttemptRef{third, fourth} {
		wantOutcome(t, h.waitFinish(ref.Attempt), job.AttemptCompleted, job.ReasonExited, intp(0))
		if log := string(h.log(ref.Attempt)); !strings.Contains(log, "prepared") || !strings.HasSuffix(log, "head="+base+"\ndrover: nothing to publish: the worktree equals "+base+"\n") {
			t.Fatalf("log of a later job:\n%s", log)
		}
	}
}
