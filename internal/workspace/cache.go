// Package workspace is the runner's side of git: one clone per project,
// the worktrees attempts work in (prepared fresh, resumed, or reset from a
// pool), and the publications made from them as bundles. Every git call
// goes through gitcmd; untrusted repository content never runs here.
package workspace

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"drover/internal/fsutil"
	"drover/internal/gitcmd"
	"drover/internal/protocol"
)

// DefaultPoolSize is how many finished worktrees a runner keeps per
// repository, ready to be reset to a new job's base.
const DefaultPoolSize = 2

// Cache is the runner's side of workspaces: one bare clone per project
// under HOME/repos, and the worktrees made from it under HOME/trees, one per
// job (kept between its attempts) or pooled for the next job. Every
// operation on a clone is serialized by an in-process queue and an flock, so
// that several slots, and several runner processes sharing one home, never
// race on it.
type Cache struct {
	git      gitcmd.Git
	home     string
	log      *slog.Logger
	poolSize int
	// remoteEnv is the runner user's git credentials, for mapped remotes.
	remoteEnv []string
	locks     fsutil.Locker
	idle      *idleMonitors
	now       func() time.Time
	// pause, tests only, runs inside critical sections to widen the races
	// the locks close.
	pause func()
}

// CacheConfig configures a Cache.
type CacheConfig struct {
	Home     string // runner home; repos/ and trees/ are made in it
	Git      gitcmd.Git
	Logger   *slog.Logger
	PoolSize int // finished worktrees kept per repository: 0 means DefaultPoolSize, negative none
	// RemoteEnv is what a fetch from a mapped remote gets to use the runner
	// user's own git credentials (see OwnCredentialEnv); fetches from the
	// hub never get it.
	RemoteEnv []string
}

// NewCache makes the cache's folders.
func NewCache(cfg CacheConfig) (*Cache, error) {
	home, err := filepath.Abs(cfg.Home)
	if err != nil || cfg.Home == "" {
		return nil, fmt.Errorf("workspace cache needs a home: %q", cfg.Home)
	}
	for _, d := range []string{"repos", "trees"} {
		if err := os.MkdirAll(filepath.Join(home, d), 0o700); err != nil {
			return nil, fmt.Errorf("make workspace cache: %w", err)
		}
	}
	pool := cfg.PoolSize
	switch {
	case pool == 0:
		pool = DefaultPoolSize
	case pool < 0:
		pool = 0
	}
	log := cfg.Logger
	if log == nil {
		log = slog.Default()
	}
	return &Cache{git: cfg.Git, home: home, log: log, poolSize: pool, remoteEnv: cfg.RemoteEnv, now: time.Now,
		idle: &idleMonitors{byDir: map[string]idleMonitor{}}, pause: func() {}}, nil
}

// Source says where a job's commits come from.
type Source struct {
	Project string
	URL     string // the hub's {hub}/git/{project}, or the project's mapped remote
	// Token authenticates to the hub (runner token). Empty for a mapped
	// remote, which is fetched with the runner user's own credentials.
	Token  string
	Remote bool
	// Large fetches a hub project as a partial clone (--filter=blob:none):
	// blobs come from the hub, with Token, only when git needs them.
	Large bool
	// Sparse, when not empty, makes the job's worktree a cone-mode sparse
	// checkout of these folders (checked by protocol.CheckSparsePaths).
	Sparse []string
	// Base is the job's base commit ("" if unknown): past it, a sparse
	// folder the head lacks stays in the cone instead of being refused.
	Base string
}

// SourceOf is the source of a job's repository; token is the runner's.
func SourceOf(spec *protocol.RepoSpec, token string) Source {
	s := Source{Project: spec.Project, URL: spec.URL, Remote: spec.Remote, Large: spec.Large && !spec.Remote, Sparse: spec.Sparse, Base: spec.Base}
	if !spec.Remote {
		s.Token = token
	}
	return s
}

// OwnCredentialEnv is the part of the runner user's environment through
// which git finds their credentials for a mapped remote: the home with its
// global config (credential helpers, url rewrites, ~/.ssh, ~/.netrc), the
// ssh agent, an operator's ssh command and proxies. Nothing of it reaches
// a job.
func OwnCredentialEnv(getenv func(string) string) []string {
	var env []string
	if home := getenv("HOME"); home != "" {
		env = append(env, "HOME="+home, "GIT_CONFIG_GLOBAL="+filepath.Join(home, ".gitconfig"))
	}
	for _, name := range []string{"SSH_AUTH_SOCK", "GIT_SSH_COMMAND", "HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY", "no_proxy"} {
		if v := getenv(name); v != "" {
			env = append(env, name+"="+v)
		}
	}
	return env
}

// repo is the on-disk layout of one project's clone and worktrees.
type repo struct {
	project string
	dir     string // HOME/repos/NAME.git, the bare clone
	trees   string // HOME/trees/NAME: worktrees, their records, locks and saved indexes
	locks   string // HOME/repos/NAME: prefix of the lock files
	// git runs git on the clone and its worktrees: for a partial clone it
	// carries the hub token (environment only), since any call may need
	// a missing blob from the promisor, which the clone's config names.
	git      gitcmd.Git
	promisor string // URL of the hub a partial clone fetches blobs from; "" for a whole clone
}

func (r repo) lockPath(kind string) string { return r.locks + "." + kind + ".lock" }

func (c *Cache) repoOf(project string) (repo, error) {
	if !gitcmd.ValidProject(project) {
		return repo{}, fmt.Errorf("project name %q is not valid", project)
	}
	return repo{
		project: project,
		dir:     filepath.Join(c.home, "repos", project+".git"),
		trees:   filepath.Join(c.home, "trees", project),
		locks:   filepath.Join(c.home, "repos", project),
		git:     c.git,
	}, nil
}

// promisorRemote names the hub in a partial clone's config.
const promisorRemote = "drover-hub"

// withSource makes r fetch from src: a hub project marked large, or a clone
// already partial (the project was large once: its missing blobs are still
// needed), is a partial clone, whose every git call gets the token.
func (r repo) withSource(src Source) (repo, error) {
	if src.Remote || !(src.Large || isPartial(r.dir)) {
		return r, nil
	}
	if src.URL == "" || strings.ContainsAny(src.URL, "\"\\\n\x00") {
		return r, fmt.Errorf("partial clone of %s: the hub URL %q cannot be written to the clone's config", r.project, src.URL)
	}
	r.promisor = src.URL
	r.git.Env = append(slices.Clip(r.git.Env), gitcmd.HeaderEnv(src.Token)...)
	return r, nil
}

// isPartial reports whether a clone holds packs fetched with a filter.
func isPartial(dir string) bool {
	m, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "*.promisor"))
	return len(m) > 0
}

// withLock runs f holding the repository's lock of one kind.
func (c *Cache) withLock(ctx context.Context, r repo, kind string, f func() error) error {
	unlock, err := c.locks.Lock(ctx, r.lockPath(kind))
	if err != nil {
		return err
	}
	defer unlock()
	return f()
}

// The files that make a clone safe to use, rewritten whenever they differ:
// an agent can write to the clone (it commits through its worktree), and
// what it writes there must not reach the runner's next git call.
var (
	// core.bare lives in the main worktree's config.worktree, or every
	// linked worktree would believe it is bare (extensions.worktreeConfig).
	cloneConfig = `[core]
	repositoryformatversion = 1
	filemode = true
	symlinks = true
	logallrefupdates = false
[extensions]
	worktreeConfig = true
[gc]
	auto = 0
`
	cloneWorktreeConfig = []byte("[core]\n\tbare = true\n")
	// info/attributes wins over every .gitattributes: no filter driver
	// runs, whatever a tree or an agent declares.
	cloneAttributes = []byte("* -filter\n")
)

// ensureClone makes the project's bare clone if it is missing. It is built
// aside and renamed into place, so a crash never leaves half a clone. Call
// with the clone lock held.
func (c *Cache) ensureClone(ctx context.Context, r repo) error {
	if _, err := os.Stat(filepath.Join(r.dir, "HEAD")); err == nil {
		return c.sanitize(r)
	}
	c.pause()
	if err := os.MkdirAll(filepath.Dir(r.dir), 0o700); err != nil {
		return fmt.Errorf("make clone of %s: %w", r.project, err)
	}
	tmp, err := os.MkdirTemp(filepath.Dir(r.dir), ".new-")
	if err != nil {
		return fmt.Errorf("make clone of %s: %w", r.project, err)
	}
	defer os.RemoveAll(tmp)
	if _, err := c.git.Run(ctx, gitcmd.Cmd{Dir: tmp, Args: []string{"init", "--quiet", "--bare", tmp}}); err != nil {
		return fmt.Errorf("make clone of %s: %w", r.project, err)
	}
	if err := c.sanitize(repo{project: r.project, dir: tmp, promisor: r.promisor}); err != nil {
		return err
	}
	if err := os.Rename(tmp, r.dir); err != nil {
		return fmt.Errorf("make clone of %s: %w", r.project, err)
	}
	c.log.Info("made repository cache", "project", r.project, "dir", r.dir)
	return nil
}

// sanitize rewrites the clone's config and attributes to drover's own and
// removes what could change how git reads history (grafts, shallow,
// alternates) or which files it sees (exclude, sparse-checkout).
func (c *Cache) sanitize(r repo) error {
	cfg := cloneConfig
	if r.promisor != "" {
		// The URL was checked by withSource: no quote, backslash or newline.
		cfg += fmt.Sprintf("[extensions]\n\tpartialClone = %s\n[remote %q]\n\turl = \"%s\"\n\tpromisor = true\n\tpartialCloneFilter = blob:none\n",
			promisorRemote, promisorRemote, r.promisor)
	}
	for name, want := range map[string][]byte{
		"config":          []byte(cfg),
		"config.worktree": cloneWorktreeConfig,
		"info/attributes": cloneAttributes,
	} {
		if err := ensureFile(filepath.Join(r.dir, name), want); err != nil {
			return fmt.Errorf("sanitize clone of %s: %w", r.project, err)
		}
	}
	info, err := os.ReadDir(filepath.Join(r.dir, "info"))
	if err != nil {
		return fmt.Errorf("sanitize clone of %s: %w", r.project, err)
	}
	var extra []string
	for _, e := range info {
		if e.Name() != "attributes" {
			extra = append(extra, filepath.Join("info", e.Name()))
		}
	}
	extra = append(extra, "shallow", "objects/info/alternates", "objects/info/http-alternates")
	for _, p := range extra {
		if err := os.RemoveAll(filepath.Join(r.dir, p)); err != nil {
			return fmt.Errorf("sanitize clone of %s: %w", r.project, err)
		}
	}
	return nil
}

// hasCommit reports whether the clone holds commit.
func (c *Cache) hasCommit(ctx context.Context, r repo, commit string) bool {
	_, err := r.git.Run(ctx, gitcmd.Cmd{Dir: r.dir, Args: []string{"cat-file", "-e", commit + "^{commit}"}})
	return err == nil
}

// ensureCommit fetches commit by its id unless the clone already holds it.
// Objects are validated (fetch.fsckObjects) as they arrive. Call with the
// clone lock held.
func (c *Cache) ensureCommit(ctx context.Context, r repo, src Source, commit string) error {
	if c.hasCommit(ctx, r, commit) {
		return nil
	}
	if src.URL == "" {
		return fmt.Errorf("commit %s is not in the cache of %s and the job names no URL to fetch it from", commit, r.project)
	}
	start := c.now()
	args := []string{"fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules", src.URL, commit}
	cmd := gitcmd.Cmd{Dir: r.dir, Args: args, Env: gitcmd.HeaderEnv(src.Token)}
	switch {
	case src.Remote:
		cmd.Env, cmd.OwnCredentials = c.remoteEnv, true
	case r.promisor != "":
		// Only the remote named in extensions.partialClone may filter;
		// r.git already carries the token.
		cmd.Args = []string{"fetch", "--quiet", "--no-tags", "--no-write-fetch-head", "--no-recurse-submodules", "--filter=blob:none", promisorRemote, commit}
		cmd.Env = nil
	}
	if _, err := r.git.Run(ctx, cmd); err != nil {
		return fmt.Errorf("fetch %s from %s: %w", commit, src.URL, err)
	}
	if !c.hasCommit(ctx, r, commit) {
		return fmt.Errorf("fetch %s from %s: the commit is still missing", commit, src.URL)
	}
	c.log.Info("fetched commit", "project", r.project, "commit", commit, "url", src.URL, "took", c.now().Sub(start).Round(time.Millisecond))
	return nil
}

func checkCommitID(id string) error {
	if !gitcmd.ValidCommitID(id) {
		return fmt.Errorf("%q is not a full commit id", id)
	}
	return nil
}

var jobPattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,63}$`)

func checkJobID(job string) error {
	if !jobPattern.MatchString(job) {
		return fmt.Errorf("job id %q is not valid", job)
	}
	return nil
}

// stopwatch logs, at debug level, how long each phase of an operation took.
func (c *Cache) stopwatch(op string, attrs ...any) func(phase string) {
	last := c.now()
	return func(phase string) {
		now := c.now()
		c.log.Debug(op, append([]any{"phase", phase, "took", now.Sub(last).Round(time.Millisecond)}, attrs...)...)
		last = now
	}
}

// Kinds of operation on a runner clone, each with its own lock file
// (HOME/repos/PROJECT.KIND.lock), so that a fetch does not wait for a
// worktree registration and vice versa.
const (
	lockClone = "clone" // create, fetch, write objects and refs, sanitize config
	lockTrees = "trees" // the worktree registry: add, remove, prune, records and the pool
)
