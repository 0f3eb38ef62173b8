package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"drover/internal/sandbox/egress"
	"drover/internal/sandbox/sandboxtest"
)

// The docker and podman boundaries run against sandboxtest's fake engine.

func TestContainerRunArgv(t *testing.T) {
	e := sandboxtest.FakeEngineOnPath(t, "drover/job:1")
	ro := t.TempDir()
	root := t.TempDir()
	b, _ := box(t, Policy{Kind: KindDocker, Root: root, Image: "drover/job:1", Env: []string{"DROVER_JOB"},
		ReadOnly: []Mount{{Src: ro, Dst: "/context"}},
		Limits:   Limits{Memory: 512 << 20, CPUs: 1.5, Pids: 256, CPUTime: 90 * time.Second}})
	var out sandboxtest.Buffer
	p, err := b.Start(context.Background(), Spec{Dir: root, Argv: []string{"echo", "hello"}, Output: &out,
		Env: []string{"PATH=/usr/bin:/bin", "DROVER_JOB=jb1"}})
	must(t, err)
	ex, err := p.Wait()
	if err != nil || ex.Code != 0 || out.String() != "hello\n" {
		t.Fatalf("exit %+v %v, output %q", ex, err, out.String())
	}
	uidgid := fmt.Sprintf("%d:%d", os.Getuid(), os.Getgid())
	got := e.Find(t, "run")
	name := got[slices.Index(got, "--name")+1]
	if !strings.HasPrefix(name, "drover-") {
		t.Fatalf("container name %q", name)
	}
	want := []string{"run", "--rm", "--name", name, "--pull", "never",
		"--network", "none", "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--read-only", "--init",
		"--user", uidgid, "--hostname", "sandbox", "--ulimit", "core=0",
		"--tmpfs", fmt.Sprintf("/tmp:rw,nosuid,nodev,size=%d,mode=1777", 512<<20),
		"--tmpfs", fmt.Sprintf("/home/sandbox:rw,nosuid,nodev,size=%d,mode=0700,uid=%d,gid=%d", 512<<20, os.Getuid(), os.Getgid()),
		"--memory", "536870912", "--memory-swap", "536870912", "--cpus", "1.5", "--pids-limit", "256", "--ulimit", "cpu=90:90",
		"--mount", "type=bind,source=" + root + ",target=" + root,
		"--mount", "type=bind,source=" + ro + ",target=/context,readonly",
		"--workdir", root, "--env", "PATH=/usr/bin:/bin", "--env", "DROVER_JOB=jb1", "--env", "HOME=/home/sandbox",
		"--", "drover/job:1", "echo", "hello"}
	if !slices.Equal(got, want) {
		t.Fatalf("engine argv\n got %q\nwant %q", got, want)
	}
	if rm := e.Find(t, "rm"); !slices.Equal(rm, []string{"rm", "--force", name}) {
		t.Fatalf("cleanup %q", rm)
	}
	d := b.Describe()
	if d.Kind != KindDocker || d.Version != "docker 24.0.7-fake, image drover/job:1" || d.Network != "none (loopback only)" ||
		!strings.Contains(d.Limits, "pids 256 (container)") {
		t.Fatalf("Describe = %+v", d)
	}
}

func TestContainerObserveStopAndPull(t *testing.T) {
	e := sandboxtest.FakeEngineOnPath(t, "img")
	b, root := box(t, Policy{Kind: KindPodman, Mode: ModeObserve, Image: "img", AllowPull: true})
	var out sandboxtest.Buffer
	p, err := b.Start(context.Background(), Spec{Dir: root, Argv: []string{"sh", "-c", "echo up; exec sleep 1000"}, Env: testEnv,
		Output: &out, Grace: time.Hour})
	must(t, err)
	sandboxtest.WaitFor(t, "up", func() bool { return strings.Contains(out.String(), "up") })
	p.Stop()
	// The fake engine's kill does nothing; Kill must still end the CLI.
	p.Kill()
	if ex, _ := p.Wait(); !ex.Stopped {
		t.Fatalf("exit %+v", ex)
	}
	run := e.Find(t, "run")
	name := run[slices.Index(run, "--name")+1]
	if run[0] != "run" || !slices.Contains(run, "type=bind,source="+root+",target="+root+",readonly") ||
		run[slices.Index(run, "--pull")+1] != "missing" {
		t.Fatalf("podman argv %q", run)
	}
	var kills [][]string
	for _, c := range e.Calls(t) {
		if c[0] == "kill" {
			kills = append(kills, c)
		}
	}
	if len(kills) != 2 || !slices.Equal(kills[0], []string{"kill", "--signal", "TERM", name}) ||
		!slices.Equal(kills[1], []string{"kill", "--signal", "KILL", name}) {
		t.Fatalf("kills %q", kills)
	}
}

func TestContainerBridgeArgv(t *testing.T) {
	e := sandboxtest.FakeEngineOnPath(t, "img")
	init := filepath.Join(t.TempDir(), "drover")
	must(t, os.WriteFile(init, []byte("#!/bin/sh\n"), 0o755))
	b, root := box(t, Policy{Kind: KindDocker, Image: "img", InitBinary: init, Network: Network{
		Allow: []string{"api.example.com:443"},
		Credentials: []egress.Credential{{Name: "x", Upstream: "https://api.example.com", Header: "x-api-key", Key: "real",
			KeyEnv: "X_API_KEY", BaseURLEnv: "X_BASE_URL"}}}})
	p, err := b.Start(context.Background(), Spec{Dir: root, Argv: []string{"agent"}, Env: testEnv})
	must(t, err)
	p.Wait() // the fake engine cannot run the init; only the argv matters
	run := e.Find(t, "run")
	s := strings.Join(run, " ")
	for _, want := range []string{
		"--network none",
		",target=/run/drover,readonly",
		"type=bind,source=" + init + ",target=/run/drover/drover,readonly",
		"--env X_API_KEY=drover-placeholder-", "--env X_BASE_URL=http://127.0.0.1:3129",
		"-- img /run/drover/drover sandbox-init --bridge 127.0.0.1:3128=/run/drover/egress.sock --proxy 127.0.0.1:3128 " +
			"--bridge 127.0.0.1:3129=/run/drover/credential-0.sock -- agent",
	} {
		if !strings.Contains(s, want) {
			t.Fatalf("argv lacks %q:\n%s", want, s)
		}
	}
	if strings.Contains(s, "real") {
		t.Fatal("the real key is on the engine's command line")
	}
}

func TestContainerEngineThatDoesNotWork(t *testing.T) {
	sandboxtest.FakeEngineOnPath(t, "img")
	root := t.TempDir()
	for name, c := range map[string]struct {
		p    Policy
		down bool
		want string
	}{
		"engine down":    {Policy{Kind: KindDocker, Image: "img"}, true, "start it"},
		"no image named": {Policy{Kind: KindDocker}, false, "needs an image"},
		"image missing":  {Policy{Kind: KindDocker, Image: "other"}, false, "docker pull other"},
	} {
		if c.down {
			t.Setenv("DOCKER_FAKE_DOWN", "1")
		} else {
			t.Setenv("DOCKER_FAKE_DOWN", "")
		}
		c.p.Root, c.p.Logger = root, quiet()
		_, err := New(context.Background(), c.p)
		var fe *FixError
		if err == nil || !errors.As(err, &fe) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v", name, err)
		}
	}
	t.Setenv("PATH", t.TempDir())
	if _, err := New(context.Background(), Policy{Kind: KindPodman, Image: "img", Root: root}); err == nil ||
		!strings.Contains(err.Error(), "podman is not installed") {
		t.Errorf("no podman: %v", err)
	}
}
