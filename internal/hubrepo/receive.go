package hubrepo

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"drover/internal/gitcmd"
)

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
		return b, gitcmd.Refusef("not a git bundle: %v", err)
	}
	b.packOffset = int64(len(line))
	switch line {
	case "# v2 git bundle\n", "# v3 git bundle\n":
	default:
		return b, gitcmd.Refusef("not a git bundle (it starts with %.30q)", line)
	}
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return b, gitcmd.Refusef("bundle header is truncated or over %d bytes", maxBundleHeader)
		}
		b.packOffset += int64(len(line))
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			return b, nil
		case strings.HasPrefix(line, "@"): // v3 capability
			if line != "@object-format=sha1" {
				return b, gitcmd.Refusef("bundle capability %q is not supported", line)
			}
		case strings.HasPrefix(line, "-"):
			id, _, _ := strings.Cut(line[1:], " ")
			if !gitcmd.ValidCommitID(id) {
				return b, gitcmd.Refusef("bundle prerequisite %q is not a commit id", id)
			}
			b.Prerequisites = append(b.Prerequisites, id)
		default:
			id, name, ok := strings.Cut(line, " ")
			if !ok || !gitcmd.ValidCommitID(id) || name == "" {
				return b, gitcmd.Refusef("bundle header line %.80q is malformed", line)
			}
			b.Refs = append(b.Refs, BundleRef{ID: id, Name: name})
		}
	}
}

// Incoming is a publication's objects held in quarantine: a separate object
// directory that sees the repository's objects but adds nothing to it until
// Accept. Close discards what was not accepted.
type Incoming struct {
	g          gitcmd.Git
	dir        string // the repository
	quarantine string // its objects/incoming-* directory
	env        []string
	Commit     string
}

// Receive checks a bundle file against the project's repository and
// imports its objects into quarantine. It refuses (with a *gitcmd.Refusal) a file
// that is not a bundle, advertises anything but exactly one ref pointing at
// commit, needs commits the repository lacks, or carries an object that
// fails validation (index-pack --strict: fsck of every object and of every
// link it makes).
func (r Repos) Receive(ctx context.Context, project, bundlePath, commit string) (*Incoming, error) {
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
		return nil, gitcmd.Refusef("the bundle advertises %d refs; a publication carries exactly one", len(b.Refs))
	case b.Refs[0].ID != commit:
		return nil, gitcmd.Refusef("the bundle's ref %s points at %s, not at the published commit %s", b.Refs[0].Name, b.Refs[0].ID, commit)
	}
	dir := r.Dir(project)
	for _, p := range b.Prerequisites {
		ok, err := objectPresent(ctx, r.Git, dir, nil, p+"^{commit}")
		if err != nil {
			return nil, fmt.Errorf("check bundle prerequisite %s: %w", p, err)
		}
		if !ok {
			return nil, gitcmd.Refusef("the bundle needs commit %s, which the hub does not have", p)
		}
	}
	if _, err := r.Git.Run(ctx, gitcmd.Cmd{Dir: dir, Args: []string{"bundle", "verify", "--quiet", bundlePath}}); err != nil {
		var ge *gitcmd.Error
		if errors.As(err, &ge) {
			return nil, gitcmd.Refusef("git bundle verify refused the bundle: %s", ge.Stderr)
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
	if _, err := r.Git.Run(ctx, gitcmd.Cmd{Dir: dir, Env: in.env, Stdin: f,
		Args: []string{"index-pack", "--stdin", "--fix-thin", "--strict"}}); err != nil {
		in.Close()
		var ge *gitcmd.Error
		if errors.As(err, &ge) {
			return nil, gitcmd.Refusef("the bundle's objects failed validation: %s", ge.Stderr)
		}
		return nil, fmt.Errorf("import bundle: %w", err)
	}
	typ, err := r.Git.Run(ctx, gitcmd.Cmd{Dir: dir, Env: in.env, Args: []string{"cat-file", "-t", commit}})
	if err != nil || strings.TrimSpace(string(typ)) != "commit" {
		in.Close()
		return nil, gitcmd.Refusef("the published id %s is not a commit in the bundle", commit)
	}
	return in, nil
}

// IsAncestor reports whether commit a is an ancestor of (or equal to) b,
// seeing the quarantined objects.
func (in *Incoming) IsAncestor(ctx context.Context, a, b string) (bool, error) {
	return gitcmd.IsAncestor(ctx, in.g, in.dir, in.env, a, b)
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
