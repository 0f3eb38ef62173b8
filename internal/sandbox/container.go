package sandbox

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"
)

// engineTimeout bounds every engine command other than the job's own run.
const engineTimeout = 20 * time.Second

// engineBox runs each command in a fresh docker or podman container,
// through the engine's CLI.
type engineBox struct {
	p           Policy
	bin         string
	version     string
	uid, gid    int
	placeholder string
}

func newEngine(ctx context.Context, p Policy) (Boundary, error) {
	version, err := engineCheck(ctx, p.Kind)
	if err != nil {
		return nil, err
	}
	if p.Image == "" {
		return nil, &FixError{Problem: "--sandbox " + p.Kind + " needs an image to run jobs in", Fix: "name one in the runner's configuration"}
	}
	bin, _ := exec.LookPath(p.Kind) // engineCheck found it
	e := &engineBox{p: p, bin: bin, version: version, uid: os.Getuid(), gid: os.Getgid()}
	// "--": whatever the image is called, it is never read as a flag.
	if _, err := engineOutput(ctx, bin, engineEnv(), "image", "inspect", "--format", "{{.Id}}", "--", p.Image); err != nil && !p.AllowPull {
		return nil, &FixError{Problem: fmt.Sprintf("image %s is not on this machine and the runner may not pull images", p.Image),
			Fix: fmt.Sprintf("run `%s pull %s` here, or allow pulls", p.Kind, p.Image)}
	}
	if len(p.Network.Credentials) > 0 {
		e.placeholder = "drover-placeholder-" + randomHex(16)
	}
	return e, nil
}

// engineCheck finds the engine's CLI and asks the engine its version.
func engineCheck(ctx context.Context, kind string) (string, error) {
	bin, err := exec.LookPath(kind)
	if err != nil {
		return "", &FixError{Problem: kind + " is not installed", Fix: "install it, or use --sandbox bwrap (the default)"}
	}
	v, err := engineOutput(ctx, bin, engineEnv(), "version", "--format", engineVersionFormat(kind))
	if err != nil || v == "" {
		return "", &FixError{Problem: fmt.Sprintf("the %s engine does not answer (%v)", kind, err),
			Fix: fmt.Sprintf("start it (e.g. systemctl start %s), or use --sandbox bwrap (the default)", kind)}
	}
	return kind + " " + v, nil
}

func engineVersionFormat(kind string) string {
	if kind == KindPodman {
		return "{{.Client.Version}}" // podman has no daemon to ask
	}
	return "{{.Server.Version}}" // fails without a daemon: that is the check
}

// engineEnv is the engine CLI's environment: what it needs to find its
// engine, nothing else of the runner's (the container gets only --env).
func engineEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "PATH" || name == "HOME" || name == "XDG_RUNTIME_DIR" || name == "TMPDIR" ||
			strings.HasPrefix(name, "DOCKER_") || strings.HasPrefix(name, "CONTAINER_") || strings.HasPrefix(name, "CONTAINERS_") {
			env = append(env, kv)
		}
	}
	return env
}

// engineOutput runs an engine command other than a job's and returns its
// trimmed output.
func engineOutput(ctx context.Context, bin string, env []string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, engineTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	s := strings.TrimSpace(string(out))
	if err != nil {
		if s != "" {
			err = fmt.Errorf("%w: %s", err, firstLine(s))
		}
		return "", err
	}
	return s, nil
}

func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

func (e *engineBox) Describe() Isolation {
	fs := fmt.Sprintf("read-only image root; worktree read-write (%s)", e.p.Mode)
	if e.p.Mode == ModeObserve {
		fs = "read-only image root; worktree read-only (observe)"
	}
	fs += "; private /tmp and home"
	if n := len(e.p.ReadOnly) + len(e.p.ReadWrite); n > 0 {
		fs += fmt.Sprintf("; %d extra mount(s)", n)
	}
	return Isolation{
		Kind:       e.p.Kind,
		Version:    e.version + ", image " + e.p.Image,
		Network:    networkOf(e.p),
		Filesystem: fs,
		User:       fmt.Sprintf("uid:gid %d:%d; all capabilities dropped, no new privileges", e.uid, e.gid),
		Limits: e.p.Limits.describe(limitMechanisms{memory: "container", pids: "container", cpus: "container",
			cpuTime: "container ulimit"}, true),
	}
}

// args is the engine command line that runs command in dir in container
// name.
func (e *engineBox) args(name, dir string, env []string, bridge *bridgePlan, command []string) []string {
	l := e.p.Limits
	pull := "never"
	if e.p.AllowPull {
		pull = "missing"
	}
	size := int64(defaultTmpfs)
	if l.Memory > 0 {
		size = l.Memory
	}
	a := []string{e.p.Kind, "run", "--rm", "--name", name, "--pull", pull,
		"--network", "none", "--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--read-only", "--init",
		"--user", fmt.Sprintf("%d:%d", e.uid, e.gid), "--hostname", "sandbox", "--ulimit", "core=0",
		"--tmpfs", fmt.Sprintf("/tmp:rw,nosuid,nodev,size=%d,mode=1777", size),
		"--tmpfs", fmt.Sprintf("%s:rw,nosuid,nodev,size=%d,mode=0700,uid=%d,gid=%d", Home, size, e.uid, e.gid),
	}
	if l.Memory > 0 {
		m := strconv.FormatInt(l.Memory, 10)
		a = append(a, "--memory", m, "--memory-swap", m)
	}
	if l.CPUs > 0 {
		a = append(a, "--cpus", strconv.FormatFloat(l.CPUs, 'f', -1, 64))
	}
	if l.Pids > 0 {
		a = append(a, "--pids-limit", strconv.Itoa(l.Pids))
	}
	if l.CPUTime > 0 {
		s := strconv.FormatInt(int64((l.CPUTime+time.Second-1)/time.Second), 10)
		a = append(a, "--ulimit", "cpu="+s+":"+s)
	}
	mount := func(src, dst string, ro bool) {
		m := "type=bind,source=" + src + ",target=" + dst
		if ro {
			m += ",readonly"
		}
		a = append(a, "--mount", m)
	}
	mount(e.p.Root, e.p.Root, e.p.Mode == ModeObserve)
	for _, m := range e.p.ReadOnly {
		mount(m.Src, m.Dst, true)
	}
	for _, m := range e.p.ReadWrite {
		mount(m.Src, m.Dst, false)
	}
	if bridge != nil {
		mount(bridge.dir, runDir, true)
		for _, b := range bridge.binds {
			mount(b[0], b[1], true)
		}
		command = append(append([]string{}, bridge.init...), command...)
	}
	a = append(a, "--workdir", dir)
	for _, kv := range env {
		a = append(a, "--env", kv)
	}
	a = append(a, "--", e.p.Image)
	return append(a, command...)
}

func (e *engineBox) Start(ctx context.Context, s Spec) (Process, error) {
	s, err := e.p.check(s)
	if err != nil {
		return nil, err
	}
	out := newCapWriter(s.Output, e.p.Limits.Output)
	env := setEnv(s.Env, "HOME", Home)
	t := &containerTree{bin: e.bin, name: "drover-" + randomHex(8), log: e.p.Logger}
	var bridge *bridgePlan
	if e.p.bridged() {
		if bridge, err = e.p.bridge(e.placeholder, out); err != nil {
			return nil, err
		}
		env = append(env, bridge.env...)
		t.cleanup = append(t.cleanup, bridge.close)
	}
	args := e.args(t.name, s.Dir, env, bridge, s.Argv)
	p, err := start(ctx, launch{
		cmd:     &exec.Cmd{Path: e.bin, Args: args, Env: engineEnv()},
		timeout: s.Timeout, grace: s.Grace, out: out, wrapped: true,
		setup: func(pid int) (tree, error) {
			t.pgid = pid
			return t, nil
		},
	})
	if err != nil {
		t.release()
		return nil, err
	}
	return p, nil
}

// containerTree is a container: the engine ends every process in it.
type containerTree struct {
	bin, name string
	pgid      int // the engine CLI's process group
	cleanup   []func() error
	log       interface{ Warn(string, ...any) }
}

func (t *containerTree) engine(args ...string) {
	args = append(args, t.name)
	if _, err := engineOutput(context.Background(), t.bin, engineEnv(), args...); err != nil &&
		!strings.Contains(err.Error(), "No such container") && !strings.Contains(err.Error(), "no such container") {
		t.log.Warn("container engine", "args", args, "err", err)
	}
}

// signal reaches the container's init, which passes it to the command.
func (t *containerTree) signal(sig unix.Signal) {
	t.engine("kill", "--signal", strings.TrimPrefix(unix.SignalName(sig), "SIG"))
}

func (t *containerTree) kill() {
	t.engine("kill", "--signal", "KILL")
	if t.pgid > 0 {
		_ = unix.Kill(-t.pgid, unix.SIGKILL)
	}
}

// release removes the container whatever state it is in: --rm does it on
// a normal exit, not when the CLI was killed.
func (t *containerTree) release() {
	if t.pgid > 0 {
		_ = unix.Kill(-t.pgid, unix.SIGKILL)
		t.engine("rm", "--force")
	}
	var errs []error
	for i := len(t.cleanup) - 1; i >= 0; i-- {
		errs = append(errs, t.cleanup[i]())
	}
	t.cleanup = nil
	if err := errors.Join(errs...); err != nil {
		t.log.Warn("sandbox cleanup", "err", err)
	}
}
