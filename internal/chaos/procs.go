package chaos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"drover/internal/childproc"
	"drover/internal/client"
)

// proc is one child process (the hub or a runner) of the campaign's drover
// binary, with its output appended to a file.
type proc struct {
	name    string
	cmd     *exec.Cmd
	exited  chan struct{}
	waitErr error // set before exited closes
}

func startProc(name, bin, logPath string, env []string, args ...string) (*proc, error) {
	lf, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open the log of %s: %w", name, err)
	}
	defer lf.Close() // the child holds its own descriptor
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = lf, lf
	cmd.Env = env
	// Its own process group, so that a terminal's ^C reaches only the
	// campaign, which then stops its children itself.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, exited: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		close(p.exited)
	}()
	return p, nil
}

func (p *proc) alive() bool {
	select {
	case <-p.exited:
		return false
	default:
		return true
	}
}

// signal sends sig to a process still running.
func (p *proc) signal(sig syscall.Signal) {
	if p.alive() {
		_ = p.cmd.Process.Signal(sig)
	}
}

// kill SIGKILLs the process and waits for it. Only the process: a runner's
// agents die with it (Pdeathsig), as on a real crash.
func (p *proc) kill() {
	if p.alive() {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
	}
	<-p.exited
}

// terminate sends SIGTERM and waits up to grace for the exit; it kills the
// process after that and reports whether it had to.
func (p *proc) terminate(grace time.Duration) (killed bool) {
	if !p.alive() {
		return false
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.exited:
		return false
	case <-time.After(grace):
		p.kill()
		return true
	}
}

// hubProc is the campaign's hub: one address and data directory across
// restarts.
type hubProc struct {
	bin, name, dir, addr string
	db                   string   // a Postgres URL (with its password, for the checker), or "" for SQLite in dir
	env                  []string // added to the hub's environment: PGPASSWORD, kept out of args
	args                 []string
	p                    *proc
	admin                string
}

func (h *hubProc) url() string { return "http://" + h.addr }

func (h *hubProc) logPath() string { return filepath.Join(h.dir, "..", h.name+".log") }

// start runs `drover hub` and waits until it answers with the admin token.
// A hub that does not answer is stopped: the campaign may not know it yet
// (its setup fails before the hub is listed), and a stray hub would go on
// writing to a database that is gone.
func (h *hubProc) start(ctx context.Context) (err error) {
	args := append([]string{"hub", "--listen", h.addr, "--data", h.dir}, h.args...)
	p, err := startProc("hub", h.bin, h.logPath(), append(childproc.Env(filepath.Join(h.dir, "..", h.name+"-home")), h.env...), args...)
	if err != nil {
		return err
	}
	h.p = p
	defer func() {
		if err != nil {
			p.terminate(10 * time.Second)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	for {
		if h.admin == "" {
			if b, err := os.ReadFile(filepath.Join(h.dir, "admin.token")); err == nil {
				h.admin = strings.TrimSpace(string(b))
			}
		}
		if h.admin != "" {
			c, err := client.New(h.url(), h.admin, client.WithTimeout(2*time.Second))
			if err != nil {
				return fmt.Errorf("hub client: %w", err)
			}
			if _, err := c.Whoami(ctx); err == nil {
				return nil
			}
		}
		select {
		case <-p.exited:
			return fmt.Errorf("hub exited at start (%v); see %s", p.waitErr, h.logPath())
		case <-ctx.Done():
			return fmt.Errorf("hub did not answer within a minute: %w; see %s", ctx.Err(), h.logPath())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// runnerProc is one `drover runner` with its own home, restarted in place.
type runnerProc struct {
	name, home, bin, hubURL string
	slots                   int
	p                       *proc
	faulted                 bool // a kill, term or pause has it (under campaign.mu)
}

func (r *runnerProc) start() error {
	p, err := startProc("runner "+r.name, r.bin, filepath.Join(r.home, "..", r.name+".log"), childproc.Env(filepath.Join(r.home, "..", r.name+"-home")),
		"runner", "--home", r.home, "--hub", r.hubURL, "--slots", fmt.Sprint(r.slots),
		"--min-free", fmt.Sprint(runnerFloor))
	if err != nil {
		return err
	}
	r.p = p
	return nil
}

func (r *runnerProc) alive() bool { return r.p != nil && r.p.alive() }
