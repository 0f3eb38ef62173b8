package runner

import (
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"time"

	"drover/internal/gitcmd"
	"drover/internal/protocol"
	"drover/internal/sandbox"
)

// attemptCaches are a project's caches on this runner, mounted into one
// attempt's sandbox.
type attemptCaches struct {
	names []string
	dirs  []string // host directories, mounted at the same path
	env   []string // NAME=VALUE pointing the tools at them
}

func (r *Runner) cacheRoot() string { return cachesDir(r.cfg.Home) }

// cachesDir holds a runner home's project caches, one folder per project.
func cachesDir(home string) string { return filepath.Join(home, "caches") }

// setupKeysDir holds the keys of a project's setups that succeeded.
func setupKeysDir(home, project string) string { return filepath.Join(home, "setup-keys", project) }

// openCaches makes (or finds) the project's cache directories: one folder
// per project under the runner's home, so that no other project's sandbox
// ever has them.
func (r *Runner) openCaches(project string, names []string) (*attemptCaches, error) {
	if !gitcmd.ValidProject(project) {
		return nil, fmt.Errorf("project name %q is not valid", project)
	}
	// Under cacheMu, so that the budget never removes what an attempt is
	// about to use (trimCaches).
	r.cacheMu.Lock()
	defer r.cacheMu.Unlock()
	base := filepath.Join(r.cacheRoot(), project)
	ac := &attemptCaches{env: []string{"DROVER_CACHE_DIR=" + base}}
	for _, name := range names {
		if err := protocol.CheckCacheName(name); err != nil {
			return nil, err
		}
		dir := filepath.Join(base, name)
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return nil, fmt.Errorf("make cache %s of project %s: %w", name, project, err)
		}
		ac.names, ac.dirs = append(ac.names, name), append(ac.dirs, dir)
		vars, _ := protocol.CacheVars(name)
		for _, v := range vars {
			val := dir
			switch v {
			case "GOMODCACHE":
				val = filepath.Join(dir, "mod")
			case "GOCACHE":
				val = filepath.Join(dir, "build")
			}
			ac.env = append(ac.env, v+"="+val)
		}
	}
	// The folder's time says when the project last used its caches: the
	// budget removes the least recently used first. No sandbox has the
	// folder itself, only the caches in it.
	if err := os.MkdirAll(base, 0o700); err != nil {
		return nil, fmt.Errorf("make the caches of project %s: %w", project, err)
	}
	now := r.now()
	if err := os.Chtimes(base, now, now); err != nil {
		return nil, fmt.Errorf("mark the caches of project %s used: %w", project, err)
	}
	return ac, nil
}

// policy mounts the caches read-write and lets their variables through.
func (ac *attemptCaches) policy(p *sandbox.Policy) {
	for _, d := range ac.dirs {
		p.ReadWrite = append(p.ReadWrite[:len(p.ReadWrite):len(p.ReadWrite)], sandbox.Mount{Src: d, Dst: d})
	}
	for _, kv := range ac.env {
		name, _, _ := strings.Cut(kv, "=")
		p.Env = append(p.Env[:len(p.Env):len(p.Env)], name)
	}
}

// CacheUsage is the bytes the runner's project caches hold on disk, per
// project: part of what the runner's home uses.
func (r *Runner) CacheUsage() (map[string]int64, error) { return cacheUsage(r.cacheRoot()) }

func cacheUsage(root string) (map[string]int64, error) {
	entries, err := os.ReadDir(root)
	if errors.Is(err, os.ErrNotExist) {
		return map[string]int64{}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("list project caches: %w", err)
	}
	out := map[string]int64{}
	for _, e := range entries {
		var n int64
		err := filepath.WalkDir(filepath.Join(root, e.Name()), func(_ string, d os.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if fi, err := d.Info(); err == nil && fi.Mode().IsRegular() {
				n += fi.Size()
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("measure the caches of project %s: %w", e.Name(), err)
		}
		out[e.Name()] = n
	}
	return out, nil
}

// trimCaches keeps the project caches within the runner's budget
// (Config.ProjectCacheSize): it removes whole projects' caches, least
// recently used first, never those of a project an attempt of this runner
// holds, and with them the project's remembered setups (which relied on
// them).
func (r *Runner) trimCaches() {
	if r.cfg.ProjectCacheSize <= 0 {
		return
	}
	inUse := func(project string) bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		for _, a := range r.attempts {
			if a.spec.Repo != nil && a.spec.Repo.Project == project {
				return true
			}
		}
		return false
	}
	r.cacheMu.Lock()
	_, err := trimCaches(r.cfg.Home, r.cfg.ProjectCacheSize, inUse, r.now, r.log)
	r.cacheMu.Unlock()
	if err != nil {
		r.log.Warn("keep project caches within their budget", "err", err)
	}
	// What was moved aside is deleted outside the lock: a large cache
	// takes a while.
	if err := os.RemoveAll(cacheTrash(r.cfg.Home)); err != nil {
		r.log.Warn("delete removed project caches", "err", err)
	}
}

func cacheTrash(home string) string { return filepath.Join(home, "caches-removed") }

// trimCaches moves aside, into cacheTrash, the caches of the least
// recently used projects not inUse until those left take at most budget
// bytes, and forgets those projects' setups. The caller holds cacheMu.
func trimCaches(home string, budget int64, inUse func(string) bool, now func() time.Time, log *slog.Logger) ([]string, error) {
	root := cachesDir(home)
	use, err := cacheUsage(root)
	if err != nil {
		return nil, err
	}
	type project struct {
		name string
		used time.Time
		size int64
	}
	var total int64
	var ps []project
	for name, size := range use {
		total += size
		fi, err := os.Stat(filepath.Join(root, name))
		if err != nil {
			continue
		}
		ps = append(ps, project{name: name, used: fi.ModTime(), size: size})
	}
	if total <= budget {
		return nil, nil
	}
	sort.Slice(ps, func(i, j int) bool { return ps[i].used.Before(ps[j].used) })
	var removed []string
	var freed int64
	for _, p := range ps {
		if total-freed <= budget {
			break
		}
		if inUse(p.name) {
			continue
		}
		if err := os.MkdirAll(cacheTrash(home), 0o700); err != nil {
			return removed, fmt.Errorf("remove the caches of project %s: %w", p.name, err)
		}
		// Setups first: a remembered setup without its caches would be
		// skipped with nothing in place.
		if err := os.RemoveAll(setupKeysDir(home, p.name)); err != nil {
			return removed, fmt.Errorf("forget the setups of project %s: %w", p.name, err)
		}
		aside := filepath.Join(cacheTrash(home), p.name+"."+strconv.FormatInt(now().UnixNano(), 36))
		if err := os.Rename(filepath.Join(root, p.name), aside); err != nil {
			return removed, fmt.Errorf("remove the caches of project %s: %w", p.name, err)
		}
		freed += p.size
		removed = append(removed, p.name)
	}
	if len(removed) > 0 {
		log.Info("removed project caches to keep within their budget", "budget", budget, "used", total, "freed", freed,
			"projects", strings.Join(removed, ","))
	}
	if left := total - freed; left > budget {
		log.Warn("project caches over their budget: the rest are in use", "budget", budget, "used", left)
	}
	return removed, nil
}
