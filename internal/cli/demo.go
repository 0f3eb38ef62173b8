package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"drover/internal/client"
	"drover/internal/job"
	"drover/internal/protocol"
)

const (
	demoScript  = `echo hello from drover; for i in 1 2 3; do echo step $i; sleep 0.3; done`
	demoTimeout = 2 * time.Minute
	stopGrace   = 45 * time.Second // a runner's graceful stop waits up to 30s for the hub's acks
)

func (a *app) demoCmd() *cobra.Command {
	var keep bool
	cmd := &cobra.Command{
		Use:   "demo [--keep]",
		Short: "Start a hub and a runner, run one job and show it",
		Long: `Show drover working on this machine: in a throwaway directory (with a tiny
git repository, where git workspaces will come from), start 'drover hub' and
'drover runner' as separate processes, log the runner in through the real
login and approval, run one job, follow its log, show the finished job, then
stop both processes and remove the directory (unless --keep). Needs git.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.demo(cmd.Context(), keep) },
	}
	cmd.Flags().BoolVar(&keep, "keep", false, "keep the throwaway directory (data, runner home, logs)")
	return cmd
}

func (a *app) demo(ctx context.Context, keep bool) (err error) {
	ctx, stop := a.signalContext(ctx)
	defer stop()
	ctx, cancel := context.WithTimeoutCause(ctx, demoTimeout, fmt.Errorf("the demo took longer than %s", demoTimeout))
	defer cancel()
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)

	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the drover binary: %w", err)
	}
	git, err := exec.LookPath("git")
	if err != nil {
		return errors.New("the demo needs git; install it (apt-get install git)")
	}
	root, err := os.MkdirTemp("", "drover-demo-")
	if err != nil {
		return fmt.Errorf("make the demo directory: %w", err)
	}
	say := func(format string, args ...any) { fprintf(a.env.Stdout, "==> "+format+"\n", args...) }
	var kids []*child
	defer func() {
		// Stop in reverse order of start: the runner hands its work back
		// to a hub that is still up.
		for i := len(kids) - 1; i >= 0; i-- {
			if serr := kids[i].stop(stopGrace); serr != nil && err == nil {
				err = serr
			}
		}
		if err != nil && !errors.Is(err, context.Canceled) {
			for _, k := range kids {
				fprintf(a.env.Stderr, "--- last lines of %s ---\n", k.logPath)
				for _, line := range strings.Split(tail(k.logPath, 20), "\n") {
					fprintf(a.env.Stderr, "%s\n", line)
				}
			}
		}
		if keep {
			say("kept %s", root)
		} else if rerr := os.RemoveAll(root); rerr != nil {
			fprintf(a.env.Stderr, "drover: remove the demo directory: %v\n", rerr)
		}
	}()
	// A hub or runner that dies ends the demo at once, not at its timeout.
	watch := func(k *child) {
		go func() {
			select {
			case <-k.exited:
				fail(fmt.Errorf("the %s exited unexpectedly (%v); its log is %s", k.name, k.err, k.logPath))
			case <-ctx.Done():
			}
		}()
	}
	start := func(name string, args ...string) (*child, error) {
		k, err := startChild(exe, root, name, args...)
		if err == nil {
			kids = append(kids, k)
		}
		return k, err
	}
	cause := func(err error) error {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return err
	}

	repo, data, home := filepath.Join(root, "repo"), filepath.Join(root, "hub"), filepath.Join(root, "runner")
	if err := makeDemoRepo(ctx, git, repo); err != nil {
		return err
	}
	say("made %s with a git repository in repo/ (jobs will get workspaces from repositories like it)", root)

	say("starting the hub: drover hub --listen 127.0.0.1:0 --data %s", data)
	hubProc, err := start("hub", "hub", "--listen", "127.0.0.1:0", "--data", data)
	if err != nil {
		return err
	}
	watch(hubProc)
	line, err := hubProc.waitLine(ctx, func(l string) bool { return strings.HasPrefix(l, listeningPrefix) })
	if err != nil {
		return cause(err)
	}
	url := strings.TrimPrefix(line, listeningPrefix)
	token, err := a.readToken(filepath.Join(data, adminTokenFile))
	if err != nil {
		return err
	}
	c, err := client.New(url, token)
	if err != nil {
		return err
	}

	say("logging a runner in: drover runner login --hub %s --name demo --home %s", url, home)
	login, err := start("runner login", "runner", "login", "--hub", url, "--name", "demo", "--home", home)
	if err != nil {
		return err
	}
	var req protocol.ApproveRequest
	if _, err := login.waitLine(ctx, func(l string) bool {
		for _, f := range strings.Fields(l) {
			if r, err := parseApproveCode(f); err == nil {
				req = r
				return true
			}
		}
		return false
	}); err != nil {
		return cause(err)
	}
	say("approving it with the admin token: drover runner approve %s:%s", req.Name, req.Key)
	if _, err := c.ApproveRunner(ctx, req); err != nil {
		return cause(err)
	}
	select {
	case <-login.exited:
		if login.err != nil {
			return fmt.Errorf("runner login: %w; its log is %s", login.err, login.logPath)
		}
	case <-ctx.Done():
		return context.Cause(ctx)
	}

	say("starting the runner: drover runner --home %s", home)
	runnerProc, err := start("runner", "runner", "--home", home)
	if err != nil {
		return err
	}
	watch(runnerProc)

	args := []string{"sh", "-c", demoScript}
	say("running a job: drover run --wait --agent exec -- %s", shellQuote(args))
	v, _, err := c.Submit(ctx, protocol.SubmitRequest{Agent: "exec", Args: args})
	if err != nil {
		return cause(err)
	}
	end, err := a.follow(ctx, c, v.ID)
	if err != nil {
		return cause(err)
	}
	say("the finished job, as 'drover show %s' prints it:", v.ID)
	if err := printJob(a.env.Stdout, end, time.Now()); err != nil {
		return err
	}
	if end.State != job.Completed {
		return fmt.Errorf("the demo job ended %s", describeEnd(end))
	}
	say("stopping the runner and the hub")
	return nil
}

// makeDemoRepo makes a git repository with one commit, whatever the user's
// git identity and signing settings.
func makeDemoRepo(ctx context.Context, git, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("make the demo repository: %w", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "README.md"), []byte("A throwaway repository made by drover demo.\n"), 0o644); err != nil {
		return fmt.Errorf("make the demo repository: %w", err)
	}
	for _, args := range [][]string{
		{"-c", "init.defaultBranch=main", "init", "-q"},
		{"add", "README.md"},
		{"-c", "user.name=drover demo", "-c", "user.email=demo@drover.invalid", "-c", "commit.gpgsign=false",
			"commit", "-q", "-m", "demo commit"},
	} {
		out, err := exec.CommandContext(ctx, git, append([]string{"-C", dir}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("git %s in the demo repository: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// child is a drover process the demo started. Its stdout and stderr go to
// a log file; stdout lines are also handed over for the demo to read.
type child struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	lines   chan string   // stdout lines; closed at EOF
	exited  chan struct{} // closed once the process was waited for
	err     error         // exit error, set before exited is closed
}

func startChild(exe, dir, name string, args ...string) (*child, error) {
	logPath := filepath.Join(dir, strings.ReplaceAll(name, " ", "-")+".log")
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("start the %s: %w", name, err)
	}
	cmd := exec.Command(exe, args...)
	cmd.Stderr = lf
	// Its own process group: a Ctrl-C reaches the demo only, which then
	// stops its children in order (and not twice, which means "now").
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	out, err := cmd.StdoutPipe()
	if err != nil {
		lf.Close()
		return nil, fmt.Errorf("start the %s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, fmt.Errorf("start the %s: %w", name, err)
	}
	k := &child{name: name, cmd: cmd, logPath: logPath, lines: make(chan string, 64), exited: make(chan struct{})}
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			fmt.Fprintln(lf, sc.Text())
			select {
			case k.lines <- sc.Text():
			default: // nobody is waiting for more lines
			}
		}
		close(k.lines)
		k.err = cmd.Wait()
		lf.Close()
		close(k.exited)
	}()
	return k, nil
}

// waitLine returns the first stdout line that match accepts.
func (k *child) waitLine(ctx context.Context, match func(string) bool) (string, error) {
	for {
		select {
		case l, ok := <-k.lines:
			if !ok {
				<-k.exited
				return "", fmt.Errorf("the %s exited early (%v); its log is %s", k.name, k.err, k.logPath)
			}
			if match(l) {
				return l, nil
			}
		case <-ctx.Done():
			return "", context.Cause(ctx)
		}
	}
}

// stop asks the process to stop gracefully and kills it after grace.
func (k *child) stop(grace time.Duration) error {
	select {
	case <-k.exited:
	default:
		_ = k.cmd.Process.Signal(syscall.SIGTERM)
		t := time.NewTimer(grace)
		defer t.Stop()
		select {
		case <-k.exited:
		case <-t.C:
			_ = k.cmd.Process.Kill()
			<-k.exited
			return fmt.Errorf("the %s did not stop within %s and was killed", k.name, grace)
		}
	}
	if k.err != nil {
		return fmt.Errorf("the %s: %w", k.name, k.err)
	}
	return nil
}

// tail returns the last n lines of a file.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
