package web

import (
	"context"
	"sync"
)

// tailKeep bounds the bytes a followed log keeps in memory; a follower
// further behind reads the store itself until it catches up.
const tailKeep = 1 << 20

// tails are the live logs being followed: one reader of the store per
// followed attempt's log, however many browsers follow it. Each follower
// was let in by the Backend as itself when it joined, and is checked again
// at every keep-alive (its session and its access to the job).
type tails struct {
	b  Backend
	mu sync.Mutex
	m  map[tailKey]*tail
}

type tailKey struct {
	job     string
	attempt int64
}

// tail is the end of one attempt's log as its reader last read it.
type tail struct {
	key    tailKey
	cancel context.CancelFunc
	users  int // guarded by tails.mu

	mu       sync.Mutex
	base     int64  // the log offset of data[0]
	data     []byte // at most about tailKeep bytes
	complete bool   // the attempt ended and data reaches its log's end
	failed   bool   // the reader stopped on an error: followers read for themselves
	wake     chan struct{}

	// The last chunk of lines a follower rendered: the others, in step
	// with it, send the same HTML.
	renderMu           sync.Mutex
	renderedAt, endsAt int64
	rendered           string
}

// join adds a follower of an attempt's log (attempt as the follower asked,
// 0 for the latest), starting the log's reader at from when it is the
// first; the reader reads as u. Call leave when done.
func (ts *tails) join(u User, id string, attempt, from int64) *tail {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	k := tailKey{id, attempt}
	t := ts.m[k]
	if t == nil || t.stopped() {
		ctx, cancel := context.WithCancel(context.Background())
		t = &tail{key: k, cancel: cancel, base: from, wake: make(chan struct{})}
		ts.m[k] = t
		go t.read(ctx, ts.b, u)
	}
	t.users++
	return t
}

// leave ends a follower; the last one stops the reader.
func (ts *tails) leave(t *tail) {
	ts.mu.Lock()
	defer ts.mu.Unlock()
	if t.users--; t.users == 0 {
		t.cancel()
		if ts.m[t.key] == t {
			delete(ts.m, t.key)
		}
	}
}

// stopped: the reader failed, so a new follower starts a new one.
func (t *tail) stopped() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.failed
}

// read follows the log in the store until it is complete, the reader is
// cancelled, or a read fails.
func (t *tail) read(ctx context.Context, b Backend, u User) {
	for {
		ch, release := b.Changed(t.key.job) // before reading, so no change is missed
		for {
			t.mu.Lock()
			end := t.base + int64(len(t.data))
			t.mu.Unlock()
			sl, err := b.Log(ctx, u, t.key.job, t.key.attempt, end)
			if err != nil {
				t.add(nil, false, true)
				release()
				return
			}
			t.add(sl.Data, sl.Complete, false)
			if sl.Complete {
				release()
				return
			}
			if len(sl.Data) == 0 {
				break
			}
		}
		select {
		case <-ch:
		case <-ctx.Done():
			release()
			return
		}
		release()
	}
}

// add appends what the reader read and wakes the followers.
func (t *tail) add(data []byte, complete, failed bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(data) == 0 && !complete && !failed {
		return
	}
	t.data = append(t.data, data...)
	if drop := len(t.data) - tailKeep; drop > 0 {
		drop = max(drop, tailKeep/4) // drop in large steps, not at every chunk
		t.data = append([]byte(nil), t.data[drop:]...)
		t.base += int64(drop)
	}
	t.complete, t.failed = complete, failed
	close(t.wake)
	t.wake = make(chan struct{})
}

// from is the log from off as far as the reader has it: ok is false when
// off is before what it keeps (or the reader failed), and then the
// follower reads the store itself. wake closes at the next change.
func (t *tail) from(off int64) (data []byte, complete, ok bool, wake <-chan struct{}) {
	t.mu.Lock()
	defer t.mu.Unlock()
	end := t.base + int64(len(t.data))
	if t.failed || off < t.base {
		return nil, false, false, t.wake
	}
	if off >= end {
		return nil, t.complete && off == end, true, t.wake
	}
	return t.data[off-t.base:], t.complete, true, t.wake
}

// render is renderLog of data read at off, once for all the followers
// that send the same lines.
func (t *tail) render(data []byte, off int64) string {
	t.renderMu.Lock()
	defer t.renderMu.Unlock()
	end := off + int64(len(data))
	if t.rendered == "" || t.renderedAt != off || t.endsAt != end {
		h, _ := renderLog(data, off)
		t.rendered, t.renderedAt, t.endsAt = string(h), off, end
	}
	return t.rendered
}
