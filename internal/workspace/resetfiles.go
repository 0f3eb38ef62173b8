package workspace

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"drover/internal/gitcmd"
)

// The narrowed reset writes head's files itself, and records them with one
// `git update-index`, when there are at most maxWritePaths paths of at
// most maxWriteBytes in all: `git restore` spends as much again as the
// index read walking the index for its pathspec.
const (
	maxWritePaths = 64
	maxWriteBytes = 8 << 20
)

// headFile is what head has at a reset path: a regular file (mode 100644
// or 100755) or a symlink (120000) with its content; mode "" is nothing.
type headFile struct {
	path, mode string
	data       []byte
}

// headFiles returns head's content at each path, or nil when git must
// restore them instead: a folder at a path in either base (its entries
// would have to be listed), a gitlink, too many paths or bytes, or
// anything that could make git convert a blob on checkout (eol, ident,
// encoding): a .gitattributes above a path in head, a clone config or
// info/attributes other than drover's own.
// known, when not nil, is head's entry at each path that has one (from the
// comparison of the bases): no `ls-tree` is needed for their modes.
func (w *Worktree) headFiles(ctx context.Context, head string, paths []string, types map[string]map[string]string, known map[string]treeEntry) ([]headFile, error) {
	if len(paths) > maxWritePaths {
		return nil, nil
	}
	for _, byPath := range types {
		for _, t := range byPath {
			if t == "tree" {
				return nil, nil
			}
		}
	}
	// A partial clone leaves fetching missing blobs to git.
	if w.repo.promisor != "" || !fileIs(filepath.Join(w.repo.dir, "config"), []byte(cloneConfig)) ||
		!fileIs(filepath.Join(w.repo.dir, "info", "attributes"), cloneAttributes) {
		return nil, nil
	}
	// Asked in one `cat-file --batch`: the attribute files above the paths
	// (each must be missing), then the blobs.
	var in strings.Builder
	dirs := map[string]bool{}
	for _, p := range paths {
		for d := path.Dir(p); !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			attrs := ".gitattributes"
			if d != "." {
				attrs = d + "/" + attrs
			}
			in.WriteString(head + ":" + attrs + "\x00")
			if d == "." {
				break
			}
		}
	}
	probes := strings.Count(in.String(), "\x00")
	var args []string
	for _, p := range paths {
		if types[head][p] == "blob" {
			args = append(args, p)
		}
	}
	mode, oid := map[string]string{}, map[string]string{}
	var blobs []string
	if known != nil {
		for _, p := range args {
			mode[p], oid[p] = known[p].mode, known[p].object
		}
	} else if len(args) > 0 {
		// -l gives each blob's size: the contents are read only when they
		// fit in maxWriteBytes.
		out, err := w.repo.git.Run(ctx, gitcmd.Cmd{Dir: w.repo.dir,
			Args: append([]string{"--literal-pathspecs", "ls-tree", "-l", "-z", "--full-tree", "--end-of-options", head, "--"}, args...)})
		if err != nil {
			return nil, fmt.Errorf("list the paths to reset in %s: %w", gitcmd.Short(head), err)
		}
		total := 0
		for _, ent := range bytes.Split(bytes.TrimSuffix(out, []byte{0}), []byte{0}) {
			meta, p, ok := strings.Cut(string(ent), "\t")
			f := strings.Fields(meta) // mode type oid size
			if !ok || len(f) != 4 {
				return nil, fmt.Errorf("unexpected ls-tree line %q", ent)
			}
			n, err := strconv.Atoi(f[3])
			if err != nil {
				return nil, nil // "-": not a blob
			}
			if total += n; total > maxWriteBytes {
				return nil, nil
			}
			mode[p], oid[p] = f[0], f[2]
		}
	}
	for _, p := range args {
		switch mode[p] {
		case "100644", "100755", "120000":
		default:
			return nil, nil // a gitlink, or ls-tree saw it otherwise
		}
		in.WriteString(oid[p] + "\x00")
		blobs = append(blobs, p)
	}
	// The answers' size is capped: a larger file than maxWriteBytes (its
	// size unknown without ls-tree) stops cat-file, and git restores them.
	// Beside the contents, each answer is a header (a "missing" one repeats
	// the question).
	capped := &cappedBuffer{max: maxWriteBytes + in.Len() + 128*(probes+len(blobs))}
	_, err := w.repo.git.Run(ctx, gitcmd.Cmd{Dir: w.repo.dir, Stdin: strings.NewReader(in.String()), Stdout: capped,
		Args: []string{"cat-file", "-z", "--batch"}})
	if capped.over {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the files to reset: %w", err)
	}
	out := capped.b.Bytes()
	total := 0
	content := map[string][]byte{}
	for i := 0; i < probes+len(blobs); i++ {
		hdr, rest, ok := bytes.Cut(out, []byte{'\n'})
		if !ok {
			return nil, fmt.Errorf("read the files to reset: answer %d cut short", i)
		}
		f := strings.Fields(string(hdr))
		if i < probes {
			if len(f) != 2 || f[1] != "missing" {
				return nil, nil // an attribute file applies
			}
			out = rest
			continue
		}
		if len(f) != 3 || f[1] != "blob" {
			return nil, fmt.Errorf("read %s of %s: %q", blobs[i-probes], gitcmd.Short(head), hdr)
		}
		n, err := strconv.Atoi(f[2])
		if err != nil || n < 0 || n+1 > len(rest) || rest[n] != '\n' {
			return nil, fmt.Errorf("read %s of %s: bad size %q", blobs[i-probes], gitcmd.Short(head), hdr)
		}
		if total += n; total > maxWriteBytes {
			return nil, nil
		}
		content[blobs[i-probes]] = rest[:n]
		out = rest[n+1:]
	}
	files := make([]headFile, 0, len(paths))
	for _, p := range paths {
		files = append(files, headFile{path: p, mode: mode[p], data: content[p]})
	}
	return files, nil
}

// writeFiles writes head's files where removeChanged left nothing, as git
// checkout would (0666 or 0777 less the umask; symlinks as links), and
// records every known path in the index in one `git update-index`, which
// hashes and stats what is there: a path with no file leaves the index.
func (w *Worktree) writeFiles(ctx context.Context, files []headFile, known string) error {
	for _, f := range files {
		if f.mode == "" {
			continue
		}
		abs := filepath.Join(w.Dir(), filepath.FromSlash(f.path))
		if err := os.MkdirAll(filepath.Dir(abs), 0o777); err != nil {
			return fmt.Errorf("reset %s: %w", f.path, err)
		}
		var err error
		switch f.mode {
		case "120000":
			err = os.Symlink(string(f.data), abs)
		case "100755":
			err = writeNew(abs, f.data, 0o777)
		default:
			err = writeNew(abs, f.data, 0o666)
		}
		if err != nil {
			return fmt.Errorf("reset %s: %w", f.path, err)
		}
	}
	if _, err := w.gitRaw(ctx, nil, strings.NewReader(known), "-c", "core.preloadIndex=false",
		"update-index", "--add", "--remove", "-z", "--stdin"); err != nil {
		return fmt.Errorf("record the reset paths in the index: %w", err)
	}
	for _, f := range files {
		if err := w.checkWritten(f); err != nil {
			return fmt.Errorf("check %s after the reset: %w", f.path, err)
		}
	}
	return nil
}

// checkWritten checks that what is at f.path is head's entry exactly: its
// type, exec bit and bytes, or nothing. It stands in for comparing the
// whole index with head (a second read of all its entries): the index
// holds from's tree, which equals head's outside the reset paths, and
// `update-index` has just recorded what is at each of them; with no
// conversion (headFiles made sure) and the clone's filemode and symlinks
// on, that is head's entry when the file is head's.
func (w *Worktree) checkWritten(f headFile) error {
	abs := filepath.Join(w.Dir(), filepath.FromSlash(f.path))
	fi, err := os.Lstat(abs)
	if f.mode == "" {
		if err == nil {
			return errors.New("something is there, the base has nothing")
		}
		if errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR) {
			return nil
		}
		return err
	}
	if err != nil {
		return err
	}
	var got []byte
	switch {
	case f.mode == "120000" && fi.Mode()&fs.ModeSymlink != 0:
		var target string
		target, err = os.Readlink(abs)
		got = []byte(target)
	case f.mode != "120000" && fi.Mode().IsRegular() && (fi.Mode()&0o100 != 0) == (f.mode == "100755"):
		got, err = os.ReadFile(abs)
	default:
		return fmt.Errorf("mode %v, want %s", fi.Mode(), f.mode)
	}
	if err != nil {
		return err
	}
	if !bytes.Equal(got, f.data) {
		return errors.New("content differs from the base's")
	}
	return nil
}

// cappedBuffer keeps what is written up to max bytes, and refuses more.
type cappedBuffer struct {
	b    bytes.Buffer
	max  int
	over bool
}

func (c *cappedBuffer) Write(p []byte) (int, error) {
	if c.b.Len()+len(p) > c.max {
		c.over = true
		return 0, errors.New("more than the files to reset may hold")
	}
	return c.b.Write(p)
}

func writeNew(name string, data []byte, perm os.FileMode) error {
	f, err := os.OpenFile(name, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

func fileIs(name string, want []byte) bool {
	got, err := os.ReadFile(name)
	return err == nil && bytes.Equal(got, want)
}
