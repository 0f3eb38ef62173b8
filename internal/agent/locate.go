package agent

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// Binary is a vendor CLI found on the runner's machine: the path to start
// and the host directories a sandbox must show, read-only, for it to run.
type Binary struct {
	Name string
	Path string // absolute, symlinks resolved
	// Mounts are directories outside the sandbox's system directories the
	// CLI needs: for an npm install, the whole node_modules tree (launchers
	// such as codex.js start a native binary from a sibling package).
	Mounts []string
}

// ErrNotInstalled is a CLI found in no directory of the search path.
var ErrNotInstalled = errors.New("not installed")

// systemPrefixes are visible in every sandbox already.
var systemPrefixes = []string{"/usr/", "/bin/", "/sbin/", "/lib/", "/lib64/"}

// Locate finds the executable cli in the directories of path (a PATH-style
// list) and what a sandbox must mount for it.
func Locate(cli, path string) (Binary, error) {
	for _, dir := range filepath.SplitList(path) {
		if dir == "" || !filepath.IsAbs(dir) {
			continue // a relative PATH entry would depend on the runner's cwd
		}
		p := filepath.Join(dir, cli)
		st, err := os.Stat(p)
		if err != nil || st.IsDir() || st.Mode()&0o111 == 0 {
			continue
		}
		real, err := filepath.EvalSymlinks(p)
		if err != nil {
			return Binary{}, fmt.Errorf("resolve %s: %w", p, err)
		}
		b := Binary{Name: cli, Path: real}
		if m := mountFor(real); m != "" {
			b.Mounts = []string{m}
		}
		return b, nil
	}
	return Binary{}, fmt.Errorf("%s: %w (searched %s)", cli, ErrNotInstalled, path)
}

// mountFor is the directory to mount for the executable at real: the
// outermost node_modules holding it, else its own directory; "" when a
// system directory holds it.
func mountFor(real string) string {
	for _, p := range systemPrefixes {
		if strings.HasPrefix(real, p) && !strings.Contains(real, "/node_modules/") {
			return ""
		}
	}
	if i := strings.Index(real, "/node_modules/"); i >= 0 {
		return real[:i+len("/node_modules")]
	}
	return filepath.Dir(real)
}
