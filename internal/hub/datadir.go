package hub

import (
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// The data directory holds every job, log, token hash and repository of
// the hub: only the hub's user may read any of it.

const dbFile = "drover.db"

// StorePath is the store of the hub whose data directory is dir, for tools
// that read it while the hub is stopped (the fault campaign's checker).
func StorePath(dir string) string { return filepath.Join(dir, dbFile) }

// privatePath is something the hub keeps in its data directory, with the
// mode it must have.
type privatePath struct {
	path string
	mode fs.FileMode
}

func privatePaths(dir string) []privatePath {
	db := StorePath(dir)
	return []privatePath{
		{dir, 0o700},
		{db, 0o600},
		{db + "-wal", 0o600},
		{db + "-shm", 0o600},
		{filepath.Join(dir, "admin.token"), 0o600},
		{filepath.Join(dir, "repos"), 0o700},
		{filepath.Join(dir, "tmp"), 0o700},
		{filepath.Join(dir, "locks"), 0o700},
	}
}

// secureDataDir creates the data directory 0700 and gives what it holds
// its mode (privatePaths) when it has another: a directory made by hand or
// by an older drover is often 0755. Each change is logged; what cannot be
// changed (another user's directory) stops the hub with the command that
// fixes it.
func secureDataDir(dir string, log *slog.Logger) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("create data directory: %w", err)
	}
	for _, p := range privatePaths(dir) {
		st, err := os.Stat(p.path)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return fmt.Errorf("check the mode of %s: %w", p.path, err)
		}
		old := st.Mode().Perm()
		if old == p.mode {
			continue
		}
		if err := os.Chmod(p.path, p.mode); err != nil {
			return fmt.Errorf("%s has mode %04o and cannot be given %04o (%v); the hub keeps secrets there: fix it with `chmod %o %s` (as its owner), or give another --data",
				p.path, old, p.mode, err, p.mode, shellQuote(p.path))
		}
		log.Warn("tightened the mode of the hub's data", "path", p.path, "was", fmt.Sprintf("%04o", old), "now", fmt.Sprintf("%04o", p.mode))
	}
	return nil
}

var shellSafe = regexp.MustCompile(`^[A-Za-z0-9_./=:,+@%-]+$`)

// shellQuote quotes s for a command an operator pastes into a shell.
func shellQuote(s string) string {
	if shellSafe.MatchString(s) {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
