// Package hubrepo is the hub's side of git: one bare repository per
// project, its refs, git http-backend over them, and the verification of
// the publications runners send as bundles.
package hubrepo

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/http/cgi"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"

	"drover/internal/gitcmd"
)

// hubRepoConfig is written into every hub repository, and passed again to
// http-backend with the safety config: pushes are validated, never delete
// or rewrite refs, runners may fetch any reachable commit by id, and dumb
// HTTP is off.
var hubRepoConfig = []string{
	"core.hooksPath=/dev/null",
	"receive.fsckObjects=true",
	"receive.denyDeletes=true",
	"receive.denyNonFastForwards=true",
	"uploadpack.allowReachableSHA1InWant=true",
	"http.getanyfile=false",
	"gc.auto=0",
}

// Repos is the hub's set of bare repositories, one per project, named
// Root/PROJECT.git.
type Repos struct {
	Root string
	Git  gitcmd.Git
	// Scratch holds half-made repositories and publication quarantines:
	// a directory of this process's own (several hubs may share Root), on
	// Root's file system. "" keeps them in Root.
	Scratch string
	// Refs, when set, moves refs through long-lived git processes.
	Refs *RefSessions
}

// scratch is the parent of a transient directory: Scratch, or fallback
// (in Root) without one.
func (r Repos) scratch(fallback string) (string, error) {
	if r.Scratch == "" {
		return fallback, nil
	}
	return r.Scratch, os.MkdirAll(r.Scratch, 0o700)
}

// Dir is the repository directory of a project.
func (r Repos) Dir(project string) string { return filepath.Join(r.Root, project+".git") }

// Exists reports whether the project has a repository on the hub.
func (r Repos) Exists(project string) bool {
	st, err := os.Stat(filepath.Join(r.Dir(project), "HEAD"))
	return err == nil && st.Mode().IsRegular()
}

// Create makes the project's bare repository unless it exists. It is built
// under a temporary name and renamed into place, so a half-made repository
// is never served. Concurrent calls for one project are safe.
func (r Repos) Create(ctx context.Context, project string) error {
	if !gitcmd.ValidProject(project) {
		return fmt.Errorf("create repository: invalid project name %q", project)
	}
	if r.Exists(project) {
		return nil
	}
	if err := os.MkdirAll(r.Root, 0o700); err != nil {
		return fmt.Errorf("create repository %s: %w", project, err)
	}
	parent, err := r.scratch(r.Root)
	if err != nil {
		return fmt.Errorf("create repository %s: %w", project, err)
	}
	tmp, err := os.MkdirTemp(parent, ".new-"+project+"-")
	if err != nil {
		return fmt.Errorf("create repository %s: %w", project, err)
	}
	defer os.RemoveAll(tmp) // gone after a successful rename
	if _, err := r.Git.Run(ctx, gitcmd.Cmd{Dir: r.Root, Args: []string{"init", "--bare", "--quiet", tmp}}); err != nil {
		return fmt.Errorf("create repository %s: %w", project, err)
	}
	for _, kv := range hubRepoConfig {
		k, v, _ := strings.Cut(kv, "=")
		if _, err := r.Git.Run(ctx, gitcmd.Cmd{Dir: tmp, Args: []string{"config", k, v}}); err != nil {
			return fmt.Errorf("configure repository %s: %w", project, err)
		}
	}
	// Sample hooks are never run (hooksPath), but need not lie around.
	_ = os.RemoveAll(filepath.Join(tmp, "hooks"))
	if err := os.Rename(tmp, r.Dir(project)); err != nil {
		if r.Exists(project) {
			return nil // another call won
		}
		return fmt.Errorf("create repository %s: %w", project, err)
	}
	return nil
}

// git runs git in the project's repository.
func (r Repos) git(ctx context.Context, project string, args ...string) (string, error) {
	return r.Git.Out(ctx, r.Dir(project), args...)
}

// HasCommit reports whether the project's repository holds commit id.
func (r Repos) HasCommit(ctx context.Context, project, id string) (bool, error) {
	return objectPresent(ctx, r.Git, r.Dir(project), nil, id+"^{commit}")
}

// objectPresent runs cat-file -e: a missing object is false, not an error.
func objectPresent(ctx context.Context, g gitcmd.Git, dir string, env []string, rev string) (bool, error) {
	_, err := g.Run(ctx, gitcmd.Cmd{Dir: dir, Env: env, Args: []string{"cat-file", "-e", rev}})
	var ge *gitcmd.Error
	if errors.As(err, &ge) && (ge.Code == 1 || ge.Code == 128) {
		return false, nil
	}
	return err == nil, err
}

// Ref returns the commit a ref points at, "" when it does not exist.
func (r Repos) Ref(ctx context.Context, project, ref string) (string, error) {
	return gitcmd.RefValue(ctx, r.Git, r.Dir(project), ref)
}

// UpdateRef moves ref from old to new atomically: it fails unless the ref
// is at old ("" means it must not exist). An empty new deletes the ref.
func (r Repos) UpdateRef(ctx context.Context, project, ref, newID, oldID string) error {
	if oldID == "" {
		oldID = gitcmd.ZeroID
	}
	if r.Refs != nil {
		if ok, err := r.Refs.Update(ctx, r.Dir(project), ref, newID, oldID); ok {
			if err != nil {
				return fmt.Errorf("update %s in %s: %w", ref, project, err)
			}
			return nil
		}
	}
	args := []string{"update-ref", "-m", "drover", ref, newID, oldID}
	if newID == "" {
		args = []string{"update-ref", "-m", "drover", "-d", ref, oldID}
	}
	if _, err := r.git(ctx, project, args...); err != nil {
		return fmt.Errorf("update %s in %s: %w", ref, project, err)
	}
	return nil
}

// ClearRefLock removes the lock file git leaves beside a loose ref when it
// is killed mid-update (REF.lock): until it is gone, every later update of
// that ref is refused. Call it only while holding the ref's cross-process
// lock, under which no git process of drover's can be updating the ref
// (users push only under UploadRefPrefix). It reports whether there was one.
func (r Repos) ClearRefLock(project, ref string) (bool, error) {
	if !strings.HasPrefix(ref, "refs/drover/") || path.Clean(ref) != ref || strings.HasSuffix(ref, ".lock") {
		return false, fmt.Errorf("clear the lock of %q: not a drover ref", ref)
	}
	err := os.Remove(filepath.Join(r.Dir(project), filepath.FromSlash(ref)+".lock"))
	switch {
	case errors.Is(err, fs.ErrNotExist) || errors.Is(err, syscall.ENOTDIR):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("clear the stale lock of %s in %s: %w", ref, project, err)
	}
	return true, nil
}

// FetchCommit fetches one commit by id from url into ref, validating every
// object. The hub uses it for a project mapped to a remote: the remote must
// be readable without credentials (the hub has none).
func (r Repos) FetchCommit(ctx context.Context, project, url, id, ref string) error {
	if _, err := r.git(ctx, project, "fetch", "--quiet", "--no-tags", "--no-write-fetch-head",
		"--no-recurse-submodules", "--end-of-options", url, "+"+id+":"+ref); err != nil {
		return fmt.Errorf("fetch %s from %s: %w", id, url, err)
	}
	return nil
}

// HTTPBackend returns a handler that runs git http-backend (smart HTTP
// only) over the repositories, with the safety config and no inherited
// environment. write enables git-receive-pack. The caller authenticates,
// authorizes, validates pushed ref names, removes credentials from the
// request and sets its path to /PROJECT.git/SERVICE-PATH.
func (r Repos) HTTPBackend(write bool, stderr io.Writer) (http.Handler, error) {
	bin := r.Git.Bin
	if bin == "" {
		p, err := exec.LookPath("git")
		if err != nil {
			return nil, fmt.Errorf("find git for http-backend: %w", err)
		}
		bin = p
	}
	// allowFilter serves runners of large projects partial clones; their
	// later fetches of single blobs by id are reachable wants.
	cfg := append(append([]string{}, hubRepoConfig...), "uploadpack.allowFilter=true", "http.uploadpack=true", "http.receivepack="+strconv.FormatBool(write))
	env := r.Git.ConfigEnviron(cfg)
	env = append(env, "GIT_PROJECT_ROOT="+r.Root, "GIT_HTTP_EXPORT_ALL=1")
	return &cgi.Handler{Path: bin, Args: []string{"http-backend"}, Dir: r.Root, Env: env, Stderr: stderr}, nil
}

// Projects lists the projects that have a repository on the hub.
func (r Repos) Projects() ([]string, error) {
	ents, err := os.ReadDir(r.Root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list repositories: %w", err)
	}
	var out []string
	for _, e := range ents {
		if name, ok := strings.CutSuffix(e.Name(), ".git"); ok && e.IsDir() && gitcmd.ValidProject(name) {
			out = append(out, name)
		}
	}
	return out, nil
}

// RemoveLeftovers deletes what a crash can leave behind in Root (without a
// Scratch, or from before one): half-made repositories and the quarantines
// of publications being verified. Call it only while nothing else uses the
// repositories (at start, with no other hub alive).
func (r Repos) RemoveLeftovers() (int, error) {
	var paths []string
	for _, pattern := range []string{filepath.Join(r.Root, ".new-*"), filepath.Join(r.Root, "*.git", "objects", "incoming-*")} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			return 0, fmt.Errorf("find leftovers: %w", err)
		}
		paths = append(paths, m...)
	}
	for _, p := range paths {
		if err := os.RemoveAll(p); err != nil {
			return 0, fmt.Errorf("remove leftover %s: %w", p, err)
		}
	}
	return len(paths), nil
}

// errDiffCut stops a diff at its bound.
var errDiffCut = errors.New("diff cut at its bound")

// cutWriter keeps the first max bytes and then fails, so git stops.
type cutWriter struct {
	b   bytes.Buffer
	max int
	cut bool
}

func (w *cutWriter) Write(p []byte) (int, error) {
	if room := w.max - w.b.Len(); len(p) > room {
		w.b.Write(p[:room])
		w.cut = true
		return room, errDiffCut
	}
	return w.b.Write(p)
}

// Diff is the change from base to head in a project's repository (its
// --stat, then the patch, as git prints them with no external diff or
// textconv), at most max bytes of it; cut says it was longer.
func (r Repos) Diff(ctx context.Context, project, base, head string, max int) (patch []byte, cut bool, err error) {
	w := &cutWriter{max: max}
	_, err = r.Git.Run(ctx, gitcmd.Cmd{Dir: r.Dir(project), Stdout: w,
		Args: []string{"diff", "--no-ext-diff", "--no-textconv", "--no-color", "--stat", "--patch", base, head, "--"}})
	if err != nil && !w.cut {
		return nil, false, fmt.Errorf("diff %s..%s of %s: %w", gitcmd.Short(base), gitcmd.Short(head), project, err)
	}
	return w.b.Bytes(), w.cut, nil
}
