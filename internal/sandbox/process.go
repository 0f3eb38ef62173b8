package sandbox

import (
	"bytes"
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
// tree has been killed: only a process that escaped the tree can still hold
// the pipe, and it must not hold the attempt open forever.
const drainAfterExit = 2 * time.Second

// tree is how a boundary reaches every process it started for one command.
type tree interface {
	// signal sends sig to every process of the tree (Stop's SIGTERM).
	signal(sig unix.Signal)
	// kill sends SIGKILL to every process of the tree now.
	kill()
	// release runs once the leader has been reaped: nothing of the tree
	// may survive it, and what the tree held (cgroups, sockets, the proxy)
	// is freed.
	release()
}

// groupTree is a process group: the local boundary's tree.
type groupTree struct{ pgid int }

func (g groupTree) signal(sig unix.Signal) { _ = unix.Kill(-g.pgid, sig) } // ESRCH: already gone
func (g groupTree) kill()                  { g.signal(unix.SIGKILL) }
func (g groupTree) release()               { g.kill() }

// launch is one command a boundary has prepared.
type launch struct {
	cmd     *exec.Cmd
	timeout time.Duration
	grace   time.Duration
	out     io.Writer // already capped
	// wrapped: the leader is a wrapper (bwrap, a container engine) that
	// exits with 128+n when the command was killed by signal n.
	wrapped bool
	// setup runs after the leader started and before its output is read:
	// it returns the tree (nil: the leader's process group). On error the
	// leader is killed and Start fails with the error and what the leader
	// printed.
	setup func(pid int) (tree, error)
}

// start starts l.cmd with its combined output on a pipe and supervises it.
func start(ctx context.Context, l launch) (Process, error) {
	// Our own pipe, passed as an *os.File, so that exec starts no copying
	// goroutine of its own and Wait returns when the leader exits even if a
	// child still holds the pipe; the tree is killed before we drain it.
	pr, pw, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("make output pipe: %w", err)
	}
	cmd := l.cmd
	cmd.Stdout, cmd.Stderr = pw, pw
	if cmd.Env == nil {
		cmd.Env = []string{} // non-nil: exec would inherit on nil
	}
	if cmd.SysProcAttr == nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{}
	}
	cmd.SysProcAttr.Setpgid = true
	cmd.SysProcAttr.Pdeathsig = syscall.SIGKILL // the job dies with the runner; its claim then reports it interrupted
	if err := cmd.Start(); err != nil {
		pr.Close()
		pw.Close()
		return nil, fmt.Errorf("start %s: %w", cmd.Args[0], err)
	}
	pw.Close()
	var t tree = groupTree{cmd.Process.Pid}
	if l.setup != nil {
		st, err := l.setup(cmd.Process.Pid)
		if err != nil {
			t.kill()
			if st != nil {
				st.release()
			}
			said := readSome(pr, 2048)
			pr.Close()
			_ = cmd.Wait()
			if said != "" {
				err = fmt.Errorf("%w: %s", err, said)
			}
			return nil, err
		}
		if st != nil {
			t = st
		}
	}
	grace := l.grace
	if grace <= 0 {
		grace = DefaultGrace
	}
	p := &process{cmd: cmd, tree: t, grace: grace, wrapped: l.wrapped, done: make(chan struct{})}
	copied := make(chan struct{})
	go func() {
		defer close(copied)
		drain(l.out, pr)
	}()
	go p.supervise(ctx, l.timeout, pr, copied)
	return p, nil
}

// readSome reads what is already in r, up to n bytes, without waiting for
// a writer that is still alive.
func readSome(r *os.File, n int) string {
	_ = r.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	b := make([]byte, n)
	k, _ := io.ReadFull(r, b)
	return string(bytes.TrimSpace(b[:k]))
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
	cmd     *exec.Cmd
	tree    tree
	grace   time.Duration
	wrapped bool
	done    chan struct{}

	mu       sync.Mutex
	exited   bool // leader reaped and tree released: signalling could hit a stranger
	stopping bool
	stopped  bool
	timedOut bool
	timer    *time.Timer
	exit     Exit
	err      error
}

func (p *process) Pid() int { return p.cmd.Process.Pid }

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
	p.tree.signal(unix.SIGTERM)
	p.timer = time.AfterFunc(p.grace, p.Kill)
}

func (p *process) Kill() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.exited {
		return
	}
	p.stopped = true
	p.tree.kill()
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

	// The leader is gone: end what is left of its tree so nothing outlives
	// the attempt, then collect the last output.
	p.mu.Lock()
	if p.timer != nil {
		p.timer.Stop()
	}
	p.tree.release()
	p.exited = true
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
		p.err = fmt.Errorf("wait for process %d: %w", p.cmd.Process.Pid, werr)
		return
	}
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	switch {
	case ok && ws.Signaled():
		p.exit.Code = 128 + int(ws.Signal())
		p.exit.Signal = unix.SignalName(ws.Signal())
	default:
		p.exit.Code = p.cmd.ProcessState.ExitCode()
		// A wrapper reports a command killed by signal n as 128+n, the
		// shell's convention; a command that exits 128+n itself looks
		// the same.
		if p.wrapped && p.exit.Code > 128 && p.exit.Code <= 128+64 {
			p.exit.Signal = unix.SignalName(syscall.Signal(p.exit.Code - 128))
		}
	}
}

// capWriter passes at most limit bytes to w, the truncation marker
// included, and discards the rest so that the job never blocks on it. It is
// safe for concurrent use: the egress proxy writes its evidence lines into
// the same stream.
type capWriter struct {
	mu      sync.Mutex
	w       io.Writer
	limit   int64 // 0: none
	n       int64
	capped  bool
	failed  bool
	discard int64
}

func newCapWriter(w io.Writer, limit int64) *capWriter {
	if w == nil {
		w = io.Discard
	}
	return &capWriter{w: w, limit: limit}
}

func truncationMarker(limit int64) []byte {
	return fmt.Appendf(nil, "\n[drover: output truncated: the sandbox keeps %d bytes of output]\n", limit)
}

func (c *capWriter) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.capped || c.failed {
		c.discard += int64(len(b))
		return len(b), nil
	}
	keep := b
	var marker []byte
	if c.limit > 0 {
		marker = truncationMarker(c.limit)
		room := c.limit - int64(len(marker)) - c.n
		if int64(len(b)) > room {
			keep = b[:max(room, 0)]
			c.capped = true
			c.discard += int64(len(b) - len(keep))
		} else {
			marker = nil
		}
	}
	if c.capped && int64(len(marker)) > c.limit {
		marker = marker[:c.limit]
	}
	if _, err := c.w.Write(append(keep[:len(keep):len(keep)], marker...)); err != nil {
		c.failed = true // the rest is discarded: a broken writer must not stop the job
	}
	c.n += int64(len(keep) + len(marker))
	return len(b), nil
}
