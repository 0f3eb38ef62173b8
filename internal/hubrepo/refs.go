package hubrepo

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os/exec"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"drover/internal/gitcmd"
)

// RefSessions keeps, per repository, one `git update-ref --stdin` process
// that moves refs one transaction at a time. Every submission pins its
// job's base and every publication moves a ref; a git process started for
// each cost about 44 ms on a loaded 2-core machine, most of a submission's
// time, where a transaction on a running process costs well under one.
// A transaction is the same compare-and-swap as `git update-ref NEW OLD`,
// under git's own ref locks, so several hubs sharing the repositories
// stay safe. Idle processes end after Idle; at most Max run.
type RefSessions struct {
	Git  gitcmd.Git
	Idle time.Duration // 0: 30 s
	Max  int           // 0: 32; beyond it a call runs a process of its own

	mu     sync.Mutex
	open   map[string]*refSession // by repository directory
	closed bool
}

type refSession struct {
	mu     sync.Mutex // one transaction at a time
	cmd    *exec.Cmd
	kill   context.CancelFunc
	in     io.WriteCloser
	out    *bufio.Reader
	stderr bytes.Buffer
	idle   *time.Timer
	dead   atomic.Bool // set under mu; read without it
}

// errSessionGone is a session that ended before the transaction was sent:
// nothing was done, so the caller may try again on a new one.
var errSessionGone = errors.New("ref session ended")

// Update moves ref in the repository at dir from oldID (gitcmd.ZeroID: it
// must not exist) to newID ("" deletes it), atomically. ok is false when
// no session could take it (closed, or too many open): the caller runs a
// process of its own.
func (rs *RefSessions) Update(ctx context.Context, dir, ref, newID, oldID string) (ok bool, err error) {
	if strings.ContainsRune(ref, 0) || strings.ContainsRune(newID, 0) || strings.ContainsRune(oldID, 0) {
		return true, fmt.Errorf("update ref %q: a NUL in a ref or id", ref)
	}
	for range 2 {
		s, err := rs.session(dir)
		if s == nil || err != nil {
			return s != nil, err
		}
		err = s.transact(ctx, ref, newID, oldID)
		if !errors.Is(err, errSessionGone) {
			rs.touch(dir, s)
			return true, err
		}
	}
	return false, nil
}

// session is the running session of dir, started if there is none.
func (rs *RefSessions) session(dir string) (*refSession, error) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.closed {
		return nil, nil
	}
	if s := rs.open[dir]; s != nil && !s.dead.Load() {
		return s, nil
	}
	delete(rs.open, dir)
	max := rs.Max
	if max == 0 {
		max = 32
	}
	if len(rs.open) >= max {
		return nil, nil
	}
	ctx, kill := context.WithCancel(context.Background())
	s := &refSession{kill: kill}
	// --stdin transactions (start … commit) on one process; -z so that no
	// byte of a ref name can start another command.
	s.cmd = rs.Git.Command(ctx, gitcmd.Cmd{Dir: dir, Args: []string{"update-ref", "-m", "drover", "-z", "--stdin"}})
	s.cmd.Stderr = gitcmd.LimitedWriter(&s.stderr)
	var err error
	if s.in, err = s.cmd.StdinPipe(); err != nil {
		kill()
		return nil, fmt.Errorf("start git update-ref in %s: %w", dir, err)
	}
	stdout, err := s.cmd.StdoutPipe()
	if err != nil {
		kill()
		return nil, fmt.Errorf("start git update-ref in %s: %w", dir, err)
	}
	s.out = bufio.NewReader(stdout)
	if err := s.cmd.Start(); err != nil {
		kill()
		return nil, fmt.Errorf("start git update-ref in %s: %w", dir, err)
	}
	if rs.open == nil {
		rs.open = map[string]*refSession{}
	}
	rs.open[dir] = s
	return s, nil
}

// touch restarts the idle clock of dir's session s, or forgets s if it
// ended.
func (rs *RefSessions) touch(dir string, s *refSession) {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	if rs.open[dir] != s {
		return
	}
	if s.dead.Load() {
		delete(rs.open, dir)
		return
	}
	idle := rs.Idle
	if idle == 0 {
		idle = 30 * time.Second
	}
	if s.idle != nil {
		s.idle.Reset(idle)
		return
	}
	s.idle = time.AfterFunc(idle, func() { rs.retire(dir, s) })
}

// retire ends dir's session s (if still open).
func (rs *RefSessions) retire(dir string, s *refSession) {
	rs.mu.Lock()
	if rs.open[dir] == s {
		delete(rs.open, dir)
	}
	rs.mu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.end()
}

// Close ends every session; later updates run processes of their own.
func (rs *RefSessions) Close() {
	rs.mu.Lock()
	rs.closed = true
	open := rs.open
	rs.open = nil
	rs.mu.Unlock()
	for _, s := range open {
		s.mu.Lock()
		s.end()
		s.mu.Unlock()
	}
}

// transact runs one transaction. Any failure ends the session: git dies
// on a refused update (the ref moved), and a session in an unknown state
// is not reused. Called without s.mu.
func (s *refSession) transact(ctx context.Context, ref, newID, oldID string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.dead.Load() {
		return errSessionGone
	}
	var cmd string
	if newID == "" {
		cmd = "delete " + ref + "\x00" + oldID + "\x00"
	} else {
		cmd = "update " + ref + "\x00" + newID + "\x00" + oldID + "\x00"
	}
	// A caller that gives up kills the session: the read below then ends.
	stop := context.AfterFunc(ctx, s.kill)
	defer stop()
	if _, err := io.WriteString(s.in, "start\x00"+cmd+"commit\x00"); err != nil {
		s.end()
		return errSessionGone
	}
	for _, want := range []string{"start: ok\n", "commit: ok\n"} {
		line, err := s.out.ReadString('\n')
		if err == nil && line == want {
			continue
		}
		werr := s.end()
		if ctx.Err() != nil {
			return fmt.Errorf("update %s: %w", ref, ctx.Err())
		}
		args := []string{"update-ref", ref, newID, oldID}
		if werr == nil {
			return fmt.Errorf("update %s: git update-ref answered %q", ref, line)
		}
		return gitcmd.ExitError(args, werr, s.stderr.String())
	}
	return nil
}

// end stops the process and waits for it; it returns how it exited.
// Called with s.mu held.
func (s *refSession) end() error {
	if s.dead.Load() {
		return nil
	}
	s.dead.Store(true)
	if s.idle != nil {
		s.idle.Stop()
	}
	s.in.Close() // git ends on end of input; an open transaction is aborted
	err := s.cmd.Wait()
	s.kill()
	return err
}
