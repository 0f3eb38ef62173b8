package fleet

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"drover/internal/rules"
)

// Local runs runners as processes of this machine, detached from the
// command that launched them, each in its own state directory:
//
//	StateDir/LAUNCH/NAME/home/        the runner home (0700)
//	StateDir/LAUNCH/NAME/runner.log   what it prints (0600)
//	StateDir/LAUNCH/NAME/pid          its process id
//	StateDir/LAUNCH/NAME/registration its token until it registers (0600)
type Local struct{ procs }

// procs are detached processes of this machine, one per runner, each in
// its own directory; the local target's are runners, the ssh target's the
// bridges of their SSH sessions. argv is a runner's command line (the
// binary's arguments), which names its directory.
type procs struct {
	bin   string
	dir   string
	env   []string
	grace time.Duration // from SIGTERM to SIGKILL at Stop
	argv  func(s Spec, dir string) []string
}

// NewLocal makes the local target.
func NewLocal(c Config) (*Local, error) {
	p, err := newProcs(c, func(s Spec, dir string) []string {
		return runnerArgs(s, filepath.Join(dir, "home"), filepath.Join(dir, tokenFileName))
	})
	return &Local{p}, err
}

const tokenFileName = "registration"

func newProcs(c Config, argv func(Spec, string) []string) (procs, error) {
	if c.StateDir == "" {
		return procs{}, errors.New("a fleet target needs a state directory")
	}
	return procs{bin: c.Binary, dir: c.StateDir, env: runnerEnv(c.Env), grace: 60 * time.Second, argv: argv}, nil
}

// runnerEnv is env without drover's own credentials and hub: a launched
// runner has its own login, never its launcher's.
func runnerEnv(env []string) []string {
	return slices.DeleteFunc(slices.Clone(env), func(kv string) bool {
		k, _, _ := strings.Cut(kv, "=")
		return k == "DROVER_TOKEN" || k == "DROVER_HUB" || k == "DROVER_REGISTRATION_TOKEN"
	})
}

func (l *procs) Check(ctx context.Context) error {
	fi, err := os.Stat(l.bin)
	if err != nil || fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("the fleet runs %q, which is not an executable: reinstall drover", l.bin)
	}
	return nil
}

func (l *procs) runnerDir(launchID, name string) (string, error) {
	return runnerDir(l.dir, launchID, name)
}

// runnerDir is a launched runner's directory under a target's state
// directory.
func runnerDir(root, launchID, name string) (string, error) {
	if !rules.ValidName(launchID) || !rules.ValidName(name) {
		return "", fmt.Errorf("launch %q / runner %q is not a valid name", launchID, name)
	}
	return filepath.Join(root, launchID, name), nil
}

func (l *procs) Launch(ctx context.Context, s Spec) ([]Instance, error) {
	if err := l.Check(ctx); err != nil {
		return nil, err
	}
	var out []Instance
	for _, r := range s.Runners {
		in, err := l.start(s, r)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("start runner %s: %w", r.Name, err), l.Stop(ctx, s.LaunchID))
		}
		out = append(out, in)
	}
	return out, nil
}

func (l *procs) start(s Spec, r RunnerSpec) (Instance, error) {
	dir, err := l.runnerDir(s.LaunchID, r.Name)
	if err != nil {
		return Instance{}, err
	}
	if err := os.MkdirAll(filepath.Join(dir, "home"), 0o700); err != nil {
		return Instance{}, err
	}
	for _, d := range []string{l.dir, filepath.Join(l.dir, s.LaunchID), dir} {
		if err := os.Chmod(d, 0o700); err != nil {
			return Instance{}, err
		}
	}
	if err := os.WriteFile(filepath.Join(dir, tokenFileName), []byte(r.Token+"\n"), 0o600); err != nil {
		return Instance{}, err
	}
	logf, err := os.OpenFile(filepath.Join(dir, "runner.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return Instance{}, err
	}
	defer logf.Close()
	cmd := exec.Command(l.bin, l.argv(s, dir)...)
	cmd.Dir = dir
	cmd.Env = l.env
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own session: the launching command's terminal and its signals
	// do not reach it, and Stop can end its whole process group.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return Instance{}, err
	}
	pid := cmd.Process.Pid
	// Reaped here while this process lives; once it exits, init does.
	go func() { _ = cmd.Wait() }()
	if err := os.WriteFile(filepath.Join(dir, "pid"), []byte(strconv.Itoa(pid)+"\n"), 0o600); err != nil {
		_ = syscall.Kill(-pid, syscall.SIGKILL)
		return Instance{}, err
	}
	return Instance{LaunchID: s.LaunchID, Name: r.Name, Running: true, Where: "pid " + strconv.Itoa(pid)}, nil
}

// alive reports whether pid is still the process of dir (an argument is
// dir or in it): a pid file can outlive its process, and the pid be reused.
func alive(pid int, dir string) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
	if err != nil {
		return false
	}
	return slices.ContainsFunc(bytes.Split(b, []byte{0}), func(a []byte) bool {
		return string(a) == dir || strings.HasPrefix(string(a), dir+"/")
	})
}

// instances reads the runners of one launch ("" for all).
func (l *procs) instances(launchID string) ([]Instance, map[string]int, error) {
	pattern := filepath.Join(l.dir, "*", "*", "pid")
	if launchID != "" {
		if !rules.ValidName(launchID) {
			return nil, nil, fmt.Errorf("launch %q is not a valid name", launchID)
		}
		pattern = filepath.Join(l.dir, launchID, "*", "pid")
	}
	files, err := filepath.Glob(pattern)
	if err != nil {
		return nil, nil, err
	}
	var out []Instance
	pids := map[string]int{}
	for _, f := range files {
		dir := filepath.Dir(f)
		b, err := os.ReadFile(f)
		if err != nil {
			return nil, nil, err
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			return nil, nil, fmt.Errorf("pid file %s: %w", f, err)
		}
		in := Instance{LaunchID: filepath.Base(filepath.Dir(dir)), Name: filepath.Base(dir), Where: "pid " + strconv.Itoa(pid)}
		if in.Running = alive(pid, dir); in.Running {
			pids[in.Name] = pid
		}
		out = append(out, in)
	}
	return out, pids, nil
}

func (l *procs) List(ctx context.Context) ([]Instance, error) {
	out, _, err := l.instances("")
	return out, err
}

// Stop asks each runner of the launch to stop (SIGTERM: its attempts get
// their grace and go back to the queue), and after l.grace kills what is
// left of its process group.
func (l *procs) Stop(ctx context.Context, launchID string) error {
	ins, pids, err := l.instances(launchID)
	if err != nil {
		return err
	}
	for _, pid := range pids {
		_ = syscall.Kill(-pid, syscall.SIGTERM)
	}
	deadline := time.Now().Add(l.grace)
	for _, in := range ins {
		pid, ok := pids[in.Name]
		if !ok {
			continue
		}
		for alive(pid, filepath.Join(l.dir, in.LaunchID, in.Name)) || GroupAlive(pid) {
			if time.Now().After(deadline) {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
			select {
			case <-ctx.Done():
				return fmt.Errorf("stop runner %s: %w", in.Name, ctx.Err())
			case <-time.After(50 * time.Millisecond):
			}
		}
	}
	return nil
}

// GroupAlive reports whether any process of the group pgid is left (a
// zombie counts until it is reaped).
func GroupAlive(pgid int) bool {
	err := syscall.Kill(-pgid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

func (l *procs) Logs(ctx context.Context, name string, w io.Writer) error {
	if !rules.ValidName(name) {
		return fmt.Errorf("runner %q is not a valid name", name)
	}
	files, err := filepath.Glob(filepath.Join(l.dir, "*", name, "runner.log"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no local runner %s here (in %s): `drover fleet list` shows the launched runners", name, l.dir)
	}
	f, err := os.Open(files[0])
	if errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("runner %s has no log", name)
	} else if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}
