package cli

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/job"
	"drover/internal/testkit/syncbuf"
)

// What a first user trips over, one test each.

// A mistyped hub says it cannot be reached, not that there is no token.
func TestMistypedHubCannotBeReached(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := "http://" + ln.Addr().String()
	ln.Close() // nothing listens there now
	for _, env := range []map[string]string{{"DROVER_HUB": addr}, {}} {
		args := []string{"jobs"}
		if len(env) == 0 {
			args = []string{"--hub", addr, "jobs"}
		}
		r := runCLI(t, env, "", args...)
		if r.code != 1 || !strings.Contains(r.stderr, "cannot reach the hub at "+addr) || strings.Contains(r.stderr, "no token") {
			t.Errorf("%v %v: %d %q", env, args, r.code, r.stderr)
		}
	}
	// A hub that is there but was given no token still says so.
	h := newFakeHub(t)
	if r := runCLI(t, map[string]string{"DROVER_HUB": h.URL}, "", "jobs"); r.code != 1 || !strings.Contains(r.stderr, "no token for "+h.URL) {
		t.Errorf("no token: %d %q", r.code, r.stderr)
	}
}

func TestRetryHelpSaysWhichJobs(t *testing.T) {
	r := runCLI(t, nil, "", "retry", "--help")
	for _, want := range []string{"failed", "cancelled", "unknown", "A completed job is not"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("retry --help lacks %q:\n%s", want, r.stdout)
		}
	}
}

func TestAttemptTableSaysWhatItMeasures(t *testing.T) {
	h := newFakeHub(t)
	now := time.Now()
	started, finished := now.Add(-3*time.Second), now.Add(-time.Second)
	h.jobs = []apitypes.JobView{{ID: "j-1", State: job.Completed, Agent: "exec", Requester: "admin", CreatedAt: now,
		Attempts: []apitypes.AttemptView{{Number: 1, State: job.AttemptCompleted, Runner: "r1", Account: "acct_w", OfferedAt: now.Add(-4 * time.Second),
			StartedAt: &started, FinishedAt: &finished}}}}
	r := runCLI(t, map[string]string{"DROVER_HUB": h.URL, "DROVER_TOKEN": h.token}, "", "show", "j-1")
	if !strings.Contains(r.stdout, "OFFERED AGO") || !strings.Contains(r.stdout, "RAN FOR") || !strings.Contains(r.stdout, " 2s ") || !strings.Contains(r.stdout, " acct_w ") {
		t.Errorf("show:\n%s", r.stdout)
	}
}

// Ctrl-C in a client command ends it without a daemon's log line.
func TestInterruptedClientPrintsNoLogLine(t *testing.T) {
	h := newFakeHub(t)
	now := time.Now()
	h.jobs = []apitypes.JobView{{ID: "j-1", State: job.Running, Agent: "exec", Requester: "admin", CreatedAt: now,
		Attempts: []apitypes.AttemptView{{Number: 1, State: job.AttemptRunning, Runner: "r1", OfferedAt: now}}}}
	h.logs["j-1"] = "working\n"
	env := map[string]string{"DROVER_HUB": h.URL, "DROVER_TOKEN": h.token, "HOME": t.TempDir()}
	var out, errb syncbuf.Buffer
	done := make(chan int, 1)
	go func() {
		done <- Run(context.Background(), []string{"logs", "-f", "j-1"}, Env{Stdin: strings.NewReader(""), Stdout: &out, Stderr: &errb,
			Getenv: func(k string) string { return env[k] }})
	}()
	// The log is printed after the command took over SIGINT.
	for deadline := time.Now().Add(30 * time.Second); !strings.Contains(out.String(), "working"); time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatalf("logs -f printed nothing: %q", errb.String())
		}
	}
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case code := <-done:
		if code != 0 || strings.Contains(errb.String(), "level=") || strings.Contains(errb.String(), "stopping") {
			t.Errorf("interrupted logs -f: %d %q", code, errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("logs -f went on after Ctrl-C")
	}
}

// --branch refs/heads/x is the branch x, not refs/heads/refs/heads/x.
func TestFetchBranchTakesAFullRefName(t *testing.T) {
	env, _ := realHub(t)
	dir, _ := userRepo(t)
	v := submitted(t, env, "--repo", dir)
	clone := filepath.Join(t.TempDir(), "clone")
	gitC(t, dir, "clone", "--quiet", dir, clone)
	r := runCLI(t, env, "", "fetch", v.ID, "--repo", clone, "--branch", "refs/heads/result")
	if r.code != 0 || !strings.Contains(r.stdout, "branch result created") {
		t.Fatalf("fetch: %d %q %q", r.code, r.stdout, r.stderr)
	}
	if refs := gitC(t, clone, "for-each-ref", "--format=%(refname)", "refs/heads/"); !strings.Contains(refs, "refs/heads/result") ||
		strings.Contains(refs, "refs/heads/refs/") {
		t.Fatalf("branches: %s", refs)
	}
	if r := runCLI(t, env, "", "fetch", v.ID, "--repo", clone, "--branch", "refs/tags/x"); r.code != 2 || !strings.Contains(r.stderr, "name a branch") {
		t.Fatalf("fetch --branch refs/tags/x: %d %q", r.code, r.stderr)
	}
}
