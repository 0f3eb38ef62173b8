package workspace

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Kinds of operation on a runner clone, each with its own lock file
// (HOME/repos/PROJECT.KIND.lock), so that a fetch does not wait for a
// worktree registration and vice versa.
const (
	lockClone = "clone" // create, fetch, write objects and refs, sanitize config
	lockTrees = "trees" // the worktree registry: add, remove, prune, records and the pool
)

// locker serializes operations on one lock file: first an in-process queue
// (one token per path, so waiting goroutines honour their context), then an
// flock, so that another process sharing the home waits too. flock is
// released by the kernel when a process dies, so a crash never leaves a
// repository locked.
type locker struct {
	off bool // tests only: no locking at all, to show what the locks prevent

	mu     sync.Mutex
	queues map[string]chan struct{}
}

func (l *locker) queue(path string) chan struct{} {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.queues == nil {
		l.queues = map[string]chan struct{}{}
	}
	q, ok := l.queues[path]
	if !ok {
		q = make(chan struct{}, 1)
		l.queues[path] = q
	}
	return q
}

// lock waits for the lock at path and returns its release.
func (l *locker) lock(ctx context.Context, path string) (func(), error) {
	if l.off {
		return func() {}, nil
	}
	q := l.queue(path)
	select {
	case q <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("wait for lock %s: %w", path, context.Cause(ctx))
	}
	f, err := flockWait(ctx, path)
	if err != nil {
		<-q
		return nil, err
	}
	return func() { f.Close(); <-q }, nil
}

// tryLock takes the lock at path if nobody holds it; ok is false otherwise.
// It marks a worktree as in use by a live attempt.
func (l *locker) tryLock(path string) (unlock func(), ok bool, err error) {
	if l.off {
		return func() {}, true, nil
	}
	q := l.queue(path)
	select {
	case q <- struct{}{}:
	default:
		return nil, false, nil
	}
	f, ok, err := flockTry(path)
	if err != nil || !ok {
		<-q
		return nil, ok, err
	}
	return func() { f.Close(); <-q }, true, nil
}

func flockTry(path string) (*os.File, bool, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, false, fmt.Errorf("open lock %s: %w", path, err)
	}
	switch err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); {
	case err == nil:
		return f, true, nil
	case errors.Is(err, unix.EWOULDBLOCK):
		f.Close()
		return nil, false, nil
	default:
		f.Close()
		return nil, false, fmt.Errorf("flock %s: %w", path, err)
	}
}

// flockWait polls rather than blocking in flock(2), which could not be
// interrupted by ctx. Only another process makes it wait: within this
// process the queue already serializes.
func flockWait(ctx context.Context, path string) (*os.File, error) {
	wait := time.Millisecond
	for {
		f, ok, err := flockTry(path)
		if err != nil || ok {
			return f, err
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
			return nil, fmt.Errorf("wait for lock %s: %w", path, context.Cause(ctx))
		}
		wait = min(2*wait, 50*time.Millisecond)
	}
}
