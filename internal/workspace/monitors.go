package workspace

import (
	"os"
	"path"
	"strings"
	"sync"
)

// idleMonitors keeps watching the worktrees no attempt holds (pooled, or
// kept for a job's next attempt), so that the next attempt's reset and
// publications still know what changed since the saved index. A monitor
// ends with its worktree's removal, or when it breaks.
type idleMonitors struct {
	mu    sync.Mutex
	byDir map[string]idleMonitor
}

// idleMonitor is a parked monitor and the saved index it was parked with:
// should another process have replaced that index meanwhile, the monitor
// is dropped rather than trusted.
type idleMonitor struct {
	mon       *monitor
	indexHead string
	index     os.FileInfo
}

// park hands the worktree's monitor to the cache when the attempt lets go
// of the worktree.
func (c *Cache) park(w *Worktree) {
	if w.mon == nil {
		return
	}
	fi, err := os.Stat(w.path(".index"))
	if err != nil || checkCommitID(w.rec.IndexHead) != nil {
		w.unwatch()
		return
	}
	c.idle.mu.Lock()
	old := c.idle.byDir[w.Dir()]
	c.idle.byDir[w.Dir()] = idleMonitor{mon: w.mon, indexHead: w.rec.IndexHead, index: fi}
	for dir, p := range c.idle.byDir {
		if p.mon.ended() { // e.g. its worktree was removed by another process
			delete(c.idle.byDir, dir)
		}
	}
	c.idle.mu.Unlock()
	if old.mon != w.mon {
		old.mon.stop()
	}
	w.mon = nil
}

// unpark gives a claimed worktree the monitor that watched it while idle,
// if it still watches and its saved index is the one it was parked with;
// any other parked monitor of the worktree is stopped.
func (c *Cache) unpark(w *Worktree) {
	c.idle.mu.Lock()
	p, ok := c.idle.byDir[w.Dir()]
	delete(c.idle.byDir, w.Dir())
	c.idle.mu.Unlock()
	if !ok {
		return
	}
	fi, err := os.Stat(w.path(".index"))
	_, watching := p.mon.mark()
	if err != nil || !watching || p.indexHead != w.rec.IndexHead || !os.SameFile(fi, p.index) ||
		!fi.ModTime().Equal(p.index.ModTime()) || fi.Size() != p.index.Size() {
		c.log.Debug("not reusing the idle worktree's file-system monitor", "dir", w.Dir(), "watching", watching)
		p.mon.stop()
		return
	}
	w.unwatch()
	w.mon = p.mon
}

// parked counts the idle monitors, for tests.
func (c *Cache) parked() int {
	c.idle.mu.Lock()
	defer c.idle.mu.Unlock()
	return len(c.idle.byDir)
}

// rulesFile reports that a file of this name holds rules that change how
// git reads other files (ignore rules, attributes): a change to one makes
// narrowing to the changed paths unsafe.
func rulesFile(p string) bool {
	switch strings.ToLower(path.Base(p)) {
	case ".gitignore", ".gitattributes":
		return true
	}
	return false
}

// maxNarrowPaths is the most (folded) paths a publication or reset hands
// git one by one; past it the full scan is about as quick and needs no
// long command line.
const maxNarrowPaths = 10_000

// coveredBy reports that a folder above p is in set.
func coveredBy(set map[string]bool, p string) bool {
	for d := path.Dir(p); d != "." && d != "/"; d = path.Dir(d) {
		if set[d] {
			return true
		}
	}
	return false
}

// baseNewMonitor waits until the monitor started during the preparation
// watches every folder and makes that moment its base (and its clean
// mark). Call it only while nothing writes to the worktree since it was
// verified: its checks saw what the cut does.
func (w *Worktree) baseNewMonitor() {
	cut, watched := w.mon.mark()
	if !watched {
		// It broke while the preparation changed the tree (lost
		// events, or an inode number reused between two listings
		// looked like a hard link): once more, now that nothing moves.
		w.unwatch()
		if m, err := startMonitor(w.Dir(), w.c.log); err == nil {
			w.mon = m
			cut, watched = m.mark()
		} else {
			w.c.log.Debug("no file-system monitor; publications scan the whole worktree", "dir", w.Dir(), "err", err)
		}
	}
	if watched {
		w.mon.rebase(cut, true)
	}
}

// Ready waits until the file-system monitor of a freshly checked out
// worktree watches every folder, and makes it vouch from then on. Prepare
// returns before that (a few thousand folders take a few hundred
// milliseconds) so that the runner's other preparations overlap it. Call
// Ready after Prepare and before anything writes to the worktree (the
// setup, the agent): the first walk lists a folder only once it watches
// it, so it would miss what is written meanwhile in the folders it has
// not reached. Until Ready the monitor vouches for nothing: publications
// scan the whole worktree and a reset checks out all of it.
func (w *Worktree) Ready() {
	if !w.unbased {
		return
	}
	w.unbased = false
	if w.mon != nil {
		lap := w.c.stopwatch("watch worktree", "dir", w.Dir())
		w.baseNewMonitor()
		lap("first walk")
	}
}

// watch starts the worktree's file-system monitor unless it runs; its
// watches are being added when this returns. Without a monitor every
// publication scans the whole worktree.
func (w *Worktree) watch() {
	if w.mon != nil {
		return
	}
	m, err := launchMonitor(w.Dir(), w.c.log)
	if err != nil {
		w.c.log.Debug("no file-system monitor; publications scan the whole worktree", "dir", w.Dir(), "err", err)
		return
	}
	w.mon = m
}

// unwatch stops the monitor: its descriptor, watches and goroutine go.
func (w *Worktree) unwatch() {
	w.mon.stop()
	w.mon = nil
}
