package workspace

import (
	"cmp"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io/fs"
	"log/slog"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"

	"drover/internal/gitcmd"
)

// cacheFixture is a source repository (a plain non-bare one, served over
// file://) and a runner Cache, for the runner-side tests.
type cacheFixture struct {
	t     *testing.T
	ctx   context.Context
	src   string // source working tree
	home  string
	cache *Cache
	wrote bool // the last bothResets' narrowed reset wrote the files itself
}

func newCacheFixture(t *testing.T) *cacheFixture {
	t.Helper()
	f := &cacheFixture{t: t, ctx: t.Context(), src: filepath.Join(t.TempDir(), "src"), home: filepath.Join(t.TempDir(), "home")}
	f.sh(f.src, "git init --quiet "+f.src)
	f.cache = f.newCache(f.home)
	return f
}

func (f *cacheFixture) newCache(home string) *Cache {
	f.t.Helper()
	c, err := NewCache(CacheConfig{Home: home, Logger: slog.New(slog.NewTextHandler(f.t.Output(), nil))})
	if err != nil {
		f.t.Fatal(err)
	}
	return c
}

func (f *cacheFixture) source() Source { return Source{Project: "proj", URL: "file://" + f.src} }

// git runs a test's own git command (not the code under test) with a
// fixed identity.
func (f *cacheFixture) git(dir string, args ...string) string {
	f.t.Helper()
	out, err := gitcmd.Git{Env: []string{"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t"}}.
		Run(f.ctx, gitcmd.Cmd{Dir: dir, Args: args})
	if err != nil {
		f.t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// sh runs a shell command in dir: agents and attackers use plain git,
// hooks and all, so these do not go through Git.
func (f *cacheFixture) sh(dir, script string) string {
	f.t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		f.t.Fatal(err)
	}
	out, err := shell(f.ctx, dir, script)
	if err != nil {
		f.t.Fatalf("%s: %v\n%s", script, err, out)
	}
	return strings.TrimSpace(out)
}

// commit writes files into the source (content "" deletes; a value
// starting with "->" makes a symlink; a name ending in "*" is executable)
// and commits them all.
func (f *cacheFixture) commit(files map[string]string) string {
	f.t.Helper()
	// Deletions ("") first, so that a file deleted makes way for a folder
	// of the same name whatever the map's order.
	names := slices.Sorted(maps.Keys(files))
	slices.SortStableFunc(names, func(a, b string) int {
		return cmp.Compare(min(len(files[a]), 1), min(len(files[b]), 1))
	})
	for _, name := range names {
		content := files[name]
		mode := os.FileMode(0o644)
		if n, ok := strings.CutSuffix(name, "*"); ok {
			name, mode = n, 0o755
		}
		p := filepath.Join(f.src, name)
		os.Remove(p)
		if content == "" {
			continue
		}
		noErr(f.t, os.MkdirAll(filepath.Dir(p), 0o755))
		if target, ok := strings.CutPrefix(content, "->"); ok {
			noErr(f.t, os.Symlink(target, p))
			continue
		}
		noErr(f.t, os.WriteFile(p, []byte(content), mode))
		noErr(f.t, os.Chmod(p, mode))
	}
	f.git(f.src, "add", "--all", "--force") // what a test commits is meant to be tracked
	f.git(f.src, "commit", "--quiet", "--allow-empty", "-m", "test commit")
	return f.git(f.src, "rev-parse", "HEAD")
}

func (f *cacheFixture) prepare(c *Cache, job, head string) *Worktree {
	f.t.Helper()
	w, err := c.Prepare(f.ctx, f.source(), job, head)
	if err != nil {
		f.t.Fatalf("prepare %s: %v", job, err)
	}
	w.Ready() // as the runner does before its agent starts
	return w
}

// startedJob is a fixture whose source has one commit of files, with
// job1's worktree prepared at it (kept when the test ends).
func startedJob(t *testing.T, files map[string]string) (*cacheFixture, string, *Worktree) {
	t.Helper()
	f := newCacheFixture(t)
	base := f.commit(files)
	w := f.prepare(f.cache, "job1", base)
	t.Cleanup(func() { w.Keep() })
	return f, base, w
}

func noErr(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func write(t testing.TB, path, content string, mode os.FileMode) {
	t.Helper()
	noErr(t, os.MkdirAll(filepath.Dir(path), 0o755))
	noErr(t, os.WriteFile(path, []byte(content), mode))
	noErr(t, os.Chmod(path, mode))
}

// snapshotDir describes every file under dir except the top-level .git
// file: path, type, permission bits, and content (or link target) digest.
func snapshotDir(t testing.TB, dir string) []string {
	t.Helper()
	var out []string
	err := filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(dir, p)
		if rel == "." || rel == ".git" {
			return nil
		}
		fi, err := os.Lstat(p)
		if err != nil {
			return err
		}
		var sum string
		switch {
		case fi.Mode()&fs.ModeSymlink != 0:
			target, err := os.Readlink(p)
			if err != nil {
				return err
			}
			sum = "-> " + target
		case fi.Mode().IsRegular():
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			s := sha256.Sum256(b)
			sum = hex.EncodeToString(s[:8])
		}
		out = append(out, fmt.Sprintf("%s %s %s", rel, fi.Mode().String(), sum))
		return nil
	})
	noErr(t, err)
	sort.Strings(out)
	return out
}

func listDir(t testing.TB, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	noErr(t, err)
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// shell runs script with sh in dir, with a test identity and without the
// caller's git configuration.
func shell(ctx context.Context, dir, script string) (string, error) {
	cmd := exec.CommandContext(ctx, "sh", "-c", script)
	cmd.Dir = dir
	cmd.Env = []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=" + dir, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=agent", "GIT_AUTHOR_EMAIL=agent@test", "GIT_COMMITTER_NAME=agent", "GIT_COMMITTER_EMAIL=agent@test"}
	out, err := cmd.CombinedOutput()
	return string(out), err
}
