package native

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"regexp"
	"sort"
	"strings"
	"syscall"
)

// Limits of the file tools: what one call may read, write or list.
const (
	maxReadBytes   = 64 << 10
	maxWriteBytes  = 1 << 20
	maxListEntries = 500
	maxMatches     = 200
	maxSearchFile  = 2 << 20
	defaultLines   = 400
)

// files are the file tools, on the worktree through os.Root: a path with
// "..", an absolute path or a symlink that leads out of the worktree is
// refused by the kernel-backed lookup, whatever a command planted.
type files struct {
	root *os.Root
	dir  string // the worktree's path, which a model may put before a path
}

// clean turns a model's path into one relative to the root; "" is the
// root itself. An absolute path inside the worktree is made relative; any
// other one stays absolute, which the root refuses.
func (f files) clean(p string) (string, error) {
	p = strings.TrimSpace(p)
	if f.dir != "" {
		if rel, ok := strings.CutPrefix(p, strings.TrimRight(f.dir, "/")+"/"); ok {
			p = rel
		}
	}
	if strings.ContainsRune(p, 0) {
		return "", errors.New("path holds a NUL byte")
	}
	if p == "" || p == "." || p == "/" {
		return ".", nil
	}
	return path.Clean(strings.TrimPrefix(p, "./")), nil
}

func (f files) read(p string, offset, limit int) (string, error) {
	rel, err := f.clean(p)
	if err != nil {
		return "", err
	}
	fh, err := f.open(rel, os.O_RDONLY, 0)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	if offset < 1 {
		offset = 1
	}
	if limit <= 0 {
		limit = defaultLines
	}
	var b strings.Builder
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 64<<10), maxReadBytes)
	line, shown := 0, 0
	for sc.Scan() {
		line++
		if line < offset {
			continue
		}
		if shown == limit || b.Len()+len(sc.Bytes()) > maxReadBytes {
			fmt.Fprintf(&b, "[... more lines from %d: read again with offset %d]\n", line, line)
			return b.String(), nil
		}
		fmt.Fprintf(&b, "%6d\t%s\n", line, sc.Bytes())
		shown++
	}
	if err := sc.Err(); err != nil {
		return "", fmt.Errorf("read %s: %w", p, err)
	}
	if shown == 0 {
		return fmt.Sprintf("(%s has %d lines; nothing at line %d)", p, line, offset), nil
	}
	return b.String(), nil
}

func (f files) write(p, content string) (string, error) {
	rel, err := f.clean(p)
	if err != nil {
		return "", err
	}
	if len(content) > maxWriteBytes {
		return "", fmt.Errorf("content is %d bytes; the limit is %d", len(content), maxWriteBytes)
	}
	if dir := path.Dir(rel); dir != "." {
		if err := f.root.MkdirAll(dir, 0o755); err != nil {
			return "", pathErr(err)
		}
	}
	// Truncated only once it is known to be a regular file.
	fh, err := f.open(rel, os.O_WRONLY|os.O_CREATE, 0)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	if err := fh.Truncate(0); err != nil {
		return "", pathErr(err)
	}
	if _, err := fh.Write([]byte(content)); err != nil {
		return "", pathErr(err)
	}
	if err := fh.Close(); err != nil {
		return "", pathErr(err)
	}
	return fmt.Sprintf("wrote %d bytes to %s", len(content), p), nil
}

func (f files) edit(p, old, new string) (string, error) {
	rel, err := f.clean(p)
	if err != nil {
		return "", err
	}
	if old == "" {
		return "", errors.New("old_text is empty: use write_file to create a file")
	}
	// Read and written through one descriptor: what is written is the
	// file that was read, whatever a command renamed in between.
	fh, err := f.open(rel, os.O_RDWR, 0)
	if err != nil {
		return "", err
	}
	defer fh.Close()
	data, err := io.ReadAll(fh)
	if err != nil {
		return "", pathErr(err)
	}
	switch n := bytes.Count(data, []byte(old)); n {
	case 0:
		return "", fmt.Errorf("old_text does not occur in %s: read the file and copy it exactly", p)
	case 1:
	default:
		return "", fmt.Errorf("old_text occurs %d times in %s: give more context so it occurs once", n, p)
	}
	out := bytes.Replace(data, []byte(old), []byte(new), 1)
	if len(out) > maxWriteBytes {
		return "", fmt.Errorf("the file would be %d bytes; the limit is %d", len(out), maxWriteBytes)
	}
	if err := fh.Truncate(0); err != nil {
		return "", pathErr(err)
	}
	if _, err := fh.WriteAt(out, 0); err != nil {
		return "", pathErr(err)
	}
	if err := fh.Close(); err != nil {
		return "", pathErr(err)
	}
	return "edited " + p, nil
}

func (f files) list(p string) (string, error) {
	rel, err := f.clean(p)
	if err != nil {
		return "", err
	}
	dir, err := f.open(rel, os.O_RDONLY, fs.ModeDir)
	if err != nil {
		return "", err
	}
	defer dir.Close()
	ents, err := dir.ReadDir(-1)
	if err != nil {
		return "", pathErr(err)
	}
	sort.Slice(ents, func(i, j int) bool { return ents[i].Name() < ents[j].Name() })
	var b strings.Builder
	for i, e := range ents {
		if i == maxListEntries {
			fmt.Fprintf(&b, "[... %d more entries]\n", len(ents)-i)
			break
		}
		name := e.Name()
		switch {
		case e.IsDir():
			name += "/"
		case e.Type()&fs.ModeSymlink != 0:
			name += "@"
		}
		b.WriteString(name + "\n")
	}
	if b.Len() == 0 {
		return "(empty directory)", nil
	}
	return b.String(), nil
}

func (f files) search(pattern, p string) (string, error) {
	re, err := regexp.Compile(pattern)
	if err != nil {
		return "", fmt.Errorf("pattern: %w", err)
	}
	rel, err := f.clean(p)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	n := 0
	fsys := f.root.FS()
	err = fs.WalkDir(fsys, rel, func(name string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil // unreadable: skipped
		}
		if d.IsDir() {
			if d.Name() == ".git" {
				return fs.SkipDir
			}
			return nil
		}
		if !d.Type().IsRegular() {
			return nil
		}
		// Opened by name again after the walk saw it: checked again.
		fh, err := f.open(name, os.O_RDONLY, 0)
		if err != nil {
			return nil
		}
		data, err := io.ReadAll(io.LimitReader(fh, maxSearchFile+1))
		fh.Close()
		if err != nil || len(data) > maxSearchFile || bytes.IndexByte(data, 0) >= 0 {
			return nil // unreadable, too big or binary
		}
		for i, line := range strings.Split(string(data), "\n") {
			if re.MatchString(line) {
				if n == maxMatches {
					return fs.SkipAll
				}
				fmt.Fprintf(&b, "%s:%d:%s\n", name, i+1, clipLine(line))
				n++
			}
		}
		return nil
	})
	if err != nil {
		return "", pathErr(err)
	}
	switch {
	case n == 0:
		return "(no matches)", nil
	case n == maxMatches:
		fmt.Fprintf(&b, "[... stopped at %d matches; narrow the pattern or the path]\n", maxMatches)
	}
	return b.String(), nil
}

// open opens rel, which must be a regular file (want 0) or a directory
// (want fs.ModeDir), without ever blocking: open(2) of a FIFO waits for
// its other end, and a command may plant one (or a socket, or a device)
// where a tool looks. The type is checked on the descriptor itself, so
// nothing swapped in after a check is opened; O_NONBLOCK is cleared once
// the file is known to be one that never blocks.
func (f files) open(rel string, flag int, want fs.FileMode) (*os.File, error) {
	fh, err := f.root.OpenFile(rel, flag|syscall.O_NONBLOCK|syscall.O_NOCTTY, 0o644)
	if errors.Is(err, syscall.ENXIO) {
		// A socket, or a FIFO opened for writing with no reader.
		if st, serr := f.root.Stat(rel); serr == nil {
			return nil, notAFile(rel, st.Mode(), want)
		}
	}
	if err != nil {
		return nil, pathErr(err)
	}
	st, err := fh.Stat()
	if err == nil && st.Mode().Type() != want {
		err = notAFile(rel, st.Mode(), want)
	}
	if err == nil {
		var rc syscall.RawConn
		if rc, err = fh.SyscallConn(); err == nil {
			cerr := rc.Control(func(fd uintptr) { err = syscall.SetNonblock(int(fd), false) })
			err = errors.Join(cerr, err)
		}
	}
	if err != nil {
		fh.Close()
		return nil, pathErr(err)
	}
	return fh, nil
}

// notAFile refuses a file of mode m where a file of type want was asked for.
func notAFile(rel string, m fs.FileMode, want fs.FileMode) error {
	var what string
	switch t := m.Type(); {
	case t == fs.ModeDir:
		return fmt.Errorf("%s is a directory: use list_dir", rel)
	case want == fs.ModeDir && t == 0:
		return fmt.Errorf("%s is a file, not a directory: use read_file", rel)
	case t&fs.ModeNamedPipe != 0:
		what = "a named pipe (FIFO)"
	case t&fs.ModeSocket != 0:
		what = "a socket"
	case t&fs.ModeDevice != 0:
		what = "a device"
	default:
		what = "not a regular file"
	}
	return fmt.Errorf("%s is %s: the file tools read and write regular files only", rel, what)
}

func clipLine(s string) string {
	if len(s) > 300 {
		return s[:300] + "…"
	}
	return s
}

// pathErr says what went wrong with a path without the runner's own paths.
func pathErr(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return fmt.Errorf("%s: no such file or directory", pe.Path)
		case strings.Contains(pe.Err.Error(), "escapes"):
			return fmt.Errorf("%s: the path leads outside the worktree", pe.Path)
		}
		return fmt.Errorf("%s: %v", pe.Path, pe.Err)
	}
	return err
}
