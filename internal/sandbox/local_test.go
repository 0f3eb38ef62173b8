package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"drover/internal/sandbox/sandboxtest"
)

var testEnv = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C"}

// none is the unisolated boundary rooted at root; env names the variables
// it allows beyond the base ones.
func none(t *testing.T, root string, env ...string) Boundary {
	t.Helper()
	b, err := New(context.Background(), Policy{Kind: KindNone, Root: root, Env: env, Logger: quiet()})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func run(t *testing.T, ctx context.Context, s Spec) (Exit, string) {
	t.Helper()
	var out sandboxtest.Buffer
	s.Output = &out
	if s.Dir == "" {
		s.Dir = t.TempDir()
	}
	if s.Env == nil {
		s.Env = testEnv
	}
	p, err := none(t, s.Dir, "ONLY").Start(ctx, s)
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	ex, err := p.Wait()
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	return ex, out.String()
}

func TestExitCodesAndOutput(t *testing.T) {
	ex, out := run(t, context.Background(), Spec{Argv: []string{"sh", "-c", "echo out; echo err >&2; exit 3"}})
	if ex.Code != 3 || ex.Signal != "" || ex.Stopped || ex.TimedOut {
		t.Fatalf("exit = %+v, want code 3", ex)
	}
	if out != "out\nerr\n" {
		t.Fatalf("output = %q", out)
	}
	ex, _ = run(t, context.Background(), Spec{Argv: []string{"true"}})
	if ex.Code != 0 {
		t.Fatalf("true exited %+v", ex)
	}
	ex, _ = run(t, context.Background(), Spec{Argv: []string{"sh", "-c", "kill -9 $$"}})
	if ex.Code != 128+9 || ex.Signal != "SIGKILL" {
		t.Fatalf("self-killed exit = %+v", ex)
	}
}

func TestRunsInDirWithOnlyGivenEnv(t *testing.T) {
	t.Setenv("DROVER_SANDBOX_SECRET", "leak")
	dir := t.TempDir()
	_, out := run(t, context.Background(), Spec{Dir: dir, Argv: []string{"sh", "-c", "pwd; env"},
		Env: []string{"PATH=/usr/bin:/bin", "ONLY=this"}})
	if strings.Contains(out, "DROVER_SANDBOX_SECRET") {
		t.Fatalf("runner environment leaked into the job:\n%s", out)
	}
	if !strings.Contains(out, "ONLY=this") || !strings.HasPrefix(out, dir+"\n") {
		t.Fatalf("output = %q, want dir %s and ONLY=this", out, dir)
	}
	// A nil Env is an empty environment, not the runner's.
	_, out = run(t, context.Background(), Spec{Dir: dir, Argv: []string{"/usr/bin/env"}, Env: []string{}})
	if strings.Contains(out, "DROVER_SANDBOX_SECRET") {
		t.Fatalf("empty Env inherited the runner's: %q", out)
	}
}

func TestStartRefusesBadSpecs(t *testing.T) {
	dir := t.TempDir()
	for name, s := range map[string]Spec{
		"no argv":      {Dir: dir, Env: testEnv},
		"relative dir": {Dir: "work", Argv: []string{"true"}, Env: testEnv},
		"missing dir":  {Dir: filepath.Join(dir, "nope"), Argv: []string{"true"}, Env: testEnv},
		"no such cmd":  {Dir: dir, Argv: []string{"drover-no-such-command"}, Env: testEnv},
		"no PATH":      {Dir: dir, Argv: []string{"true"}, Env: []string{"A=b"}},
	} {
		if p, err := none(t, dir).Start(context.Background(), s); err == nil {
			p.Kill()
			t.Errorf("%s: Start succeeded", name)
		}
	}
}

// startTree starts a shell whose child ignores SIGTERM and returns both pids.
func startTree(t *testing.T, ctx context.Context, s Spec) (Process, int) {
	t.Helper()
	dir := t.TempDir()
	pidFile := filepath.Join(dir, "child.pid")
	s.Dir = dir
	s.Env = testEnv
	s.Argv = []string{"sh", "-c", `(trap "" TERM; exec sleep 1000) & echo $! > child.pid.tmp; mv child.pid.tmp child.pid; wait`}
	p, err := none(t, dir).Start(ctx, s)
	if err != nil {
		t.Fatal(err)
	}
	var child int
	sandboxtest.WaitFor(t, "the child's pid", func() bool {
		b, err := os.ReadFile(pidFile)
		child, _ = strconv.Atoi(strings.TrimSpace(string(b)))
		return err == nil && child > 0
	})
	return p, child
}

func TestStopKillsProcessTree(t *testing.T) {
	// A grace far longer than the test: the child that ignores SIGTERM must
	// go because its leader went, not because the grace ran out.
	p, child := startTree(t, context.Background(), Spec{Grace: time.Hour})
	if !sandboxtest.Alive(p.Pid()) || !sandboxtest.Alive(child) {
		t.Fatal("tree not running")
	}
	p.Stop()
	ex, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !ex.Stopped || ex.Signal != "SIGTERM" {
		t.Fatalf("exit = %+v, want stopped by SIGTERM", ex)
	}
	sandboxtest.WaitFor(t, "leader and child gone", func() bool { return !sandboxtest.Alive(p.Pid()) && !sandboxtest.Alive(child) })
}

func TestCancelStopsAndKillCauseKills(t *testing.T) {
	ctx, cancel := context.WithCancelCause(context.Background())
	// A grace far longer than the test: only the kill cause can end it fast.
	p, child := startTree(t, ctx, Spec{Grace: time.Hour})
	cancel(ErrKill)
	ex, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !ex.Stopped || ex.Signal != "SIGKILL" {
		t.Fatalf("exit = %+v, want killed", ex)
	}
	sandboxtest.WaitFor(t, "child gone", func() bool { return !sandboxtest.Alive(child) })

	ctx, cancel2 := context.WithCancel(context.Background())
	p, child = startTree(t, ctx, Spec{Grace: 50 * time.Millisecond})
	cancel2()
	if ex, _ := p.Wait(); !ex.Stopped {
		t.Fatalf("exit = %+v, want stopped", ex)
	}
	sandboxtest.WaitFor(t, "child gone", func() bool { return !sandboxtest.Alive(child) })
}

func TestTimeoutStops(t *testing.T) {
	ex, out := run(t, context.Background(), Spec{Argv: []string{"sh", "-c", "echo begin; exec sleep 1000"},
		Timeout: 50 * time.Millisecond, Grace: 50 * time.Millisecond})
	if !ex.TimedOut || !ex.Stopped {
		t.Fatalf("exit = %+v, want timed out", ex)
	}
	if out != "begin\n" {
		t.Fatalf("output = %q", out)
	}
}

func TestGraceThenKill(t *testing.T) {
	var out sandboxtest.Buffer
	dir := t.TempDir()
	p, err := none(t, dir).Start(context.Background(), Spec{Dir: dir, Env: testEnv, Output: &out,
		Argv:  []string{"sh", "-c", `trap "" TERM; echo ready; while :; do sleep 0.01; done`},
		Grace: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	sandboxtest.WaitFor(t, "ready", func() bool { return strings.Contains(out.String(), "ready") })
	p.Stop()
	ex, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if ex.Signal != "SIGKILL" || !ex.Stopped {
		t.Fatalf("exit = %+v: a process ignoring SIGTERM must get SIGKILL after the grace", ex)
	}
}

type failingWriter struct{}

func (failingWriter) Write([]byte) (int, error) { return 0, errors.New("disk full") }

func TestFailingOutputDoesNotBlockJob(t *testing.T) {
	dir := t.TempDir()
	p, err := none(t, dir).Start(context.Background(), Spec{Dir: dir, Env: testEnv, Output: failingWriter{},
		Argv: []string{"sh", "-c", "head -c 1000000 /dev/zero; exit 4"}})
	if err != nil {
		t.Fatal(err)
	}
	if ex, err := p.Wait(); err != nil || ex.Code != 4 {
		t.Fatalf("exit = %+v, %v", ex, err)
	}
}

func TestDescribeIsHonest(t *testing.T) {
	d := none(t, t.TempDir()).Describe()
	if d.Kind != "none" || !strings.HasPrefix(d.Network, "host") || !strings.HasPrefix(d.Filesystem, "host") ||
		!strings.Contains(d.User, "unisolated") {
		t.Fatalf("Describe = %+v", d)
	}
}
