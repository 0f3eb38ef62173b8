package repo

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/e2e/e2ekit"
	"drover/internal/job"
	"drover/internal/testkit"
)

// toolsCheckout is the demo repository with the scripted MCP agent
// (testdata/mcpagent, the real MCP Go SDK client) committed at bin/mcpagent:
// inside the worktree is where a sandboxed job can run it.
func toolsCheckout(t *testing.T) string {
	t.Helper()
	src := e2ekit.SourceCheckout(t)
	out, err := exec.Command("go", "build", "-trimpath", "-ldflags=-s -w", "-o", filepath.Join(src, "bin", "mcpagent"),
		"drover/internal/e2e/testdata/mcpagent").CombinedOutput()
	if err != nil {
		t.Fatalf("build mcpagent: %v\n%s", err, out)
	}
	e2ekit.Git(t, src, "add", "bin/mcpagent")
	e2ekit.Git(t, src, "commit", "--quiet", "-m", "agent")
	return src
}

// The agent asks through the MCP tools in a bubblewrap sandbox; the job
// waits; the hub and the runner restart; the requester's answer resumes the
// job on the same runner in the kept worktree, where the agent reads the
// approved answer from context and delivers.
func TestAgentAsksWaitsAcrossRestartsAndDelivers(t *testing.T) {
	t.Parallel()
	h := testkit.StartHub(t, bin)
	r := h.StartRunner(t, "r1")
	src := toolsCheckout(t)
	v := e2ekit.RunRepo(t, h, "--repo", src, "--tools", "--agent", "exec", "--", "./bin/mcpagent", "repo")
	c := h.Client()
	w := testkit.WaitJob(t, c, v.ID, 2*time.Minute, func(v apitypes.JobView) bool { return v.State == job.Waiting || v.State.Terminal() })
	if w.State != job.Waiting || w.Head == w.Base {
		t.Fatalf("job is %s (head %s, base %s), want waiting with its work published:\n%s", w.State, w.Head, w.Base, testkit.Log(t, c, v.ID, 0))
	}
	log1 := testkit.Log(t, c, v.ID, 1)
	if !strings.Contains(log1, "context: ok") || !strings.Contains(log1, "checkpoint: ok") || !strings.Contains(log1, "ask: ok") {
		t.Fatalf("first attempt's log:\n%s", log1)
	}
	if strings.Contains(log1, "drv_t_") {
		t.Fatal("the tool token reached the job's output")
	}

	// Both processes restart while the job waits; nothing runs meanwhile.
	r.Kill()
	h.Restart()
	r.Start()
	out, err := h.CLI("questions")
	if err != nil || !strings.Contains(out, v.ID) || !strings.Contains(out, "which color?") || !strings.Contains(out, "2) blue") {
		t.Fatalf("drover questions after the restarts: %v\n%s", err, out)
	}
	if out, err := h.CLI("answer", v.ID, "--choice", "2"); err != nil {
		t.Fatalf("drover answer: %v\n%s", err, out)
	}
	end := testkit.WaitJob(t, c, v.ID, 2*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	log2 := testkit.Log(t, c, v.ID, 2)
	if end.State != job.Completed || end.Summary != "done" {
		t.Fatalf("job ended %s (%s), summary %q:\n%s", end.State, end.Reason, end.Summary, log2)
	}
	for _, want := range []string{"resumed (kept", "history: ", "answer: blue", "deliver: ok"} {
		if !strings.Contains(log2, want) {
			t.Errorf("second attempt's log lacks %q:\n%s", want, log2)
		}
	}
	if iso := end.Attempts[len(end.Attempts)-1].Isolation; iso == nil || iso.Kind != "bwrap" || !strings.Contains(iso.Network, "1 bridged socket") {
		t.Errorf("isolation = %+v, want bwrap with the tools' socket bridged", iso)
	}
	if len(end.Questions) != 1 || end.Questions[0].Answer == nil || end.Questions[0].Answer.Text != "blue" {
		t.Errorf("questions = %+v", end.Questions)
	}
	if got := e2ekit.Fetched(t, h, src, v.ID, "first.txt", "answer.txt"); got["first.txt"] != "first turn" || got["answer.txt"] != "blue" {
		t.Fatalf("fetched result: %q", got)
	}
}

// A turn that ends without deliver or ask fails, and its work is published.
func TestAgentWithoutDeliverFailsAndPublishes(t *testing.T) {
	t.Parallel()
	h := testkit.StartHub(t, bin)
	h.StartRunner(t, "r1")
	src := toolsCheckout(t)
	v := e2ekit.RunRepo(t, h, "--repo", src, "--tools", "--agent", "exec", "--", "./bin/mcpagent", "partial")
	c := h.Client()
	end := testkit.WaitJob(t, c, v.ID, 2*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	if end.State != job.Failed || end.Reason != job.ReasonNotDelivered || end.Head == end.Base {
		t.Fatalf("job ended %s (%s), head %s:\n%s", end.State, end.Reason, end.Head, testkit.Log(t, c, v.ID, 0))
	}
	if got := e2ekit.Fetched(t, h, src, v.ID, "partial.txt"); got["partial.txt"] != "partial work" {
		t.Fatalf("fetched result: %q", got)
	}
}
