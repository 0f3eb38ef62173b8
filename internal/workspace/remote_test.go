package workspace

import (
	"log/slog"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// A project mapped to a remote is fetched with the runner user's own git
// credentials (here a credential helper in their global config answering
// a server that demands basic auth); a fetch from the hub never sees them.
func TestMappedRemoteUsesTheRunnersOwnCredentials(t *testing.T) {
	gitBin, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	f := newCacheFixture(t)
	commit := f.commit(map[string]string{"a.txt": "a\n"})
	backend := &cgi.Handler{Path: gitBin, Args: []string{"http-backend"},
		Env: []string{"GIT_PROJECT_ROOT=" + filepath.Dir(f.src), "GIT_HTTP_EXPORT_ALL=1"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if u, p, ok := r.BasicAuth(); !ok || u != "runner" || p != "s3cret" {
			w.Header().Set("WWW-Authenticate", `Basic realm="git"`)
			http.Error(w, "auth required", http.StatusUnauthorized)
			return
		}
		backend.ServeHTTP(w, r)
	}))
	defer srv.Close()
	url := srv.URL + "/" + filepath.Base(f.src)

	home := t.TempDir() // the runner user's home
	write(t, filepath.Join(home, ".gitconfig"), "[credential]\n\thelper = store\n", 0o600)
	write(t, filepath.Join(home, ".git-credentials"), strings.Replace(srv.URL, "http://", "http://runner:s3cret@", 1)+"\n", 0o600)
	env := OwnCredentialEnv(func(name string) string { return map[string]string{"HOME": home}[name] })

	for _, tc := range []struct {
		name   string
		remote bool
		ok     bool
	}{
		{"mapped remote", true, true},
		{"same URL as if it were the hub", false, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := NewCache(CacheConfig{Home: t.TempDir(), Logger: slog.New(slog.NewTextHandler(t.Output(), nil)), RemoteEnv: env})
			noErr(t, err)
			w, err := c.Prepare(f.ctx, Source{Project: "proj", URL: url, Remote: tc.remote}, "job1", commit)
			if tc.ok != (err == nil) {
				t.Fatalf("prepare: %v, want ok=%v", err, tc.ok)
			}
			if err == nil {
				if b, err := os.ReadFile(filepath.Join(w.Dir(), "a.txt")); err != nil || string(b) != "a\n" {
					t.Fatalf("a.txt = %q, %v", b, err)
				}
				noErr(t, w.Release(f.ctx))
			}
		})
	}
}
