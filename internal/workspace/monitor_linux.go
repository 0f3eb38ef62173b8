package workspace

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"

	"golang.org/x/sys/unix"
)

// monitor watches a worktree with inotify so that a publication can hand
// git only the paths changed since the runner's saved index instead of
// letting `git add --all` stat every file and read every folder. It vouches
// only for what it is sure of: anything that could hide a change (lost or
// dropped events, a watch it could not add, a hard link, a change to git's
// own files or ignore rules) makes the next publication use the full scan.
//
// Changes are numbered (seq). The saved index is known to match the
// worktree up to base: every path changed after base is in paths. A
// publication takes a cut (the seq when it starts reading the worktree);
// once its index becomes the saved one, base moves to that cut. That
// index leaves out ignored files, which a reset must remove: the worktree
// is known to be exactly a commit, nothing untracked or ignored, up to
// clean (the cut of the last reset or checkout the runner verified), and
// paths keeps every path changed after clean too.
//
// Every read of the inotify descriptor happens under mu, both in the
// reading goroutine and in a publication's drain, so a publication never
// misses events the goroutine has read but not yet recorded.
type monitor struct {
	root      string
	log       *slog.Logger
	f         *os.File // the inotify descriptor, non-blocking, in Go's poller
	rc        syscall.RawConn
	fd        int           // f's number, used only inside rc callbacks (which keep it open)
	done      chan struct{} // closed when the reading goroutine has ended
	closeOnce sync.Once

	mu      sync.Mutex
	buf     []byte
	dirs    map[int32]string  // watch descriptor → folder, relative to root ("" is root)
	paths   map[string]uint64 // changed path → seq of its latest change
	pending map[string]bool   // non-folders created since the last drain, whose link count is still to check
	// movedOut are pending files renamed within a drain, by the rename's
	// cookie: its IN_MOVED_TO (the new name, pending in turn) settles one;
	// a rename out of the tree never comes, and the file is unchecked.
	movedOut map[uint32]string
	seq      uint64
	lost     uint64 // seq of the latest change that paths may lack (0: none)
	lostWhy  string
	broken   string // the monitor can no longer vouch for anything
	based    bool   // base is meaningful: the monitor ran since the saved index was written
	base     uint64
	// clean is meaningful (cleanBased): the monitor ran since a verified
	// reset or checkout; clean <= base.
	cleanBased bool
	clean      uint64
	dirents    []byte // watchTree's listing buffer
}

const (
	// dirWatch is what a folder's watch reports: every change to its
	// entries and to itself. IN_DONT_FOLLOW and IN_ONLYDIR keep a folder
	// swapped for a symlink from making the monitor watch outside the tree.
	dirWatch = unix.IN_CREATE | unix.IN_DELETE | unix.IN_MODIFY | unix.IN_CLOSE_WRITE | unix.IN_MOVED_FROM | unix.IN_MOVED_TO |
		unix.IN_ATTRIB | unix.IN_DELETE_SELF | unix.IN_MOVE_SELF | unix.IN_ONLYDIR | unix.IN_DONT_FOLLOW
	// maxTrackedPaths caps the memory of the changed set; past it the
	// monitor records a loss and the next publication scans everything.
	maxTrackedPaths = 200_000
)

// startMonitor watches every folder of the worktree at root except its .git
// link, and returns once every watch is in place. The monitor starts
// without a base: it vouches for nothing until rebase.
func startMonitor(root string, log *slog.Logger) (*monitor, error) {
	m, err := launchMonitor(root, log)
	if err != nil {
		return nil, err
	}
	if _, ok := m.mark(); !ok {
		why := m.whyBroken()
		m.stop()
		return nil, fmt.Errorf("watch worktree %s: %s", root, why)
	}
	return m, nil
}

// launchMonitor is startMonitor returning at once: the watches are added
// by the monitor's goroutine (a few thousand folders take a few hundred
// milliseconds), and every other use of the monitor waits for that.
func launchMonitor(root string, log *slog.Logger) (*monitor, error) {
	fd, err := unix.InotifyInit1(unix.IN_NONBLOCK | unix.IN_CLOEXEC)
	if err != nil {
		return nil, fmt.Errorf("watch worktree: inotify: %w", err)
	}
	// A non-blocking descriptor goes into Go's poller: the reading
	// goroutine parks there, and Close wakes it.
	f := os.NewFile(uintptr(fd), "inotify")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("watch worktree: %w", err)
	}
	m := &monitor{root: root, log: log, f: f, rc: rc, fd: fd, done: make(chan struct{}),
		buf: make([]byte, 64<<10), dirs: map[int32]string{}, paths: map[string]uint64{}, pending: map[string]bool{},
		movedOut: map[uint32]string{}}
	m.mu.Lock() // until every watch is in place
	go m.run()
	return m, nil
}

func (m *monitor) whyBroken() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.broken
}

// run adds the watches (with mu held since launchMonitor), then reads
// events until the monitor is stopped or broken.
func (m *monitor) run() {
	defer close(m.done)
	if err := m.rc.Control(func(uintptr) {
		// Hard links made before the monitor started are found by inode
		// number: a write through one name reports only that name.
		m.watchTree(m.fd, "", map[uint64]bool{})
	}); err != nil {
		m.breakf("watch worktree: %v", err)
	}
	broken := m.broken
	m.mu.Unlock()
	if broken != "" {
		m.log.Debug("file-system monitor stopped", "dir", m.root, "why", broken)
		m.close()
		return
	}
	err := m.rc.Read(func(fd uintptr) bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.drain(int(fd))
		return m.broken != ""
	})
	if err == nil {
		// Broken: let go of the watches now, for other worktrees' sake.
		m.mu.Lock()
		m.log.Debug("file-system monitor stopped", "dir", m.root, "why", m.broken)
		m.mu.Unlock()
		m.close()
	}
}

func (m *monitor) close() { m.closeOnce.Do(func() { m.f.Close() }) }

// ended reports that the reading goroutine has ended (the monitor broke
// or was stopped).
func (m *monitor) ended() bool {
	select {
	case <-m.done:
		return true
	default:
		return false
	}
}

// stop closes the descriptor (and so every watch) and waits for the reading
// goroutine to end.
func (m *monitor) stop() {
	if m == nil {
		return
	}
	m.close()
	<-m.done
}

// maxRechecks bounds how often one drain reads again for the events that
// explain a file gone before its check (a writer renaming temporary files
// in a loop would otherwise hold mu).
const maxRechecks = 3

// drain reads and records every queued event, then checks the link counts
// of the files created meanwhile. A file gone by then (a temporary file
// renamed into place, the common way to write one) or renamed in the batch
// is settled by the events its rename queued: they are read too, so only a
// file deleted, or moved out of the tree, unchecked costs the narrowing.
// Call with mu held.
func (m *monitor) drain(fd int) {
	m.readQueued(fd)
	for try := 0; m.broken == ""; try++ {
		gone := m.checkLinks()
		if len(gone) == 0 && len(m.movedOut) == 0 {
			return
		}
		if try == maxRechecks {
			for _, p := range gone {
				delete(m.pending, p)
				m.lose("%s was made and removed before its link count could be checked", p)
			}
			for c, p := range m.movedOut {
				delete(m.movedOut, c)
				m.lose("%s was moved out of the worktree before its link count could be checked", p)
			}
			return
		}
		// The rename or deletion that explains each was queued before the
		// check looked; a rename's second half may follow a moment later.
		m.readQueued(fd)
	}
}

// readQueued reads and records the events queued now. Call with mu held.
func (m *monitor) readQueued(fd int) {
	for m.broken == "" {
		n, err := unix.Read(fd, m.buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if errors.Is(err, unix.EAGAIN) {
			break
		}
		if err != nil || n <= 0 {
			m.breakf("read inotify events: %v", err)
			return
		}
		m.process(m.buf[:n])
	}
}

// process records one read's events.
func (m *monitor) process(b []byte) {
	for len(b) >= unix.SizeofInotifyEvent && m.broken == "" {
		wd := int32(binary.NativeEndian.Uint32(b[0:]))
		mask := binary.NativeEndian.Uint32(b[4:])
		cookie := binary.NativeEndian.Uint32(b[8:])
		n := int(binary.NativeEndian.Uint32(b[12:]))
		if unix.SizeofInotifyEvent+n > len(b) {
			m.breakf("short inotify event")
			return
		}
		name := b[unix.SizeofInotifyEvent : unix.SizeofInotifyEvent+n]
		if i := strings.IndexByte(string(name), 0); i >= 0 {
			name = name[:i]
		}
		m.event(wd, mask, cookie, string(name))
		b = b[unix.SizeofInotifyEvent+n:]
	}
}

// event records one event. Call with mu held.
func (m *monitor) event(wd int32, mask, cookie uint32, name string) {
	m.seq++
	if mask&unix.IN_Q_OVERFLOW != 0 {
		// Events were dropped, so folders made meanwhile may be unwatched.
		m.breakf("the kernel dropped events (inotify queue overflow)")
		return
	}
	dir, ok := m.dirs[wd]
	if mask&unix.IN_IGNORED != 0 {
		delete(m.dirs, wd) // the folder is gone; its parent reported that
		return
	}
	if !ok {
		m.breakf("event for an unknown watch %d", wd)
		return
	}
	if mask&unix.IN_UNMOUNT != 0 {
		m.breakf("a file system under the worktree was unmounted")
		return
	}
	if name == "" { // the watched folder itself
		switch {
		case dir == "" && mask&(unix.IN_DELETE_SELF|unix.IN_MOVE_SELF) != 0:
			m.breakf("the worktree folder itself was moved or deleted")
		case dir == "" && mask&unix.IN_ATTRIB != 0:
			m.lose("the worktree folder's own attributes changed")
		case mask&unix.IN_ATTRIB != 0:
			m.record(dir)
		}
		return
	}
	p := path.Join(dir, name)
	switch {
	case strings.EqualFold(name, ".git"):
		if dir != "" {
			m.breakf("%s is a nested repository", dir) // see watchTree
			return
		}
		m.lose("the worktree's .git link changed") // the runner rewrites it
	case rulesFile(name):
		// Rules that change how files nobody touched are read: only the
		// full scan sees what that does.
		m.lose("%s changed", p)
	}
	m.record(p)
	isDir := mask&unix.IN_ISDIR != 0
	switch {
	case isDir && mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
		// Watch the new folder and everything in it; whatever was made
		// there before the watch is covered by p itself.
		m.watchTree(m.fd, p, nil)
	case !isDir && mask&(unix.IN_CREATE|unix.IN_MOVED_TO) != 0:
		m.pending[p] = true
		if mask&unix.IN_MOVED_TO != 0 {
			delete(m.movedOut, cookie) // checked under its new name
		}
	case !isDir && mask&unix.IN_MOVED_FROM != 0 && m.pending[p]:
		delete(m.pending, p)
		m.movedOut[cookie] = p
	case !isDir && mask&unix.IN_DELETE != 0 && m.pending[p]:
		// It might have been a hard link to a file elsewhere in the tree,
		// written through and dropped: that file changed unreported.
		delete(m.pending, p)
		m.lose("%s was made and deleted before its link count could be checked", p)
	}
}

// checkLinks looks at the files created since the last drain: a hard link
// to a file of the tree hides writes to that file (inotify reports the
// name written through), so the monitor gives up. It returns the files
// gone before their check, left pending. Call with mu held.
func (m *monitor) checkLinks() (gone []string) {
	for p := range m.pending {
		var st unix.Stat_t
		err := unix.Lstat(filepath.Join(m.root, p), &st)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			gone = append(gone, p) // still pending: see drain
			continue
		}
		delete(m.pending, p)
		switch {
		case err != nil:
			m.breakf("check %s: %v", p, err)
		case st.Mode&unix.S_IFMT != unix.S_IFDIR && st.Nlink > 1:
			m.breakf("%s is a hard link", p)
		}
	}
	return gone
}

// watchTree watches the folder rel and every folder under it: the watch
// first, then the listing, so nothing made in between goes unseen. seen,
// when not nil, collects inode numbers to find hard links among the files;
// without it every file found is checked with lstat. Call with mu held.
func (m *monitor) watchTree(fd int, rel string, seen map[uint64]bool) {
	stack := []string{rel}
	for len(stack) > 0 && m.broken == "" {
		d := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		abs := filepath.Join(m.root, d)
		wd, err := unix.InotifyAddWatch(fd, abs, dirWatch)
		switch {
		case errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR):
			continue // gone or replaced since: its parent's events say so
		case errors.Is(err, unix.ENOSPC):
			m.breakf("the inotify watch limit is reached (fs.inotify.max_user_watches)")
			return
		case err != nil:
			m.breakf("watch %s: %v", abs, err)
			return
		}
		m.dirs[int32(wd)] = d
		ents, err := m.readDirents(abs)
		if errors.Is(err, unix.ENOENT) || errors.Is(err, unix.ENOTDIR) {
			continue
		}
		if err != nil {
			m.breakf("list %s: %v", abs, err)
			return
		}
		for _, e := range ents {
			if d == "" && e.name == ".git" {
				continue // the worktree's link to its admin dir
			}
			if strings.EqualFold(e.name, ".git") {
				// A nested repository: git records it as a gitlink, which
				// drover leaves out, and never looks inside. Rather than
				// follow that, the monitor gives up.
				m.breakf("%s holds a nested repository", d)
				return
			}
			typ := e.typ
			if typ == unix.DT_UNKNOWN {
				var st unix.Stat_t
				if err := unix.Lstat(filepath.Join(m.root, d, e.name), &st); err != nil {
					continue // gone: its removal is reported
				}
				if st.Mode&unix.S_IFMT == unix.S_IFDIR {
					typ = unix.DT_DIR
				}
			}
			// The path is joined only where needed: the first walk meets
			// 100,000 files.
			switch {
			case typ == unix.DT_DIR:
				stack = append(stack, path.Join(d, e.name))
			case seen != nil:
				if seen[e.ino] {
					m.breakf("%s is one of several hard links of one file", path.Join(d, e.name))
					return
				}
				seen[e.ino] = true
			default:
				m.pending[path.Join(d, e.name)] = true
			}
		}
	}
}

type dirent struct {
	name string
	ino  uint64
	typ  uint8
}

// readDirents lists a folder with the inode number and type of each entry,
// which os.ReadDir does not give. Call with mu held (the buffer is shared).
func (m *monitor) readDirents(dir string) ([]dirent, error) {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_NOFOLLOW|unix.O_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var out []dirent
	if m.dirents == nil {
		m.dirents = make([]byte, 32<<10)
	}
	buf := m.dirents
	for {
		n, err := unix.Getdents(fd, buf)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if n <= 0 {
			return out, nil
		}
		// struct linux_dirent64: ino u64, off s64, reclen u16, type u8, name.
		for b := buf[:n]; len(b) >= 19; {
			reclen := int(binary.NativeEndian.Uint16(b[16:]))
			if reclen < 19 || reclen > len(b) {
				return nil, fmt.Errorf("list %s: malformed directory entry", dir)
			}
			name := b[19:reclen]
			if i := strings.IndexByte(string(name), 0); i >= 0 {
				name = name[:i]
			}
			if s := string(name); s != "." && s != ".." {
				out = append(out, dirent{name: s, ino: binary.NativeEndian.Uint64(b[0:]), typ: b[18]})
			}
			b = b[reclen:]
		}
	}
}

// record notes a changed path. Call with mu held.
func (m *monitor) record(p string) {
	if _, ok := m.paths[p]; !ok && len(m.paths) >= maxTrackedPaths {
		m.lose("more than %d paths changed", maxTrackedPaths)
		return
	}
	m.paths[p] = m.seq
}

func (m *monitor) lose(format string, args ...any) {
	m.lost = m.seq
	m.lostWhy = fmt.Sprintf(format, args...)
}

func (m *monitor) breakf(format string, args ...any) {
	if m.broken == "" {
		m.broken = fmt.Sprintf(format, args...)
	}
}

// sync records every event queued so far and returns the cut: changes
// from now on have a higher seq. why is set when the monitor can no
// longer vouch for anything.
func (m *monitor) sync(f func(cut uint64)) (why string) {
	err := m.rc.Control(func(fd uintptr) {
		m.mu.Lock()
		defer m.mu.Unlock()
		m.drain(int(fd))
		why = m.broken
		f(m.seq)
	})
	if err != nil {
		m.mu.Lock()
		defer m.mu.Unlock()
		if why = m.broken; why == "" {
			why = "the monitor is stopped"
		}
	}
	return why
}

// mark takes a cut without listing anything; ok is false when the monitor
// is broken.
func (m *monitor) mark() (cut uint64, ok bool) {
	why := m.sync(func(c uint64) { cut = c })
	return cut, why == ""
}

// narrow takes a cut and lists the paths changed since base (since clean,
// when sinceClean), folded (a folder stands for everything under it) and
// sorted. why says why the full scan is needed instead.
func (m *monitor) narrow(sinceClean bool) (paths []string, cut uint64, why string) {
	var doubt string
	broken := m.sync(func(c uint64) {
		cut = c
		base, based := m.base, m.based
		if sinceClean {
			base, based = m.clean, m.cleanBased
		}
		switch {
		case m.broken != "":
			return
		case !based && sinceClean:
			doubt = "the monitor did not run since the worktree was last reset"
			return
		case !based:
			doubt = "the monitor did not run since the saved index was written"
			return
		case m.lost > base:
			doubt = m.lostWhy
			return
		}
		changed := map[string]bool{}
		for p, s := range m.paths {
			if s > base {
				changed[p] = true
			}
		}
		for p := range changed {
			if !coveredBy(changed, p) {
				paths = append(paths, p)
			}
		}
		if len(paths) > maxNarrowPaths {
			doubt = fmt.Sprintf("%d paths changed (more than %d)", len(paths), maxNarrowPaths)
			paths = nil
		}
	})
	if broken != "" {
		return nil, cut, broken
	}
	if doubt != "" {
		return nil, cut, doubt
	}
	sort.Strings(paths)
	return paths, cut, ""
}

// rebase records that the saved index matches the worktree as of cut, and
// with clean that the worktree was exactly its commit then (a verified
// reset or checkout): what changed up to the earlier of base and clean is
// forgotten.
func (m *monitor) rebase(cut uint64, clean bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if cut < m.base && m.based {
		return
	}
	m.base, m.based = cut, true
	if clean {
		m.clean, m.cleanBased = cut, true
	}
	forget := cut
	if m.cleanBased {
		forget = min(cut, m.clean)
	}
	for p, s := range m.paths {
		if s <= forget {
			delete(m.paths, p)
		}
	}
}
