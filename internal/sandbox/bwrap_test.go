package sandbox

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"drover/internal/sandbox/sandboxtest"
)

// These tests run real bubblewrap sandboxes (scripts/test installs it).

// box makes a boundary for p, on a fresh root unless p names one.
func box(t *testing.T, p Policy) (Boundary, string) {
	t.Helper()
	if p.Root == "" {
		p.Root = t.TempDir()
	}
	if p.Logger == nil {
		p.Logger = quiet()
	}
	b, err := New(context.Background(), p)
	if err != nil {
		t.Fatalf("New(%s): %v", p.Kind, err)
	}
	return b, p.Root
}

// startIn starts argv in b at dir.
func startIn(t *testing.T, ctx context.Context, b Boundary, dir string, out *sandboxtest.Buffer, argv ...string) Process {
	t.Helper()
	p, err := b.Start(ctx, Spec{Dir: dir, Argv: argv, Env: testEnv, Output: out, Grace: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("start %q: %v", argv, err)
	}
	return p
}

// runIn runs argv in b at dir and returns how it ended and its output.
func runIn(t *testing.T, ctx context.Context, b Boundary, dir string, argv ...string) (Exit, string) {
	t.Helper()
	var out sandboxtest.Buffer
	ex, err := startIn(t, ctx, b, dir, &out, argv...).Wait()
	if err != nil {
		t.Fatalf("wait: %v", err)
	}
	return ex, out.String()
}

// hostPids finds the host pids of live processes whose command line is
// exactly cmdline: how a test sees into a sandbox's pid namespace.
func hostPids(cmdline string) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err == nil && string(bytes.ReplaceAll(bytes.TrimRight(b, "\x00"), []byte{0}, []byte{' '})) == cmdline && sandboxtest.Alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

func TestBwrapRunsCommands(t *testing.T) {
	b, root := box(t, Policy{Kind: KindBwrap})
	ex, out := runIn(t, context.Background(), b, root, "sh", "-c", "echo out; echo err >&2; id -u; pwd; echo $HOME; exit 3")
	if ex.Code != 3 || ex.Signal != "" || ex.Stopped {
		t.Fatalf("exit = %+v\n%s", ex, out)
	}
	if want := "out\nerr\n1000\n" + root + "\n" + Home + "\n"; out != want {
		t.Fatalf("output = %q, want %q", out, want)
	}
	ex, out = runIn(t, context.Background(), b, root, "sh", "-c", "kill -9 $$")
	if ex.Code != 128+9 || ex.Signal != "SIGKILL" {
		t.Fatalf("self-killed exit = %+v\n%s", ex, out)
	}
	if _, err := b.Start(context.Background(), Spec{Dir: root, Argv: []string{"drover-no-such-command"}, Env: testEnv}); err == nil {
		t.Fatal("a missing command started")
	}
}

func TestBwrapDescribeSaysWhatApplies(t *testing.T) {
	b, _ := box(t, Policy{Kind: KindBwrap, Mode: ModeObserve, Limits: Limits{Pids: 64, Memory: 256 << 20, CPUTime: time.Minute, Output: 1 << 20}})
	d := b.Describe()
	if d.Kind != KindBwrap || !strings.HasPrefix(d.Version, "bubblewrap ") || d.Network != "none (loopback only)" ||
		!strings.HasPrefix(d.Filesystem, "worktree read-only (observe)") || !strings.Contains(d.User, "user namespace") {
		t.Fatalf("Describe = %+v", d)
	}
	for _, want := range []string{"memory 256 MiB (", "cpu time 1m0s (rlimit)", "pids 64 (", "output 1 MiB"} {
		if !strings.Contains(d.Limits, want) {
			t.Fatalf("limits %q lack %q", d.Limits, want)
		}
	}
	if os.Getuid() == 0 && strings.Contains(d.Limits, "pids 64 NOT") {
		t.Log("no pids cgroup here: the fork bomb test cannot be bounded and will be skipped")
	}
	t.Logf("isolation: %+v", d)
}

func TestBwrapStopKillsTheWholeTree(t *testing.T) {
	b, root := box(t, Policy{Kind: KindBwrap})
	var out sandboxtest.Buffer
	// A child that ignores SIGTERM, in a new session: Stop must still end
	// it, because the pid namespace ends with its leader.
	p := startIn(t, context.Background(), b, root, &out, "sh", "-c",
		`(trap "" TERM; exec setsid sleep 987001) & echo started; wait`)
	sandboxtest.WaitFor(t, "started", func() bool { return strings.Contains(out.String(), "started") && len(hostPids("sleep 987001")) == 1 })
	child := hostPids("sleep 987001")[0]
	p.Stop()
	ex, err := p.Wait()
	if err != nil {
		t.Fatal(err)
	}
	if !ex.Stopped || ex.Signal != "SIGTERM" {
		t.Fatalf("exit = %+v, want stopped by SIGTERM", ex)
	}
	if sandboxtest.Alive(child) {
		t.Fatal("the child outlived the sandbox")
	}
}

func TestBwrapCancelKillAndTimeout(t *testing.T) {
	b, root := box(t, Policy{Kind: KindBwrap})
	ctx, cancel := context.WithCancelCause(context.Background())
	var out sandboxtest.Buffer
	p, err := b.Start(ctx, Spec{Dir: root, Env: testEnv, Output: &out, Grace: time.Hour,
		Argv: []string{"sh", "-c", `trap "" TERM; echo ready; exec sleep 987002`}})
	if err != nil {
		t.Fatal(err)
	}
	sandboxtest.WaitFor(t, "ready", func() bool { return strings.Contains(out.String(), "ready") })
	cancel(ErrKill) // a grace of an hour: only the kill cause can end it
	if ex, _ := p.Wait(); !ex.Stopped || ex.Signal != "SIGKILL" {
		t.Fatalf("exit = %+v, want killed", ex)
	}
	if len(hostPids("sleep 987002")) != 0 {
		t.Fatal("killed sandbox left a process")
	}

	// The timeout's SIGTERM must find the trap in place, which a busy
	// machine may not have run within the timeout: a try whose shell did
	// not get to say so proves nothing, and is made again.
	for try := 1; ; try++ {
		var out sandboxtest.Buffer
		p, err = b.Start(context.Background(), Spec{Dir: root, Env: testEnv, Output: &out, Timeout: 300 * time.Millisecond,
			Grace: 50 * time.Millisecond, Argv: []string{"sh", "-c", `trap "" TERM; echo trapped; exec sleep 987003`}})
		if err != nil {
			t.Fatal(err)
		}
		ex, _ := p.Wait()
		if !strings.Contains(out.String(), "trapped") && try < 10 {
			continue
		}
		if !ex.TimedOut || !ex.Stopped || ex.Signal != "SIGKILL" {
			t.Fatalf("exit = %+v (output %q), want timed out, then killed after the grace", ex, out.String())
		}
		return
	}
}

func TestPolicyTimeoutBoundsSpecs(t *testing.T) {
	b, root := box(t, Policy{Kind: KindBwrap, Limits: Limits{Timeout: 50 * time.Millisecond}})
	p, err := b.Start(context.Background(), Spec{Dir: root, Env: testEnv, Timeout: time.Hour, Argv: []string{"sleep", "1000"}})
	if err != nil {
		t.Fatal(err)
	}
	if ex, _ := p.Wait(); !ex.TimedOut {
		t.Fatalf("exit = %+v: the policy's timeout must bound the spec's", ex)
	}
}

func TestOutputCapKeepsAMarker(t *testing.T) {
	for _, kind := range []string{KindBwrap, KindNone} {
		t.Run(kind, func(t *testing.T) {
			b, root := box(t, Policy{Kind: kind, Limits: Limits{Output: 4096}})
			ex, out := runIn(t, context.Background(), b, root, "sh", "-c", "head -c 100000 /dev/zero | tr '\\0' x; echo; echo done")
			if ex.Code != 0 {
				t.Fatalf("exit = %+v", ex)
			}
			if len(out) != 4096 || !strings.HasSuffix(out, string(truncationMarker(4096))) || !strings.HasPrefix(out, "xxxx") {
				t.Fatalf("output of %d bytes ends %q", len(out), out[max(0, len(out)-80):])
			}
		})
	}
}

func TestSpecsAreCheckedAgainstThePolicy(t *testing.T) {
	outside := t.TempDir()
	for _, kind := range []string{KindBwrap, KindNone} {
		b, root := box(t, Policy{Kind: kind, Env: []string{"DROVER_JOB"}})
		link := filepath.Join(root, "escape")
		if err := os.Symlink(outside, link); err != nil {
			t.Fatal(err)
		}
		for name, s := range map[string]Spec{
			"dir outside root":          {Dir: outside, Argv: []string{"true"}, Env: testEnv},
			"dir symlinked out of root": {Dir: link, Argv: []string{"true"}, Env: testEnv},
			"unlisted variable":         {Dir: root, Argv: []string{"true"}, Env: append(testEnv, "SECRET_SAUCE=1")},
			"token variable":            {Dir: root, Argv: []string{"true"}, Env: append(testEnv, "DROVER_TOKEN=x")},
			"negative timeout":          {Dir: root, Argv: []string{"true"}, Env: testEnv, Timeout: -1},
			"no argv":                   {Dir: root, Env: testEnv},
		} {
			if p, err := b.Start(context.Background(), s); err == nil {
				p.Kill()
				t.Errorf("%s %s: Start succeeded", kind, name)
			}
		}
		ex, out := runIn(t, context.Background(), b, root, "sh", "-c", "echo $DROVER_JOB")
		_ = ex
		if out != "\n" {
			t.Fatalf("%s: %q", kind, out)
		}
	}
}

func TestNewRefusesBadPolicies(t *testing.T) {
	root := t.TempDir()
	sock := filepath.Join(t.TempDir(), "not-a-socket")
	os.WriteFile(sock, nil, 0o600)
	for name, p := range map[string]Policy{
		"unknown kind":        {Kind: "chroot", Root: root},
		"unknown mode":        {Root: root, Mode: "yolo"},
		"relative root":       {Root: "work"},
		"missing root":        {Root: filepath.Join(root, "nope")},
		"root is /":           {Root: "/"},
		"mount inside root":   {Root: root, ReadOnly: []Mount{{Src: t.TempDir(), Dst: filepath.Join(root, "x")}}},
		"mount over root":     {Root: root, ReadWrite: []Mount{{Src: filepath.Dir(root)}}},
		"mount on /proc":      {Root: root, ReadOnly: []Mount{{Src: t.TempDir(), Dst: "/proc/x"}}},
		"ssh agent":           {Root: root, Env: []string{"SSH_AUTH_SOCK"}},
		"git variable":        {Root: root, Env: []string{"GIT_DIR"}},
		"cloud credentials":   {Root: root, Env: []string{"AWS_ACCESS_KEY_ID"}},
		"api key":             {Root: root, Env: []string{"ANTHROPIC_API_KEY"}},
		"bad allow":           {Root: root, Network: Network{Allow: []string{"*.com"}}},
		"negative limit":      {Root: root, Limits: Limits{Pids: -1}},
		"socket not loopback": {Root: root, Sockets: []Socket{{Addr: "0.0.0.0:80", Path: sock}}},
		"not a socket":        {Root: root, Sockets: []Socket{{Addr: "127.0.0.1:80", Path: sock}}},
		"none with network":   {Kind: KindNone, Root: root, Network: Network{Allow: []string{"example.com:443"}}},
	} {
		p.Logger = quiet()
		if _, err := New(context.Background(), p); err == nil {
			t.Errorf("%s: New accepted it", name)
		}
	}
}

// Git's object directories are the one GIT_* setting a policy may pass:
// how an agent commits without writing into the runner's clone.
func TestGitObjectDirectoriesMayBePassed(t *testing.T) {
	for _, name := range []string{"GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES"} {
		if err := checkEnvName(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
}

func TestMissingBwrapIsAnErrorWithTheFix(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	_, err := New(context.Background(), Policy{Root: t.TempDir(), Logger: quiet()})
	var fe *FixError
	if err == nil || !errors.As(err, &fe) || !strings.Contains(err.Error(), "apt-get install bubblewrap") ||
		!strings.Contains(err.Error(), "--sandbox none") {
		t.Fatalf("New without bwrap: %v", err)
	}
}

func TestDoctorReportsEachKind(t *testing.T) {
	checks := Doctor(context.Background())
	byKind := map[string]Check{}
	for _, c := range checks {
		byKind[c.Kind] = c
	}
	for _, k := range append(Kinds(), "limits", "git") {
		if _, ok := byKind[k]; !ok {
			t.Fatalf("no check for %s: %+v", k, checks)
		}
	}
	if c := byKind[KindBwrap]; !c.OK || !strings.HasPrefix(c.Version, "bubblewrap") {
		t.Fatalf("bwrap check = %+v", c)
	}
	if c := byKind[KindNone]; !c.OK || !strings.Contains(c.Detail, "UNISOLATED") {
		t.Fatalf("none check = %+v", c)
	}
	// No container engine works on this project's machines: the check
	// must say why and how to fix it rather than pretend.
	for _, k := range []string{KindDocker, KindPodman} {
		if c := byKind[k]; !c.OK && (c.Detail == "" || c.Fix == "") {
			t.Fatalf("%s check = %+v", k, c)
		}
	}
	b, _ := json.Marshal(checks)
	t.Logf("%s", b)
}
