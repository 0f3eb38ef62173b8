package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
)

// drainAfterExit bounds how long output is still read once the process
// group has been killed: only a process that left the group (setsid) can
// still hold the pipe, and it must not hold the attempt open forever.
const drainAfterExit = 2 * time.Second

// Local returns the boundary that runs commands directly on the host as the
// runner's user. It isolates nothing, and Describe says so.
func Local() Boundary { return local{} }

type local struct{}

func (local) Describe() Isolation {
	return Isolation{
		Kind:       "none",
		Network:    "host",
		Filesystem: "host",
		User:       fmt.Sprintf("uid %d", os.Getuid()),
		Limits:     "none",
	}
}

func (local) Start(ctx context.Context, s Spec) (Process, error) {
	if err := s.validate(); err != nil {
		return nil, err
	}
	path, err := lookPath(s.Argv[0], s.Env, s.Dir)
	if err != nil {
		return nil, err
	}
	out := s.Output
	if out == nil {
		out = io.Discard
	}
	grace := s.Grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	// Our own pipe, passed as an *os.File, so that exec starts no copying
	// goroutine of its own and Wait returns when the leader exits even if a
	// child still holds the pipe; the group is killed before we drain it.
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("make output pipe: %w", err)
	}
	cmd := &exec.Cmd{
		Path:   path,
		Args:   s.Argv,
		Env:    append([]string{}, s.Env...), // non-nil: exec would inherit on nil
		Dir:    s.Dir,
		Stdout: pw,
		Stderr: pw,
		SysProcAttr: &syscall.SysProcAttr{
			Setpgid:   true,
			Pdeathsig: syscall.SIGKILL, // the job dies with the runner; its claim then reports it interrupted
		},
	}
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("start %s: %w", s.Argv[0], err)
	}
	pw.Close()
	p := &process{cmd: cmd, pgid: cmd.Process.Pid, grace: grace, done: make(chan struct{})}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		drain(out, pr)
	}()
	go p.supervise(ctx, s.Timeout, pr, copied)
	return p, nil
}

// drain copies r to w until EOF. A failing writer must not block the job on
// a full pipe, so reading goes on and the rest is discarded.
func drain(w io.Writer, r io.Reader) {
	buf := make([]byte, 32<<10)
	for {
		n, err := r.Read(buf)
		if n > 0 && w != nil {
			if _, werr := w.Write(buf[:n]); werr != nil {
				w = nil
			}
		}
		if err != nil {
			return
		}
	}
}

type process struct {
	cmd   *exec.Cmd
	pgid  int
	grace time.Duration
	done  chan struct{}

	mu       sync.Mutex
	exited   bool // leader reaped: signalling the group id could hit a stranger
	stopping bool
	stopped  bool
	timedOut bool
	timer    *time.Timer
	exit     Exit
	err      error
}

func (p *process) Pid() int { return p.pgid }

func (p *process) Wait() (Exit, error) {
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.exit, p.err
}

func (p *process) Stop() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited || p.stopping {
		return
	}
	p.stopping, p.stopped = true, true
	p.signalLocked(unix.SIGTERM)
	p.timer = time.AfterFunc(p.grace, p.Kill)
}

func (p *process) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited {
		return
	}
	p.stopped = true
	p.signalLocked(unix.SIGKILL)
}

func (p *process) signalLocked(sig unix.Signal) {
	_ = unix.Kill(-p.pgid, sig) // ESRCH: the group is already gone
}

func (p *process) supervise(ctx context.Context, timeout time.Duration, pr *os.File, copied <-chan struct{}) {
	defer close(p.done)
	waited := make(chan error, 1)
	go func() { waited <- p.cmd.Wait() }()
	var expired <-chan time.Time
	if timeout > 0 {
		t := time.NewTimer(timeout)
		defer t.Stop()
		expired = t.C
	}
	cancelled := ctx.Done()
	var werr error
wait:
	for {
		select {
		case werr = <-waited:
			break wait
		case <-cancelled:
			cancelled = nil
			if errors.Is(context.Cause(ctx), ErrKill) {
				p.Kill()
			} else {
				p.Stop()
			}
		case <-expired:
			expired = nil
			p.mu.Lock()
			p.timedOut = true
			p.mu.Unlock()
			p.Stop()
		}
	}

	// The leader is gone: kill what is left of its group so nothing
	// outlives the attempt, then collect the last output.
	p.mu.Lock()
	p.signalLocked(unix.SIGKILL)
	p.exited = true
	if p.timer != nil {
		p.timer.Stop()
	}
	p.mu.Unlock()
	select {
	case <-copied:
	case <-time.After(drainAfterExit):
		pr.Close() // unblocks the reader
		<-copied
	}
	pr.Close()

	p.mu.Lock()
	defer p.mu.Unlock()
	p.exit = Exit{Code: -1, TimedOut: p.timedOut, Stopped: p.stopped}
	var ee *exec.ExitError
	if werr != nil && !errors.As(werr, &ee) {
		p.err = fmt.Errorf("wait for process %d: %w", p.pgid, werr)
		return
	}
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ok && ws.Signaled():
		p.exit.Code = 128 + int(ws.Signal())
		p.exit.Signal = unix.SignalName(ws.Signal())
	default:
		p.exit.Code = p.cmd.ProcessState.ExitCode()
	}
}
