package runner

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/sandbox"
)

// An attempt runs in bubblewrap by default, in its work dir, with the job's
// mode, and its finish says so.
func TestAttemptsRunInTheDefaultSandbox(t *testing.T) {
	h := newFakeHub(t)
	tr := startRunner(t, h, "", func(c *Config) { c.Sandbox = sandbox.Policy{} })
	h.waitConn(0)

	fix := newRef()
	h.offer(fix, shSpec(`id -u; echo job=$DROVER_JOB; touch made-here && echo wrote; cat `+
		filepath.Join(tr.home, "login.json")+` || echo no-token`))
	fin := h.waitFinish(fix.Attempt)
	wantOutcome(t, fin, job.AttemptCompleted, job.ReasonExited, intp(0))
	out := string(h.log(fix.Attempt))
	if out != "1000\njob="+fix.Job+"\nwrote\n"+"cat: "+filepath.Join(tr.home, "login.json")+": No such file or directory\nno-token\n" {
		t.Fatalf("log = %q", out)
	}
	if iso := fin.Isolation; iso == nil || iso.Kind != sandbox.KindBwrap || !strings.HasPrefix(iso.Filesystem, "worktree read-write (fix)") ||
		iso.Network != "none (loopback only)" || !strings.Contains(iso.Limits, "pids 4096") {
		t.Fatalf("isolation = %+v", fin.Isolation)
	}

	observe := newRef()
	spec := shSpec("touch made-here || echo refused")
	spec.Mode = protocol.ModeObserve
	h.offer(observe, spec)
	fin = h.waitFinish(observe.Attempt)
	if out := string(h.log(observe.Attempt)); !strings.Contains(out, "Read-only file system") || !strings.HasSuffix(out, "refused\n") {
		t.Fatalf("observe log = %q", out)
	}
	if iso := fin.Isolation; iso == nil || !strings.HasPrefix(iso.Filesystem, "worktree read-only (observe)") {
		t.Fatalf("observe isolation = %+v", fin.Isolation)
	}
}

func TestSandboxThatCannotWorkFailsTheStart(t *testing.T) {
	h := newFakeHub(t)
	home := filepath.Join(t.TempDir(), "home")
	must(t, SaveLogin(home, Login{Hub: h.srv.URL, Name: "r1", Token: h.token}))
	t.Setenv("PATH", t.TempDir()) // no bwrap, no docker
	for kind, want := range map[string]string{
		sandbox.KindBwrap:  "apt-get install bubblewrap",
		sandbox.KindDocker: "docker is not installed",
	} {
		_, err := New(Config{Home: home, Sandbox: sandbox.Policy{Kind: kind}})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: New = %v, want an error with %q", kind, err, want)
		}
	}
}

// A runner asks bubblewrap its version once, at its start, not at every
// attempt's boundary: that check had a timer of its own, which a runner
// paused past it (a suspended VM; the fault campaign's SIGSTOP) found
// expired on waking, failing the job as spawn_failed.
func TestBwrapVersionAskedOnceAtTheStart(t *testing.T) {
	real, err := exec.LookPath("bwrap")
	must(t, err)
	dir := t.TempDir()
	asked := filepath.Join(dir, "asked")
	must(t, os.WriteFile(filepath.Join(dir, "bwrap"), []byte("#!/bin/sh\n"+
		`[ "$1" = --version ] && echo >> '`+asked+"'\nexec '"+real+`' "$@"`+"\n"), 0o755))
	t.Setenv("PATH", dir+string(os.PathListSeparator)+os.Getenv("PATH"))

	h := newFakeHub(t)
	startRunner(t, h, "", func(c *Config) { c.Sandbox = sandbox.Policy{} })
	h.waitConn(0)
	for range 2 {
		ref := newRef()
		h.offer(ref, shSpec("echo ran"))
		wantOutcome(t, h.waitFinish(ref.Attempt), job.AttemptCompleted, job.ReasonExited, intp(0))
	}
	b, err := os.ReadFile(asked)
	must(t, err)
	if n := strings.Count(string(b), "\n"); n != 1 {
		t.Fatalf("bwrap --version ran %d times for a start and two attempts, want once", n)
	}
}
