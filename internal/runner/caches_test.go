package runner

import (
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"drover/internal/protocol"
)

// The project caches are kept within their budget: whole projects' caches
// go, least recently used first, with the setups that relied on them; a
// project in use is never touched, and nothing goes while they fit.
func TestTrimCaches(t *testing.T) {
	home := t.TempDir()
	base := time.Now().Add(-time.Hour)
	fill := func(project string, size int, used time.Duration) {
		t.Helper()
		dir := filepath.Join(cachesDir(home), project, "deps")
		if err := os.MkdirAll(dir, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, "pkg"), make([]byte, size), 0o600); err != nil {
			t.Fatal(err)
		}
		keys := setupKeysDir(home, project)
		if err := os.MkdirAll(keys, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(keys, "k"), nil, 0o600); err != nil {
			t.Fatal(err)
		}
		at := base.Add(used)
		if err := os.Chtimes(filepath.Join(cachesDir(home), project), at, at); err != nil {
			t.Fatal(err)
		}
	}
	fill("old", 4000, 0)             // least recently used, but in use
	fill("older", 3000, time.Minute) // the next: goes
	fill("mid", 2000, 2*time.Minute) // goes too
	fill("new", 1000, 3*time.Minute) // stays
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	inUse := func(p string) bool { return p == "old" }
	trim := func(budget int64) []string {
		t.Helper()
		removed, err := trimCaches(home, budget, inUse, time.Now, log)
		if err != nil {
			t.Fatal(err)
		}
		return removed
	}
	if got := trim(10000); len(got) != 0 {
		t.Fatalf("caches within the budget were removed: %v", got)
	}
	if got := trim(5000); !slices.Equal(got, []string{"older", "mid"}) {
		t.Fatalf("removed %v, want older then mid", got)
	}
	left, err := cacheUsage(cachesDir(home))
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 2 || left["old"] != 4000 || left["new"] != 1000 {
		t.Fatalf("caches left = %v", left)
	}
	for p, want := range map[string]bool{"old": true, "new": true, "older": false, "mid": false} {
		if _, err := os.Stat(setupKeysDir(home, p)); (err == nil) != want {
			t.Errorf("setups of %s kept: %t, want %t", p, err == nil, want)
		}
	}
	// Only the one in use is over: it stays, the rest fit.
	if got := trim(100); !slices.Equal(got, []string{"new"}) {
		t.Fatalf("removed %v, want new (old is in use)", got)
	}
	if _, err := os.Stat(filepath.Join(cachesDir(home), "old", "deps", "pkg")); err != nil {
		t.Fatalf("the cache in use was touched: %v", err)
	}
}

// Opening a project's caches marks them used now, and the runner's trim
// leaves the caches of a project it holds an attempt of.
func TestRunnerTrimsCachesByUse(t *testing.T) {
	home := t.TempDir()
	now := time.Now()
	r := &Runner{cfg: Config{Home: home, ProjectCacheSize: 1}, now: func() time.Time { return now },
		log: slog.New(slog.NewTextHandler(io.Discard, nil)), attempts: map[string]*attempt{}}
	for i, p := range []string{"web", "api"} {
		now = now.Add(time.Duration(i) * time.Minute)
		ac, err := r.openCaches(p, []string{"deps"})
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(ac.dirs[0], "pkg"), make([]byte, 100), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	fi, err := os.Stat(filepath.Join(cachesDir(home), "api"))
	if err != nil || !fi.ModTime().Equal(now) {
		t.Fatalf("api's caches were not marked used at %s: %v %v", now, fi.ModTime(), err)
	}
	r.attempts["a-1"] = &attempt{spec: protocol.JobSpec{Repo: &protocol.RepoSpec{Project: "api"}}}
	r.trimCaches()
	left, err := cacheUsage(cachesDir(home))
	if err != nil || len(left) != 1 || left["api"] != 100 {
		t.Fatalf("caches left = %v (%v), want only api's (in use)", left, err)
	}
	if _, err := os.Stat(cacheTrash(home)); !os.IsNotExist(err) {
		t.Fatalf("removed caches were left aside: %v", err)
	}
}
