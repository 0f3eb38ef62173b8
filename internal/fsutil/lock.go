package fsutil

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"drover/internal/retry"
)

// Locker serializes work on one lock file: first an in-process queue (one
// token per path, so waiting goroutines honour their context), then an
// flock, so that another process sharing the directory (a second runner on
// one home, a second hub on one data directory, also over NFS, where Linux
// maps flock to a POSIX lock the server holds) waits too. flock is released
// by the kernel when a process dies, so a crash never leaves a path locked.
// The zero value is ready to use.
type Locker struct {
	Off bool // tests only: no locking at all, to show what the locks prevent
	// Transient removes each lock file at release, for locks named by
	// something unbounded (a job): taking a lock then checks that the file
	// locked is still the one at the path, since a waiter may have opened
	// it just before its holder removed it.
	Transient bool

	mu     sync.Mutex
	queues map[string]chan struct{}
}

func (l *Locker) queue(path string) chan struct{} {
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

// Lock waits for the lock at path and returns its release.
func (l *Locker) Lock(ctx context.Context, path string) (func(), error) {
	if l.Off {
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
	return l.release(path, f, q), nil
}

// TryLock takes the lock at path if nobody holds it; ok is false otherwise.
// It marks something as in use by a live holder (a worktree by its attempt,
// a hub's scratch directory by its hub).
func (l *Locker) TryLock(path string) (unlock func(), ok bool, err error) {
	if l.Off {
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
	return l.release(path, f, q), true, nil
}

func (l *Locker) release(path string, f *os.File, q chan struct{}) func() {
	return func() {
		if l.Transient {
			os.Remove(path) // while still held: see Transient
		}
		f.Close()
		<-q
	}
}

func flockTry(path string) (*os.File, bool, error) {
	for {
		f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
		if err != nil {
			return nil, false, fmt.Errorf("open lock %s: %w", path, err)
		}
		switch err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); {
		case errors.Is(err, unix.EWOULDBLOCK):
			f.Close()
			return nil, false, nil
		case err != nil:
			f.Close()
			return nil, false, fmt.Errorf("flock %s: %w", path, err)
		}
		same, err := samePath(f, path)
		if err != nil || same {
			if err != nil {
				f.Close()
				f = nil
			}
			return f, same, err
		}
		f.Close() // its holder removed it before we locked it: lock the new one
	}
}

// samePath reports whether f is still the file at path.
func samePath(f *os.File, path string) (bool, error) {
	held, err := f.Stat()
	if err != nil {
		return false, fmt.Errorf("check lock %s: %w", path, err)
	}
	now, err := os.Stat(path)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check lock %s: %w", path, err)
	}
	return os.SameFile(held, now), nil
}

// flockWait polls rather than blocking in flock(2), which could not be
// interrupted by ctx. Only another process (or another Locker) makes it
// wait: within one Locker the queue already serializes.
func flockWait(ctx context.Context, path string) (*os.File, error) {
	pol := retry.Policy{First: time.Millisecond, Max: 50 * time.Millisecond}
	for n := 0; ; n++ {
		f, ok, err := flockTry(path)
		if err != nil || ok {
			return f, err
		}
		if retry.Sleep(ctx, pol.Delay(n)) != nil {
			return nil, fmt.Errorf("wait for lock %s: %w", path, context.Cause(ctx))
		}
	}
}
