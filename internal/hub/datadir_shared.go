package hub

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"

	"drover/internal/fsutil"
	"drover/internal/hubrepo"
	"drover/internal/store"
)

// Several hubs may share one data directory (on a shared file system, one
// file system for all of it: accepted objects and new repositories are
// renamed from a hub's scratch directory into repos/). Two rules make that
// safe, and single-hub directories follow them too:
//
//   - A hub's transient files (spooled request bodies, publication
//     quarantines, half-made repositories) live in its own scratch
//     directory, tmp/hub-*, locked (flock on tmp/hub-*/.lock) for the life
//     of the process. A starting hub removes the scratch directories whose
//     lock it can take: their hub died, the kernel released its lock.
//   - Work on one job's ref or one repository's creation, and the admin
//     bootstrap, hold an flock on locks/NAME.lock besides the in-process
//     queue, so two hubs take turns as two goroutines do.

const (
	tmpDir    = "tmp"   // the scratch directories
	locksDir  = "locks" // keyLocks' files
	claimLock = ".claim.lock"
	holdLock  = ".lock"
)

// keyLocks serializes work by name across goroutines and hubs on one data
// directory. Lock files go at release (fsutil.Locker.Transient): one per
// job would otherwise pile up.
type keyLocks struct {
	dir string
	l   fsutil.Locker
}

func newKeyLocks(dataDir string) keyLocks {
	return keyLocks{dir: filepath.Join(dataDir, locksDir), l: fsutil.Locker{Transient: true}}
}

// lock takes the named lock ("job:ID", "repo:PROJECT", "admin") and
// returns its release.
func (k *keyLocks) lock(ctx context.Context, name string) (func(), error) {
	if err := os.MkdirAll(k.dir, 0o700); err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	unlock, err := k.l.Lock(ctx, filepath.Join(k.dir, name+".lock"))
	if err != nil {
		return nil, fmt.Errorf("lock %s: %w", name, err)
	}
	return unlock, nil
}

// scratch is a hub's own directory for transient files.
type scratch struct {
	dir     string
	release func() // removes the directory, then drops its lock
}

// openScratch makes and locks this hub's scratch directory, and removes
// those of dead hubs (and, when no other hub is alive, what an older drover
// left in tmp/ and in the repositories). The claim lock makes "create and
// lock" one step for a sweeping hub: it never finds a live hub's directory
// not yet locked.
func openScratch(ctx context.Context, dataDir string, repos hubrepo.Repos, log *slog.Logger) (*scratch, error) {
	root := filepath.Join(dataDir, tmpDir)
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("make scratch directory: %w", err)
	}
	var locks fsutil.Locker
	unclaim, err := locks.Lock(ctx, filepath.Join(root, claimLock))
	if err != nil {
		return nil, fmt.Errorf("make scratch directory: %w", err)
	}
	defer unclaim()
	live, removed, err := removeDeadScratch(&locks, root)
	if err != nil {
		return nil, err
	}
	if live == 0 {
		n, err := removeLegacyLeftovers(root, repos)
		if err != nil {
			log.Warn("could not remove leftovers of interrupted transfers", "err", err)
		}
		removed += n
	}
	if removed > 0 {
		log.Info("removed leftovers of interrupted transfers", "count", removed)
	}
	if live > 0 {
		log.Info("sharing the data directory with other live hubs", "hubs", live, "dir", dataDir)
	}
	dir, err := os.MkdirTemp(root, "hub-")
	if err != nil {
		return nil, fmt.Errorf("make scratch directory: %w", err)
	}
	unlock, ok, err := locks.TryLock(filepath.Join(dir, holdLock))
	if err == nil && !ok {
		err = errors.New("its lock is held") // nobody else knows its name yet
	}
	if err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("lock scratch directory %s: %w", dir, err)
	}
	return &scratch{dir: dir, release: sync.OnceFunc(func() {
		os.RemoveAll(dir)
		unlock()
	})}, nil
}

// removeDeadScratch removes every scratch directory whose lock can be
// taken, and counts those whose lock is held.
func removeDeadScratch(locks *fsutil.Locker, root string) (live, removed int, err error) {
	ents, err := os.ReadDir(root)
	if err != nil {
		return 0, 0, fmt.Errorf("list scratch directories: %w", err)
	}
	for _, e := range ents {
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(root, e.Name())
		unlock, ok, err := locks.TryLock(filepath.Join(dir, holdLock))
		if err != nil {
			return 0, 0, fmt.Errorf("check scratch directory %s: %w", dir, err)
		}
		if !ok {
			live++
			continue
		}
		err = os.RemoveAll(dir)
		unlock()
		if err != nil {
			return 0, 0, fmt.Errorf("remove dead hub's scratch directory: %w", err)
		}
		removed++
	}
	return live, removed, nil
}

// removeLegacyLeftovers removes what a drover from before scratch
// directories left: spooled bodies directly in tmp/, quarantines and
// half-made repositories in repos/. Only with no other hub alive.
func removeLegacyLeftovers(root string, repos hubrepo.Repos) (int, error) {
	ents, err := os.ReadDir(root)
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return 0, fmt.Errorf("list %s: %w", root, err)
	}
	n := 0
	for _, e := range ents {
		if e.IsDir() || e.Name() == claimLock {
			continue
		}
		if err := os.Remove(filepath.Join(root, e.Name())); err != nil {
			return n, fmt.Errorf("remove leftover: %w", err)
		}
		n++
	}
	m, err := repos.RemoveLeftovers()
	return n + m, err
}

// errAdminExists: another hub on the database created the admin first.
var errAdminExists = errors.New("another hub created the admin user")

// adminExists reports whether the database has its admin user.
func (h *Hub) adminExists(ctx context.Context) (bool, error) {
	var exists bool
	if err := h.store.Read(ctx, func(tx store.Tx) error {
		v, err := tx.Meta(metaAdmin)
		if err != nil && !errors.Is(err, store.ErrNotFound) {
			return err
		}
		exists = v != ""
		return nil
	}); err != nil {
		return false, fmt.Errorf("check admin user: %w", err)
	}
	return exists, nil
}

// logAdminToken says where a hub on an existing database finds the admin
// token: here, or with the hub that started the database first.
func (h *Hub) logAdminToken() {
	path := h.AdminTokenPath()
	if _, err := os.Stat(path); err == nil {
		h.log.Info("the admin token is in a file readable only by you", "path", path)
		return
	}
	h.log.Info("the admin user exists and its token is not in this data directory: it is in admin.token in the data directory of the first hub started on this database")
}

// lostAdminRace undoes this hub's token file when a hub with another data
// directory created the admin first; a token file that is no longer ours
// (overwritten by a hub sharing the directory) stays.
func (h *Hub) lostAdminRace(path, token string) error {
	if b, err := os.ReadFile(path); err == nil && string(b) == token+"\n" {
		if err := os.Remove(path); err != nil {
			return fmt.Errorf("remove the admin token another hub's admin made stale: %w", err)
		}
	}
	h.logAdminToken()
	return nil
}
