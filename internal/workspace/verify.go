package workspace

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

// Refusal is a source or a transfer drover refuses, with a reason that is
// safe and useful to show the sender. Anything else is an internal fault.
type Refusal struct{ Reason string }

func (e *Refusal) Error() string { return e.Reason }

func refusef(format string, args ...any) error { return &Refusal{Reason: fmt.Sprintf(format, args...)} }

// CheckSourceTree refuses a commit whose tree holds a gitlink (a submodule)
// or a .gitattributes that assigns a filter (Git LFS and the like): a bundle
// of the repository does not carry their content, and drover never runs
// filters. dir is any repository holding the commit.
func CheckSourceTree(ctx context.Context, g Git, dir, commit string) error {
	var out bytes.Buffer
	if _, err := g.Run(ctx, Cmd{Dir: dir, Stdout: &out,
		Args: []string{"ls-tree", "-r", "-z", "--full-tree", "--end-of-options", commit}}); err != nil {
		return fmt.Errorf("list the tree of %s: %w", commit, err)
	}
	var attrs []string // "oid path"
	for _, ent := range bytes.Split(out.Bytes(), []byte{0}) {
		meta, p, ok := strings.Cut(string(ent), "\t")
		if !ok {
			continue
		}
		f := strings.Fields(meta) // mode type oid
		if len(f) != 3 {
			continue
		}
		if f[0] == "160000" {
			return refusef("%s has a submodule (gitlink) at %s; drover does not support submodules", short(commit), p)
		}
		if path.Base(p) == ".gitattributes" && f[1] == "blob" {
			attrs = append(attrs, f[2]+" "+p)
		}
	}
	for _, a := range attrs {
		oid, p, _ := strings.Cut(a, " ")
		blob, err := g.Run(ctx, Cmd{Dir: dir, Args: []string{"cat-file", "blob", oid}})
		if err != nil {
			return fmt.Errorf("read %s of %s: %w", p, commit, err)
		}
		if pattern, filter, ok := declaredFilter(blob); ok {
			return refusef("%s: %s assigns filter=%s to %q (e.g. Git LFS); drover does not run filters, so it refuses this repository",
				short(commit), p, filter, pattern)
		}
	}
	return nil
}

// declaredFilter finds the first "filter=NAME" attribute in a .gitattributes.
func declaredFilter(b []byte) (pattern, filter string, ok bool) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || strings.HasPrefix(f[0], "#") {
			continue
		}
		for _, attr := range f[1:] {
			if name, ok := strings.CutPrefix(attr, "filter="); ok {
				return f[0], name, true
			}
		}
	}
	return "", "", false
}

// Bundle is what the header of a git bundle says.
type Bundle struct {
	Prerequisites []string // commit ids the receiver must have
	Refs          []BundleRef
	packOffset    int64
}

// BundleRef is one ref a bundle advertises.
type BundleRef struct{ ID, Name string }

// maxBundleHeader bounds the text before the pack: a publication has one
// ref and few prerequisites.
const maxBundleHeader = 1 << 20

// ReadBundleHeader parses a v2 or v3 bundle header.
func ReadBundleHeader(r io.Reader) (Bundle, error) {
	var b Bundle
	br := bufio.NewReader(io.LimitReader(r, maxBundleHeader))
	line, err := br.ReadString('\n')
	if err != nil {
		return b, refusef("not a git bundle: %v", err)
	}
	b.packOffset = int64(len(line))
	switch line {
	case "# v2 git bundle\n", "# v3 git bundle\n":
	default:
		return b, refusef("not a git bundle (it starts with %.30q)", line)
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return b, refusef("bundle header is truncated or over %d bytes", maxBundleHeader)
		}
		b.packOffset += int64(len(line))
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			return b, nil
		case strings.HasPrefix(line, "@"): // v3 capability
			if line != "@object-format=sha1" {
				return b, refusef("bundle capability %q is not supported", line)
			}
		case strings.HasPrefix(line, "-"):
			id, _, _ := strings.Cut(line[1:], " ")
			if !ValidCommitID(id) {
				return b, refusef("bundle prerequisite %q is not a commit id", id)
			}
			b.Prerequisites = append(b.Prerequisites, id)
		default:
			id, name, ok := strings.Cut(line, " ")
			if !ok || !ValidCommitID(id) || name == "" {
				return b, refusef("bundle header line %.80q is malformed", line)
			}
			b.Refs = append(b.Refs, BundleRef{ID: id, Name: name})
		}
	}
}

// Incoming is a publication's objects held in quarantine: a separate object
// directory that sees the repository's objects but adds nothing to it until
// Accept. Close discards what was not accepted.
type Incoming struct {
	g          Git
	dir        string // the repository
	quarantine string // its objects/incoming-* directory
	env        []string
	Commit     string
}

// Receive checks a bundle file against the project's repository and
// imports its objects into quarantine. It refuses (with a *Refusal) a file
// that is not a bundle, advertises anything but exactly one ref pointing at
// commit, needs commits the repository lacks, or carries an object that
// fails validation (index-pack --strict: fsck of every object and of every
// link it makes).
func (r HubRepos) Receive(ctx context.Context, project, bundlePath, commit string) (*Incoming, error) {
	f, err := os.Open(bundlePath)
	if err != nil {
		return nil, fmt.Errorf("open bundle: %w", err)
	}
	defer f.Close()
	b, err := ReadBundleHeader(f)
	if err != nil {
		return nil, err
	}
	switch {
	case len(b.Refs) != 1:
		return nil, refusef("the bundle advertises %d refs; a publication carries exactly one", len(b.Refs))
	case b.Refs[0].ID != commit:
		return nil, refusef("the bundle's ref %s points at %s, not at the published commit %s", b.Refs[0].Name, b.Refs[0].ID, commit)
	}
	dir := r.Dir(project)
	for _, p := range b.Prerequisites {
		ok, err := objectPresent(ctx, r.Git, dir, nil, p+"^{commit}")
		if err != nil {
			return nil, fmt.Errorf("check bundle prerequisite %s: %w", p, err)
		}
		if !ok {
			return nil, refusef("the bundle needs commit %s, which the hub does not have", p)
		}
	}
	if _, err := r.Git.Run(ctx, Cmd{Dir: dir, Args: []string{"bundle", "verify", "--quiet", bundlePath}}); err != nil {
		var ge *Error
		if errors.As(err, &ge) {
			return nil, refusef("git bundle verify refused the bundle: %s", ge.Stderr)
		}
		return nil, fmt.Errorf("verify bundle: %w", err)
	}
	parent, err := r.scratch(filepath.Join(dir, "objects"))
	if err != nil {
		return nil, fmt.Errorf("make quarantine: %w", err)
	}
	q, err := os.MkdirTemp(parent, "incoming-")
	if err != nil {
		return nil, fmt.Errorf("make quarantine: %w", err)
	}
	in := &Incoming{g: r.Git, dir: dir, quarantine: q, Commit: commit,
		env: []string{"GIT_OBJECT_DIRECTORY=" + q, "GIT_ALTERNATE_OBJECT_DIRECTORIES=" + filepath.Join(dir, "objects")}}
	if err := os.Mkdir(filepath.Join(q, "pack"), 0o700); err != nil {
		in.Close()
		return nil, fmt.Errorf("make quarantine: %w", err)
	}
	if _, err := f.Seek(b.packOffset, io.SeekStart); err != nil {
		in.Close()
		return nil, fmt.Errorf("read bundle: %w", err)
	}
	// --fix-thin completes deltas against objects the repository has; a
	// flipped byte fails the pack checksum or an object's inflation.
	if _, err := r.Git.Run(ctx, Cmd{Dir: dir, Env: in.env, Stdin: f,
		Args: []string{"index-pack", "--stdin", "--fix-thin", "--strict"}}); err != nil {
		in.Close()
		var ge *Error
		if errors.As(err, &ge) {
			return nil, refusef("the bundle's objects failed validation: %s", ge.Stderr)
		}
		return nil, fmt.Errorf("import bundle: %w", err)
	}
	typ, err := r.Git.Run(ctx, Cmd{Dir: dir, Env: in.env, Args: []string{"cat-file", "-t", commit}})
	if err != nil || strings.TrimSpace(string(typ)) != "commit" {
		in.Close()
		return nil, refusef("the published id %s is not a commit in the bundle", commit)
	}
	return in, nil
}

// IsAncestor reports whether commit a is an ancestor of (or equal to) b,
// seeing the quarantined objects.
func (in *Incoming) IsAncestor(ctx context.Context, a, b string) (bool, error) {
	return ancestorIn(ctx, in.g, in.dir, in.env, a, b)
}

func ancestorIn(ctx context.Context, g Git, dir string, env []string, a, b string) (bool, error) {
	_, err := g.Run(ctx, Cmd{Dir: dir, Env: env, Args: []string{"merge-base", "--is-ancestor", a, b}})
	var ge *Error
	if errors.As(err, &ge) && ge.Code == 1 {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check that %s descends from %s: %w", short(b), short(a), err)
	}
	return true, nil
}

// Accept moves the quarantined objects into the repository: packs before
// their indexes, so no reader finds an index without its pack.
func (in *Incoming) Accept() error {
	src := filepath.Join(in.quarantine, "pack")
	ents, err := os.ReadDir(src)
	if err != nil {
		return fmt.Errorf("accept objects: %w", err)
	}
	names := make([]string, 0, len(ents))
	for _, e := range ents {
		names = append(names, e.Name())
	}
	sort.SliceStable(names, func(i, j int) bool {
		return strings.HasSuffix(names[j], ".idx") && !strings.HasSuffix(names[i], ".idx")
	})
	dst := filepath.Join(in.dir, "objects", "pack")
	if err := os.MkdirAll(dst, 0o755); err != nil {
		return fmt.Errorf("accept objects: %w", err)
	}
	for _, n := range names {
		if err := os.Rename(filepath.Join(src, n), filepath.Join(dst, n)); err != nil {
			return fmt.Errorf("accept objects: %w", err)
		}
	}
	return in.Close()
}

// Close discards whatever is left in quarantine.
func (in *Incoming) Close() error {
	if err := os.RemoveAll(in.quarantine); err != nil {
		return fmt.Errorf("remove quarantine: %w", err)
	}
	return nil
}
