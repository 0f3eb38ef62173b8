package workspace

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
	"regexp"
	"strconv"
	"strings"
	"syscall"
)

// Refs the hub keeps in a project's repository.
const (
	UploadRefPrefix     = "refs/drover/uploads/"     // users push sources here (and nowhere else)
	JobRefPrefix        = "refs/drover/jobs/"        // a job's head: its base, then each publication
	CheckpointRefPrefix = "refs/drover/checkpoints/" // JOB/N: the head at checkpoint N
)

// ZeroID is git's "no object" id, the old value of a ref that must not exist.
const ZeroID = "0000000000000000000000000000000000000000"

// JobRef is the ref holding a job's head.
func JobRef(jobID string) string { return JobRefPrefix + jobID }

// CheckpointRef is the ref of a job's checkpoint n (from 1).
func CheckpointRef(jobID string, n int) string {
	return CheckpointRefPrefix + jobID + "/" + strconv.Itoa(n)
}

var (
	projectNameRE = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
	commitIDRE    = regexp.MustCompile(`^[0-9a-f]{40}$`)
	uploadNameRE  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,127}$`)
)

// ValidProject reports whether name can be a project: 1-64 lower-case
// letters, digits and ._-, not ending in .git or .lock (the repository
// directory is NAME.git).
func ValidProject(name string) bool {
	return projectNameRE.MatchString(name) && !strings.HasSuffix(name, ".git") &&
		!strings.HasSuffix(name, ".lock") && !strings.Contains(name, "..")
}

// ValidCommitID reports whether s is a full, lower-case SHA-1 commit id.
func ValidCommitID(s string) bool { return commitIDRE.MatchString(s) }

// ValidUploadRef reports whether ref is a ref users may push:
// refs/drover/uploads/NAME with one plain path component.
func ValidUploadRef(ref string) bool {
	name, ok := strings.CutPrefix(ref, UploadRefPrefix)
	// Not ending in "." either (found by FuzzNames): git check-ref-format
	// refuses such a ref, so the hub let through a push git then failed.
	return ok && uploadNameRE.MatchString(name) && !strings.HasSuffix(name, ".lock") &&
		!strings.HasSuffix(name, ".") && !strings.Contains(name, "..")
}

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

// HubRepos is the hub's set of bare repositories, one per project, named
// Root/PROJECT.git.
type HubRepos struct {
	Root string
	Git  Git
	// Scratch holds half-made repositories and publication quarantines:
	// a directory of this process's own (several hubs may share Root), on
	// Root's file system. "" keeps them in Root.
	Scratch string
}

// scratch is the parent of a transient directory: Scratch, or fallback
// (in Root) without one.
func (r HubRepos) scratch(fallback string) (string, error) {
	if r.Scratch == "" {
		return fallback, nil
	}
	return r.Scratch, os.MkdirAll(r.Scratch, 0o700)
}

// Dir is the repository directory of a project.
func (r HubRepos) Dir(project string) string { return filepath.Join(r.Root, project+".git") }

// Exists reports whether the project has a repository on the hub.
func (r HubRepos) Exists(project string) bool {
	st, err := os.Stat(filepath.Join(r.Dir(project), "HEAD"))
	return err == nil && st.Mode().IsRegular()
}

// Create makes the project's bare repository unless it exists. It is built
// under a temporary name and renamed into place, so a half-made repository
// is never served. Concurrent calls for one project are safe.
func (r HubRepos) Create(ctx context.Context, project string) error {
	if !ValidProject(project) {
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
	if _, err := r.Git.Run(ctx, Cmd{Dir: r.Root, Args: []string{"init", "--bare", "--quiet", tmp}}); err != nil {
		return fmt.Errorf("create repository %s: %w", project, err)
	}
	for _, kv := range hubRepoConfig {
		k, v, _ := strings.Cut(kv, "=")
		if _, err := r.Git.Run(ctx, Cmd{Dir: tmp, Args: []string{"config", k, v}}); err != nil {
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
func (r HubRepos) git(ctx context.Context, project string, args ...string) (string, error) {
	return r.Git.Out(ctx, r.Dir(project), args...)
}

// HasCommit reports whether the project's repository holds commit id.
func (r HubRepos) HasCommit(ctx context.Context, project, id string) (bool, error) {
	return objectPresent(ctx, r.Git, r.Dir(project), nil, id+"^{commit}")
}

// objectPresent runs cat-file -e: a missing object is false, not an error.
func objectPresent(ctx context.Context, g Git, dir string, env []string, rev string) (bool, error) {
	_, err := g.Run(ctx, Cmd{Dir: dir, Env: env, Args: []string{"cat-file", "-e", rev}})
	var ge *Error
	if errors.As(err, &ge) && (ge.Code == 1 || ge.Code == 128) {
		return false, nil
	}
	return err == nil, err
}

// Ref returns the commit a ref points at, "" when it does not exist.
func (r HubRepos) Ref(ctx context.Context, project, ref string) (string, error) {
	return refValue(ctx, r.Git, r.Dir(project), ref)
}

func refValue(ctx context.Context, g Git, dir, ref string) (string, error) {
	out, err := g.Out(ctx, dir, "rev-parse", "--quiet", "--verify", "--end-of-options", ref+"^{commit}")
	var ge *Error
	if errors.As(err, &ge) && ge.Code == 1 {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read ref %s: %w", ref, err)
	}
	return out, nil
}

// UpdateRef moves ref from old to new atomically: it fails unless the ref
// is at old ("" means it must not exist). An empty new deletes the ref.
func (r HubRepos) UpdateRef(ctx context.Context, project, ref, newID, oldID string) error {
	if oldID == "" {
		oldID = ZeroID
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
func (r HubRepos) ClearRefLock(project, ref string) (bool, error) {
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
func (r HubRepos) FetchCommit(ctx context.Context, project, url, id, ref string) error {
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
func (r HubRepos) HTTPBackend(write bool, stderr io.Writer) (http.Handler, error) {
	bin := r.Git.Bin
	if bin == "" {
		p, err := exec.LookPath("git")
		if err != nil {
			return nil, fmt.Errorf("find git for http-backend: %w", err)
		}
		bin = p
	}
	cfg := append(append([]string{}, safetyConfig...), hubRepoConfig...)
	// allowFilter serves runners of large projects partial clones; their
	// later fetches of single blobs by id are reachable wants.
	cfg = append(cfg, "uploadpack.allowFilter=true", "http.uploadpack=true", "http.receivepack="+strconv.FormatBool(write))
	env := r.Git.env(configEnv(cfg))
	env = append(env, "GIT_PROJECT_ROOT="+r.Root, "GIT_HTTP_EXPORT_ALL=1")
	return &cgi.Handler{Path: bin, Args: []string{"http-backend"}, Dir: r.Root, Env: env, Stderr: stderr}, nil
}

// configEnv passes config through the environment (GIT_CONFIG_COUNT),
// for git processes whose arguments drover does not choose.
func configEnv(kvs []string) []string {
	env := []string{"GIT_CONFIG_COUNT=" + strconv.Itoa(len(kvs))}
	for i, kv := range kvs {
		k, v, _ := strings.Cut(kv, "=")
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, k), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, v))
	}
	return env
}

// Projects lists the projects that have a repository on the hub.
func (r HubRepos) Projects() ([]string, error) {
	ents, err := os.ReadDir(r.Root)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list repositories: %w", err)
	}
	var out []string
	for _, e := range ents {
		if name, ok := strings.CutSuffix(e.Name(), ".git"); ok && e.IsDir() && ValidProject(name) {
			out = append(out, name)
		}
	}
	return out, nil
}

// RemoveLeftovers deletes what a crash can leave behind in Root (without a
// Scratch, or from before one): half-made repositories and the quarantines
// of publications being verified. Call it only while nothing else uses the
// repositories (at start, with no other hub alive).
func (r HubRepos) RemoveLeftovers() (int, error) {
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
func (r HubRepos) Diff(ctx context.Context, project, base, head string, max int) (patch []byte, cut bool, err error) {
	w := &cutWriter{max: max}
	_, err = r.Git.Run(ctx, Cmd{Dir: r.Dir(project), Stdout: w,
		Args: []string{"diff", "--no-ext-diff", "--no-textconv", "--no-color", "--stat", "--patch", base, head, "--"}})
	if err != nil && !w.cut {
		return nil, false, fmt.Errorf("diff %s..%s of %s: %w", short(base), short(head), project, err)
	}
	return w.b.Bytes(), w.cut, nil
}
