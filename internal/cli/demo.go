//go:build !drover_runner

package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"drover/internal/agent/facts"
	"drover/internal/sandbox"
)

const (
	demoTimeout = 3 * time.Minute
	stopGrace   = 45 * time.Second // a runner's graceful stop waits up to 30s for the hub's acks
)

// demoOptions are the flags of `drover demo`.
type demoOptions struct {
	keep        bool
	agent       string
	sandbox     string
	installDeps bool
	timeout     time.Duration
}

func (a *app) demoCmd() *cobra.Command {
	var o demoOptions
	cmd := &cobra.Command{
		Use:   "demo [--agent AGENT] [--sandbox bwrap|none] [--install-deps] [--keep] [--timeout D]",
		Short: "Start a hub and a runner and show what drover does, step by step",
		Long: `Show drover working on this machine, in a throwaway directory: start
'drover hub' and 'drover runner' as separate processes (the runner logged in
through the real login and approval), make a small git repository with a
failing test, and then, printing each command as you would type it:

  1. run a fix-mode job on it whose agent edits a file in the sandbox and runs
     the test, following its log live;
  2. show the change it published (drover diff), fetch it as a branch
     (drover fetch) and show that branch's git log;
  3. run a job whose agent asks a question through drover's tools, list it
     (drover questions), answer it (drover answer), and follow the job as it
     resumes and delivers;
  4. run a pipeline, the review-loop example (exec steps, whatever --agent):
     a builder and an adversary that approves in round 2 (drover pipeline
     run --wait), show it (drover pipeline show), and run it again to see
     every step replayed at no cost.

Then stop both processes and remove the directory (unless --keep). Needs git,
and bubblewrap for the sandbox (apt-get install bubblewrap; --install-deps
installs it when run as root).

The agent is exec (a shell script, no model key needed) unless --agent names
a vendor agent: claude, codex, opencode or gemini run the same story from
prompts, under an API-key account the demo's runner gets from
$ANTHROPIC_API_KEY (claude), $OPENAI_API_KEY (codex, opencode) or
$GEMINI_API_KEY (gemini), passed on stdin, never as an argument.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error { return a.demo(cmd.Context(), o) },
	}
	f := cmd.Flags()
	f.BoolVar(&o.keep, "keep", false, "keep the throwaway directory (data, runner home, logs)")
	f.StringVar(&o.agent, "agent", "exec", "the agent of the story: exec, claude, codex, opencode or gemini")
	f.StringVar(&o.sandbox, "sandbox", sandbox.KindBwrap,
		"where the runner runs jobs: bwrap (isolated, the default) or none (UNISOLATED: no namespaces, "+
			"no read-only system, no network cut-off; the job can do all you can)")
	f.BoolVar(&o.installDeps, "install-deps", false, "as root, install what the demo lacks (bubblewrap) with apt-get")
	f.DurationVar(&o.timeout, "timeout", demoTimeout, "how long the whole demo may take (a busy or slow machine needs more)")
	return cmd
}

// demoKeyEnv is where the demo finds an API key for a vendor agent.
func demoKeyEnv(name string) string {
	return facts.Of(name).KeyVar
}

// check refuses what the demo cannot do, before anything starts.
func (o demoOptions) check(getenv func(string) string) error {
	switch {
	case o.agent == "exec":
	case o.agent == "native":
		return usagef("--agent native: the demo brings no model server for drover's own agent; add a native account to a runner (drover runner account add --agent native --help) or try --agent exec, claude, codex, opencode or gemini")
	case demoKeyEnv(o.agent) != "":
		if strings.TrimSpace(getenv(demoKeyEnv(o.agent))) == "" {
			return fmt.Errorf("--agent %s needs an API key in $%s: the demo gives it to its runner's account on stdin", o.agent, demoKeyEnv(o.agent))
		}
		if _, err := exec.LookPath(o.agent); err != nil {
			return fmt.Errorf("--agent %s needs the %s CLI on PATH: npm install -g %s", o.agent, o.agent, agentPackage(o.agent))
		}
	default:
		return usagef("--agent %q: want exec, claude, codex, opencode or gemini", o.agent)
	}
	if o.sandbox != sandbox.KindBwrap && o.sandbox != sandbox.KindNone {
		return usagef("--sandbox %q: the demo runs with bwrap or none", o.sandbox)
	}
	if o.timeout <= 0 {
		return usagef("--timeout %s: want a positive duration", o.timeout)
	}
	return nil
}

// checkSandbox makes sure the chosen sandbox works, installing bubblewrap
// when asked to and able to, and says how to fix it otherwise.
func (a *app) checkSandbox(ctx context.Context, o demoOptions) error {
	if o.sandbox == sandbox.KindNone {
		fprintf(a.env.Stderr, "drover: --sandbox none: the demo's jobs run UNISOLATED, as you, with your files and network in reach\n")
		return nil
	}
	problem := bwrapProblem(ctx)
	if problem == "" {
		return nil
	}
	if _, err := exec.LookPath("bwrap"); err != nil && o.installDeps {
		if os.Geteuid() != 0 {
			return errors.New("--install-deps installs bubblewrap only when run as root: sudo apt-get install bubblewrap")
		}
		if _, err := exec.LookPath("apt-get"); err != nil {
			return errors.New("--install-deps needs apt-get; install bubblewrap with your package manager (dnf install bubblewrap)")
		}
		// A fresh machine (a container, say) may have no package lists yet.
		for _, args := range [][]string{{"update", "-qq"}, {"install", "-y", "-qq", "--no-install-recommends", "bubblewrap"}} {
			fprintf(a.env.Stdout, "==> installing bubblewrap: apt-get %s\n", strings.Join(args, " "))
			cmd := exec.CommandContext(ctx, "apt-get", args...)
			cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
			cmd.Stdout, cmd.Stderr = a.env.Stderr, a.env.Stderr
			if err := cmd.Run(); err != nil {
				return fmt.Errorf("install bubblewrap: apt-get %s: %w", args[0], err)
			}
		}
		if problem = bwrapProblem(ctx); problem == "" {
			return nil
		}
	}
	return fmt.Errorf("the demo's runner sandboxes jobs with bubblewrap, which does not work here: %s\n"+
		"install it with: apt-get install bubblewrap (as root; or drover demo --install-deps as root)\n"+
		"or run drover demo --sandbox none to run the jobs unisolated", problem)
}

// bwrapProblem says why bubblewrap does not work here ("" when it does).
func bwrapProblem(ctx context.Context) string {
	for _, c := range sandbox.Doctor(ctx) {
		if c.Kind == sandbox.KindBwrap && !c.OK {
			return strings.TrimSuffix(c.Detail, ".")
		}
	}
	return ""
}

func (a *app) demo(ctx context.Context, o demoOptions) (err error) {
	if err := o.check(a.env.Getenv); err != nil {
		return err
	}
	ctx, stop := a.interruptContext(ctx)
	defer stop()
	ctx, cancel := context.WithTimeoutCause(ctx, o.timeout, fmt.Errorf("the demo took longer than %s (--timeout)", o.timeout))
	defer cancel()
	ctx, fail := context.WithCancelCause(ctx)
	defer fail(nil)

	git, err := exec.LookPath("git")
	if err != nil {
		return errors.New("the demo needs git; install it (apt-get install git)")
	}
	if err := a.checkSandbox(ctx, o); err != nil {
		return err
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("find the drover binary: %w", err)
	}
	root, err := os.MkdirTemp("", "drover-demo-")
	if err != nil {
		return fmt.Errorf("make the demo directory: %w", err)
	}
	d := &demoRun{a: a, git: git, root: root, repo: filepath.Join(root, "repo"), agent: o.agent, box: o.sandbox}
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
		if o.keep {
			d.say("kept %s", root)
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

	data, home := filepath.Join(root, "hub"), filepath.Join(root, "runner")
	d.say("a hub and a runner, as separate processes, in %s", root)
	d.typed("drover hub --listen 127.0.0.1:0 --data %s", data)
	hubProc, err := start("hub", "hub", "--listen", "127.0.0.1:0", "--data", data)
	if err != nil {
		return err
	}
	watch(hubProc)
	line, err := hubProc.waitLine(ctx, func(l string) bool { return strings.HasPrefix(l, listeningPrefix) })
	if err != nil {
		return cause(err)
	}
	d.hub = strings.TrimPrefix(line, listeningPrefix)
	if d.token, err = a.readToken(filepath.Join(data, adminTokenFile)); err != nil {
		return err
	}

	d.typed("drover runner login --hub %s --name demo --home %s", d.hub, home)
	login, err := start("runner login", "runner", "login", "--hub", d.hub, "--name", "demo", "--home", home)
	if err != nil {
		return err
	}
	var code string
	if _, err := login.waitLine(ctx, func(l string) bool {
		for _, f := range strings.Fields(l) {
			if _, err := parseApproveCode(f); err == nil {
				code = strings.Trim(f, `'"`)
				return true
			}
		}
		return false
	}); err != nil {
		return cause(err)
	}
	d.note("the commands below reach this hub through DROVER_HUB=%s and DROVER_TOKEN (the admin token", d.hub)
	d.note("in %s); on your machine, 'drover login' once, then type what follows the $", filepath.Join(data, adminTokenFile))
	if err := d.drover(ctx, "runner", "approve", code); err != nil {
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
	if o.agent != "exec" {
		if err := d.addAccount(ctx, exe, home); err != nil {
			return cause(err)
		}
	}
	runArgs := []string{"runner", "--home", home, "--sandbox", o.sandbox}
	d.typed("drover %s", strings.Join(runArgs, " "))
	runnerProc, err := start("runner", runArgs...)
	if err != nil {
		return err
	}
	watch(runnerProc)
	if err := d.story(ctx); err != nil {
		return cause(err)
	}
	d.say("that was drover: stopping the runner and the hub")
	return nil
}

// addAccount gives the demo's runner an API-key account for a vendor
// agent, the key on stdin.
func (d *demoRun) addAccount(ctx context.Context, exe, home string) error {
	env := demoKeyEnv(d.agent)
	d.typed("printenv %s | drover runner account add --agent %s --api-key-stdin --home %s", env, d.agent, home)
	cmd := exec.CommandContext(ctx, exe, "runner", "account", "add", "--agent", d.agent, "--api-key-stdin", "--home", home)
	cmd.Stdin = strings.NewReader(strings.TrimSpace(d.a.env.Getenv(env)) + "\n")
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("add a %s account to the demo's runner: %w: %s", d.agent, err, strings.TrimSpace(string(out)))
	}
	return nil
}

// makeDemoRepo makes the demo's git repository with one commit on main,
// whatever the user's git identity and signing settings.
func makeDemoRepo(ctx context.Context, git, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("make the demo repository: %w", err)
	}
	for _, f := range demoFiles {
		if err := os.WriteFile(filepath.Join(dir, f[0]), []byte(f[1]), 0o755); err != nil {
			return fmt.Errorf("make the demo repository: %w", err)
		}
	}
	return demoGitQuiet(ctx, git, dir, []string{"-c", "init.defaultBranch=main", "init", "-q"}, []string{"add", "."},
		demoCommit("greet the world (with a typo)"))
}

// demoCommit is the git arguments of a commit in the demo's repository,
// whatever the user's git identity and signing settings.
func demoCommit(msg string) []string {
	return []string{"-c", "user.name=drover demo", "-c", "user.email=demo@drover.invalid", "-c", "commit.gpgsign=false",
		"commit", "-q", "-m", msg}
}

// demoGitQuiet runs git commands in the demo's repository, one after the
// other, showing their output only when one fails.
func demoGitQuiet(ctx context.Context, git, dir string, cmds ...[]string) error {
	for _, args := range cmds {
		out, err := exec.CommandContext(ctx, git, append([]string{"-C", dir}, args...)...).CombinedOutput()
		if err != nil {
			return fmt.Errorf("git %s in the demo repository: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
		}
	}
	return nil
}

// demoGit runs git in the demo's repository, showing its output. Like
// makeDemoRepo, it is git on the demo's own files, not a job's command.
func demoGit(ctx context.Context, git, dir string, stdout, stderr io.Writer, args ...string) error {
	cmd := exec.CommandContext(ctx, git, append([]string{"-C", dir, "-c", "color.ui=never"}, args...)...)
	cmd.Stdout, cmd.Stderr = stdout, stderr
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("git %s: %w", strings.Join(args, " "), err)
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
