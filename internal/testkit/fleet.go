package testkit

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// FleetDir is where `drover fleet` run through Hub.CLI keeps the runners
// of the named target.
func (h *Hub) FleetDir(target string) string {
	return filepath.Join(h.home, ".local", "state", "drover", "fleet", target)
}

// FleetPIDs reads the process ids of every process (a runner, or an ssh
// session's bridge) the target started for this hub's CLI.
func (h *Hub) FleetPIDs(target string) []int {
	h.t.Helper()
	files, err := filepath.Glob(filepath.Join(h.FleetDir(target), "*", "*", "pid"))
	if err != nil {
		h.t.Fatal(err)
	}
	var pids []int
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			h.t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil {
			h.t.Fatal(err)
		}
		pids = append(pids, pid)
	}
	return pids
}

// Procs lists the live processes whose command line has all of words,
// with their parent's pid.
func Procs(t testing.TB, words ...string) map[int]int {
	t.Helper()
	out := map[int]int{}
	dirs, err := filepath.Glob("/proc/[0-9]*")
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range dirs {
		b, err := os.ReadFile(filepath.Join(d, "cmdline"))
		if err != nil || len(b) == 0 {
			continue
		}
		cl := strings.ReplaceAll(string(b), "\x00", " ")
		if !containsAll(cl, words) {
			continue
		}
		pid, _ := strconv.Atoi(filepath.Base(d))
		st, err := os.ReadFile(filepath.Join(d, "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces, so after the ')'.
		f := strings.Fields(string(st[strings.LastIndexByte(string(st), ')')+1:]))
		if len(f) > 1 {
			ppid, _ := strconv.Atoi(f[1])
			out[pid] = ppid
		}
	}
	return out
}

func containsAll(s string, words []string) bool {
	for _, w := range words {
		if !strings.Contains(s, w) {
			return false
		}
	}
	return true
}

// Environ reads a process's environment.
func Environ(t testing.TB, pid int) []string {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(strings.TrimRight(string(b), "\x00"), "\x00")
}

// Process is a long-running drover CLI command (e.g. fleet autoscale).
type Process struct{ p *proc }

// StartCLI starts a drover client command against this hub as the admin
// in the background; it is killed when the test ends.
func (h *Hub) StartCLI(t testing.TB, args ...string) *Process {
	t.Helper()
	return &Process{start(t, "drover "+strings.Join(args, " "), h.cliEnv(), nil, h.bin, args...)}
}

// Terminate sends SIGTERM and waits up to d for the exit.
func (p *Process) Terminate(d time.Duration) error {
	p.p.signal(syscall.SIGTERM)
	return p.p.wait(d)
}

// Output is what the command printed so far.
func (p *Process) Output() string { return p.p.out.String() }

// StartRegisteringRunner starts `drover runner` in home, registering with
// a fleet registration token in $DROVER_REGISTRATION_TOKEN (as the
// docker/podman target passes it).
func (h *Hub) StartRegisteringRunner(t testing.TB, home, token string, args ...string) *Process {
	t.Helper()
	env := append(baseEnv(filepath.Join(home, "..")), "DROVER_REGISTRATION_TOKEN="+token)
	all := append([]string{"runner", "--home", home, "--hub", h.URL, "--min-free", "1048576"}, args...)
	return &Process{start(t, "runner "+filepath.Base(home), env, nil, h.bin, all...)}
}
