package workspace

import (
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"drover/internal/hubrepo"
)

// A large project is fetched through the hub's own upload-pack as a
// partial clone: history's blobs stay on the hub, the checkout's are
// fetched as it needs them (with the runner's token, from the environment),
// and the worktree has every file. A whole clone, fetched the same way,
// misses nothing: the count of missing objects is what Large changes.
func TestLargeProjectIsAPartialClone(t *testing.T) {
	f := newCacheFixture(t)
	f.commit(map[string]string{"a.txt": "old a\n", "dir/b.txt": "old b\n"})
	head := f.commit(map[string]string{"a.txt": "new a\n", "dir/c.txt": "c\n"})
	backend, err := hubrepo.Repos{Root: filepath.Dir(f.src)}.HTTPBackend(false, os.Stderr)
	noErr(t, err)
	var unauthorized atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			unauthorized.Add(1)
			http.Error(w, "token needed", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	defer srv.Close()

	for _, tc := range []struct {
		name    string
		large   bool
		missing bool
	}{
		{"whole", false, false},
		{"large", true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := f.newCache(t.TempDir())
			src := Source{Project: "proj", URL: srv.URL + "/src", Token: "tok", Large: tc.large}
			w, err := c.Prepare(f.ctx, src, "job1", head)
			noErr(t, err)
			for name, want := range map[string]string{"a.txt": "new a\n", "dir/b.txt": "old b\n", "dir/c.txt": "c\n"} {
				if b, err := os.ReadFile(filepath.Join(w.Dir(), name)); err != nil || string(b) != want {
					t.Fatalf("%s = %q, %v; want %q", name, b, err, want)
				}
			}
			out := f.git(w.repo.dir, "-c", "fetch.negotiationAlgorithm=noop", "rev-list", "--objects", "--missing=print", head)
			var missing []string
			for _, l := range strings.Split(out, "\n") {
				if strings.HasPrefix(l, "?") {
					missing = append(missing, l)
				}
			}
			if (len(missing) > 0) != tc.missing {
				t.Fatalf("missing objects %v, want some: %v", missing, tc.missing)
			}
			noErr(t, w.Release(f.ctx))
		})
	}
	if n := unauthorized.Load(); n != 0 {
		t.Fatalf("%d requests reached the hub without the token", n)
	}
}
