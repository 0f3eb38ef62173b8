// Package testkit starts real drover processes for end-to-end tests: a hub
// and runners as separate OS processes of the real binary, on loopback, each
// with its own data directory. It is the one place tests get them from.
package testkit

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/childproc"
	"drover/internal/client"
	"drover/internal/job"
	"drover/internal/runner"
	"drover/internal/testkit/plainbuild"
	"drover/internal/testkit/syncbuf"
)

// Need is what a package's tests ask of the drover processes they start;
// each package declares it once, in its TestMain (MainWithBinary).
type Need int

const (
	// PlainBinary: the tests check what drover does (jobs, agents,
	// repositories, pipelines), not the hub's or runner's own concurrency.
	// A plain build (the release's flags, internal/testkit/plainbuild)
	// costs under half the CPU of a race build in the processes it starts
	// (docs/benchmarks.md, "Session 22: the suite's CPU"), and the suite's
	// 2 cores are its limit.
	PlainBinary Need = iota
	// RaceBinary: the processes' own concurrency is what the tests exercise
	// (hubs racing for leases, cut connections, faults): the processes are
	// race builds whenever the tests are.
	RaceBinary
)

// Build returns the drover binary that need asks for, compiling cmd/drover
// into dir unless scripts/test has built it once for every package
// (DROVER_TEST_BINARY for RaceBinary, plainbuild.BinaryEnv for
// PlainBinary): the e2e packages run side by side, and each linking its
// own binary, or compiling its packages anew from an empty build cache,
// costs minutes of the suite's 2 cores.
func Build(dir string, need Need) (string, error) {
	if need == PlainBinary {
		return plainbuild.Drover(dir)
	}
	if prebuilt := os.Getenv("DROVER_TEST_BINARY"); prebuilt != "" {
		if fi, err := os.Stat(prebuilt); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return "", fmt.Errorf("DROVER_TEST_BINARY=%s is not an executable file (%v)", prebuilt, err)
		}
		return prebuilt, nil
	}
	bin := filepath.Join(dir, "drover")
	args := []string{"build", "-o", bin}
	if raceEnabled {
		args = append(args, "-race")
	}
	root, err := moduleRoot()
	if err != nil {
		return "", err
	}
	cmd := exec.Command("go", append(args, "./cmd/drover")...)
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build drover: %v\n%s", err, out)
	}
	return bin, nil
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("find module root: %w", err)
	}
	return filepath.Dir(strings.TrimSpace(string(out))), nil
}

// proc is one child process whose output goes to a file that is shown when
// the test fails.
type proc struct {
	t    testing.TB
	name string
	cmd  *exec.Cmd
	out  *syncbuf.Buffer
	done chan struct{}
	err  error
}

// baseEnv is the environment of every child: nothing of the test's own
// drover settings leaks in.
func baseEnv(home string) []string { return childproc.Env(home) }

func start(t testing.TB, name string, env []string, stdout io.Writer, bin string, args ...string) *proc {
	t.Helper()
	p := &proc{t: t, name: name, out: &syncbuf.Buffer{}, done: make(chan struct{})}
	p.cmd = exec.Command(bin, args...)
	p.cmd.Env = env
	p.cmd.Stderr = p.out
	p.cmd.Stdout = p.out
	if stdout != nil {
		p.cmd.Stdout = io.MultiWriter(p.out, stdout)
	}
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", name, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.kill()
		out := p.out.String()
		// A race build reports a data race on its stderr and exits 66 only
		// when it exits on its own; the tests kill their processes, so the
		// report is read here or never.
		if i := strings.Index(out, raceReport); i >= 0 {
			t.Errorf("%s reported a data race:\n%s", name, head(out[i:], 8000))
		}
		if t.Failed() {
			t.Logf("--- output of %s ---\n%s", name, tail(out, 8000))
		}
	})
	return p
}

// raceReport opens each report of the race detector.
const raceReport = "WARNING: DATA RACE"

func head(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "…" + s[len(s)-n:]
}

func (p *proc) signal(sig syscall.Signal) {
	if p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// kill SIGKILLs the process group and waits for it.
func (p *proc) kill() {
	select {
	case <-p.done:
		return
	default:
	}
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	<-p.done
}

// wait waits for the process to exit on its own.
func (p *proc) wait(d time.Duration) error {
	select {
	case <-p.done:
		return p.err
	case <-time.After(d):
		return fmt.Errorf("%s still running after %s", p.name, d)
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Hub is a `drover hub` process.
type Hub struct {
	t     testing.TB
	bin   string
	Data  string
	URL   string
	Admin string // admin token
	args  []string
	p     *proc
	home  string
}

var listenRE = regexp.MustCompile(`drover hub listening on (http://\S+)`)

// StartHub starts `drover hub` on a free loopback port with extra flags
// (e.g. "--lease", "2s") and waits until it accepts connections.
func StartHub(t testing.TB, bin string, args ...string) *Hub {
	t.Helper()
	return startHub(t, bin, filepath.Join(t.TempDir(), "hub"), args)
}

func startHub(t testing.TB, bin, data string, args []string) *Hub {
	t.Helper()
	h := &Hub{t: t, bin: bin, Data: data, home: t.TempDir(), args: args, URL: freeURL(t)}
	h.start()
	tok, err := os.ReadFile(filepath.Join(h.Data, "admin.token"))
	if err != nil {
		t.Fatalf("read admin token: %v", err)
	}
	h.Admin = strings.TrimSpace(string(tok))
	return h
}

// StartPeer starts another `drover hub` process with h's flags (so on h's
// --db database): a second hub of one deployment. Users and runners are in
// the database, so h's admin token works on it too. data is its data
// directory: "" for one of its own, h.Data to share h's (and so its
// hosted repositories).
func (h *Hub) StartPeer(t testing.TB, data string) *Hub {
	t.Helper()
	if data == "" {
		data = filepath.Join(t.TempDir(), "hub")
	}
	p := &Hub{t: t, bin: h.bin, Data: data, home: t.TempDir(), args: h.args, Admin: h.Admin, URL: freeURL(t)}
	p.start()
	return p
}

// freeURL is the http URL of a loopback port free now.
func freeURL(t testing.TB) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return "http://" + ln.Addr().String()
}

func (h *Hub) start() {
	h.t.Helper()
	h.startWhen("", nil)
}

// startWhen starts the hub and waits until it listens; with said, it calls
// do once the hub's output holds said (before it listens).
func (h *Hub) startWhen(said string, do func()) {
	h.t.Helper()
	lines := make(chan string, 16)
	pr, pw := io.Pipe()
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			select {
			case lines <- sc.Text():
			default:
			}
		}
	}()
	args := append([]string{"hub", "--listen", strings.TrimPrefix(h.URL, "http://"), "--data", h.Data}, h.args...)
	h.p = start(h.t, "hub", baseEnv(h.home), pw, h.bin, args...)
	// Generous: a race-enabled hub on a busy machine starts slowly.
	deadline := time.After(3 * time.Minute)
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			if do != nil && strings.Contains(h.p.out.String(), said) {
				do()
				do = nil
			}
		case l := <-lines:
			if listenRE.MatchString(l) {
				return
			}
		case <-h.p.done:
			h.t.Fatalf("hub exited at start: %v\n%s", h.p.err, h.p.out.String())
		case <-deadline:
			h.t.Fatalf("hub did not start listening:\n%s", h.p.out.String())
		}
	}
}

// Kill SIGKILLs the hub.
func (h *Hub) Kill() { h.p.kill() }

// Pause stops the hub (SIGSTOP) for d and lets it go on (SIGCONT): a
// suspended machine, as the hub sees it.
func (h *Hub) Pause(d time.Duration) {
	h.p.signal(syscall.SIGSTOP)
	time.Sleep(d)
	h.p.signal(syscall.SIGCONT)
}

// Restart starts the hub again on the same address and data directory.
func (h *Hub) Restart() { h.p.kill(); h.start() }

// RestartWhen restarts the hub like Restart and calls do once the starting
// hub has said said, for a test that changes the hub's world at that point
// (frees the full disk it waits on) rather than after a fixed time.
func (h *Hub) RestartWhen(said string, do func()) { h.p.kill(); h.startWhen(said, do) }

// Client is an API client with the admin token.
func (h *Hub) Client() *client.Client {
	c, err := client.New(h.URL, h.Admin, client.WithTimeout(60*time.Second))
	if err != nil {
		h.t.Fatal(err)
	}
	return c
}

// Probe GETs path (/healthz, /readyz) of the hub without a token, as a
// load balancer does: the status code and body, or an error if the hub
// did not answer.
func (h *Hub) Probe(path string) (int, string, error) {
	c := &http.Client{Timeout: 60 * time.Second} // as Client's: a busy machine is slow, not down
	resp, err := c.Get(h.URL + path)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// Output is everything the hub printed.
func (h *Hub) Output() string { return h.p.out.String() }

// Home is the HOME of the hub and of its CLI commands.
func (h *Hub) Home() string { return h.home }

// CLI runs a drover client command against this hub as the admin and
// returns its stdout+stderr.
func (h *Hub) CLI(args ...string) (string, error) { return h.CLIWith(nil, args...) }

// CLIWith is CLI with env added to the command's environment.
func (h *Hub) CLIWith(extra []string, args ...string) (string, error) {
	cmd := exec.Command(h.bin, args...)
	env := h.cliEnv(extra...)
	cmd.Env = env
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// CLIOut is CLI with stdout and stderr apart (a log on stdout, the
// separators and events on stderr).
func (h *Hub) CLIOut(args ...string) (stdout, stderr string, err error) {
	cmd := exec.Command(h.bin, args...)
	cmd.Env = h.cliEnv()
	var out, errs bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errs
	err = cmd.Run()
	return out.String(), errs.String(), err
}

// cliEnv is the environment of a client command as the admin.
func (h *Hub) cliEnv(extra ...string) []string {
	return append(append(baseEnv(h.home), "DROVER_HUB="+h.URL, "DROVER_TOKEN="+h.Admin), extra...)
}

// Runner is a `drover runner` process with its own home.
type Runner struct {
	t    testing.TB
	hub  *Hub
	Name string
	Home string
	URL  string // hub URL the runner dials (a proxy in some tests)
	// Env is added to the runner's environment (e.g. a PATH with the agent
	// CLIs) at its next Start.
	Env  []string
	args []string
	p    *proc
}

var approveRE = regexp.MustCompile(`drover runner approve '?([^'\s]+)'?`)

// StartRunner logs a runner in through the real login/approve flow and
// starts it with extra flags (e.g. "--slots", "2").
func (h *Hub) StartRunner(t testing.TB, name string, args ...string) *Runner {
	t.Helper()
	r := h.LoginRunner(t, name, h.URL)
	r.args = args
	r.Start()
	return r
}

// LoginRunner runs `drover runner login` against hubURL (the hub or a proxy
// in front of it) and approves it with `drover runner approve`.
func (h *Hub) LoginRunner(t testing.TB, name, hubURL string) *Runner {
	t.Helper()
	return h.loginRunner(t, name, hubURL, h.CLI)
}

// loginRunner runs `drover runner login` and approves the link it prints
// with cli (`drover runner approve LINK` as the admin or another user: the
// approver owns the runner).
func (h *Hub) loginRunner(t testing.TB, name, hubURL string, cli func(args ...string) (string, error)) *Runner {
	t.Helper()
	return h.LoginRunnerWith(t, name, hubURL, func(link string) {
		if out, err := cli("runner", "approve", link); err != nil {
			t.Fatalf("approve runner %s: %v\n%s", name, err, out)
		}
	})
}

// LoginRunnerWith runs `drover runner login` asking for name and lets
// approve approve the link it prints. The Runner's Name is the one its
// saved login holds: the hub's.
func (h *Hub) LoginRunnerWith(t testing.TB, name, hubURL string, approve func(link string)) *Runner {
	t.Helper()
	return h.loginRunnerAt(t, name, hubURL, filepath.Join(t.TempDir(), "runner-"+name), approve)
}

func (h *Hub) loginRunnerAt(t testing.TB, name, hubURL, home string, approve func(link string)) *Runner {
	t.Helper()
	r := &Runner{t: t, hub: h, Name: name, Home: home, URL: hubURL}
	codes := make(chan string, 1)
	pr, pw := io.Pipe()
	go func() {
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			if m := approveRE.FindStringSubmatch(sc.Text()); m != nil {
				select {
				case codes <- m[1]:
				default:
				}
			}
		}
	}()
	login := start(t, "runner login "+name, baseEnv(h.home), pw, h.bin, "runner", "login", "--hub", hubURL, "--name", name, "--home", r.Home)
	select {
	case code := <-codes:
		approve(code)
	case <-login.done:
		t.Fatalf("runner login exited early: %v\n%s", login.err, login.out.String())
	case <-time.After(3 * time.Minute): // generous: a busy machine is slow
		t.Fatalf("runner login printed no approval code:\n%s", login.out.String())
	}
	if err := login.wait(3 * time.Minute); err != nil {
		t.Fatalf("runner login: %v\n%s", err, login.out.String())
	}
	l, err := runner.LoadLogin(r.Home)
	if err != nil {
		t.Fatalf("runner login saved nothing: %v\n%s", err, login.out.String())
	}
	r.Name = l.Name
	return r
}

// Start starts (or restarts) the runner process.
func (r *Runner) Start(args ...string) {
	r.t.Helper()
	if len(args) > 0 {
		r.args = args
	}
	// A small free-space floor: the default (256 MiB) would make every
	// test fail on a machine whose temporary directory is nearly full. A
	// test that wants another floor passes --min-free, which comes later
	// and wins.
	all := append([]string{"runner", "--home", r.Home, "--hub", r.URL, "--min-free", "1048576"}, r.args...)
	r.p = start(r.t, "runner "+r.Name, r.env(), nil, r.hub.bin, all...)
}

func (r *Runner) env() []string {
	return mergeEnv(baseEnv(filepath.Join(r.Home, "..")), r.Env)
}

// CLI runs `drover runner ARGS... --home HOME` on this runner's machine
// (e.g. account add) with stdin, and returns its stdout+stderr.
func (r *Runner) CLI(stdin string, args ...string) (string, error) {
	cmd := exec.Command(r.hub.bin, append(append([]string{"runner"}, args...), "--home", r.Home)...)
	cmd.Env = r.env()
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// mergeEnv returns base with over's entries replacing those of the same name.
func mergeEnv(base, over []string) []string {
	out := make([]string, 0, len(base)+len(over))
	for _, kv := range base {
		name, _, _ := strings.Cut(kv, "=")
		if !slices.ContainsFunc(over, func(o string) bool { return strings.HasPrefix(o, name+"=") }) {
			out = append(out, kv)
		}
	}
	return append(out, over...)
}

// Kill SIGKILLs the runner process group... but only the runner itself:
// its agents die with it (Pdeathsig), as they would on a real crash.
func (r *Runner) Kill() {
	r.p.signal(syscall.SIGKILL)
	<-r.p.done
}

// Terminate sends SIGTERM and waits for a graceful exit.
func (r *Runner) Terminate(d time.Duration) error {
	r.p.signal(syscall.SIGTERM)
	return r.p.wait(d)
}

// Wait waits for the runner to exit on its own (e.g. after revocation).
func (r *Runner) Wait(d time.Duration) error { return r.p.wait(d) }

// Exited reports whether the runner process has ended.
func (r *Runner) Exited() bool { return r.p.exited() }

// Output is everything the runner printed.
func (r *Runner) Output() string { return r.p.out.String() }

// Claims is the runner's own journal: every attempt it ever claimed.
func (r *Runner) Claims() []runner.Claim {
	r.t.Helper()
	cs, err := runner.Claims(r.Home)
	if err != nil {
		r.t.Fatalf("read claims of %s: %v", r.Name, err)
	}
	return cs
}

// WaitJob polls the job until cond holds.
func WaitJob(t testing.TB, c *client.Client, id string, d time.Duration, cond func(apitypes.JobView) bool) apitypes.JobView {
	t.Helper()
	return poll(t, d, func(ctx context.Context) (apitypes.JobView, error) { return c.Job(ctx, id) }, cond,
		func(last apitypes.JobView, err error) string {
			return fmt.Sprintf("job %s: condition not met within %s; last: state=%s attempts=%+v (err %v)", id, d, last.State, last.Attempts, err)
		})
}

// WaitPipeline polls the pipeline until cond holds.
func WaitPipeline(t testing.TB, c *client.Client, id string, d time.Duration, cond func(apitypes.PipelineView) bool) apitypes.PipelineView {
	t.Helper()
	return poll(t, d, func(ctx context.Context) (apitypes.PipelineView, error) { return c.Pipeline(ctx, id) }, cond,
		func(last apitypes.PipelineView, err error) string {
			return fmt.Sprintf("pipeline %s: condition not met within %s; last: state=%s %s steps=%+v (err %v)", id, d, last.State, last.Reason, last.Steps, err)
		})
}

// poll reads with get until cond holds, failing the test with failure's
// message after d.
func poll[T any](t testing.TB, d time.Duration, get func(context.Context) (T, error), cond func(T) bool, failure func(T, error) string) T {
	t.Helper()
	deadline := time.Now().Add(d)
	var last T
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		v, err := get(ctx)
		cancel()
		if err == nil {
			last = v
			if cond(v) {
				return v
			}
		}
		if time.Now().After(deadline) {
			t.Fatal(failure(last, err))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Log reads the whole log of one attempt of a job.
func Log(t testing.TB, c *client.Client, id string, attempt int64) string {
	t.Helper()
	var b bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var offset int64
	for {
		chunk, err := c.ReadLog(ctx, id, client.LogRequest{Attempt: attempt, Offset: offset}, &b)
		if err != nil {
			t.Fatalf("read log of %s: %v", id, err)
		}
		if chunk.Complete || chunk.Next == offset {
			return b.String()
		}
		offset = chunk.Next
	}
}

// MainWithBinary is a TestMain for a package whose tests run the real
// binary: it builds the drover need asks for once into a temporary
// directory (Build), sets *bin to it, runs the tests and removes the
// directory. It exits the process.
func MainWithBinary(m *testing.M, bin *string, need Need) {
	dir, err := os.MkdirTemp("", "drover-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	*bin, err = Build(dir, need)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(dir)
		os.Exit(1)
	}
	code := m.Run()
	StopPostgres()
	os.RemoveAll(dir)
	os.Exit(code)
}

// WaitFor polls cond until it holds, failing the test after d.
func WaitFor(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s", what, d)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// EventKinds counts a job's events by kind.
func EventKinds(evs []apitypes.EventView) map[string]int {
	n := map[string]int{}
	for _, e := range evs {
		n[e.Kind]++
	}
	return n
}

// InState is WaitJob's condition that the job is in state s.
func InState(s job.State) func(apitypes.JobView) bool {
	return func(v apitypes.JobView) bool { return v.State == s }
}

// Submit submits req with c, failing the test on an error.
func Submit(t testing.TB, c *client.Client, req apitypes.SubmitRequest) apitypes.JobView {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	v, _, err := c.Submit(ctx, req)
	if err != nil {
		t.Fatalf("submit: %v", err)
	}
	return v
}

// Race is whether the tests run under the race detector, for a test that
// must size its load to it (the pure-Go SQLite commits many times slower
// there).
const Race = raceEnabled
