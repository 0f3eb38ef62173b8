package hub

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// A data directory made 0755 (by hand, or by an older drover), with files
// of a looser mode, ends 0700 with 0600 files, and says so.
func TestDataDirIsMadePrivate(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // whatever the umask
		t.Fatal(err)
	}
	var logs bytes.Buffer
	var mu sync.Mutex
	cfg := Config{DataDir: dir, Logger: slog.New(slog.NewTextHandler(lockedWriter{&mu, &logs}, nil))}
	check := func(when string) {
		t.Helper()
		for _, p := range privatePaths(dir) {
			st, err := os.Stat(p.path)
			if errors.Is(err, os.ErrNotExist) && strings.HasSuffix(p.path, "tmp") {
				continue // made at the first transfer
			}
			if err != nil {
				t.Fatalf("%s: %v", when, err)
			}
			if st.Mode().Perm() != p.mode {
				t.Errorf("%s: %s has mode %04o, want %04o", when, p.path, st.Mode().Perm(), p.mode)
			}
		}
	}
	h, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	// A write, and the repositories' directory, so every file exists.
	if err := h.repos.Create(context.Background(), "p"); err != nil {
		t.Fatal(err)
	}
	check("first start")
	if err := h.Close(); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	if !strings.Contains(logs.String(), "tightened") || !strings.Contains(logs.String(), "was=0755") {
		t.Errorf("the tightening was not logged: %s", logs.String())
	}
	mu.Unlock()

	// Loosened again while the hub was down, -wal and -shm left behind.
	db := filepath.Join(dir, dbFile)
	for _, p := range []string{db + "-wal", db + "-shm"} {
		if err := os.WriteFile(p, nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for p, m := range map[string]os.FileMode{dir: 0o755, db: 0o644, db + "-wal": 0o644, db + "-shm": 0o666,
		filepath.Join(dir, "admin.token"): 0o644, filepath.Join(dir, "repos"): 0o755} {
		if err := os.Chmod(p, m); err != nil {
			t.Fatal(err)
		}
	}
	h, err = Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	defer h.Close()
	check("restart")
}

type lockedWriter struct {
	mu *sync.Mutex
	w  io.Writer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// A data directory whose mode cannot be changed stops the hub, with the
// command that fixes it.
func TestDataDirThatCannotBeMadePrivateIsRefused(t *testing.T) {
	t.Parallel()
	if runtime.GOOS != "linux" {
		t.Skip("uses /proc, whose modes nobody can change")
	}
	_, err := Open(context.Background(), Config{DataDir: "/proc/self", Logger: slog.New(slog.DiscardHandler)})
	if err == nil || !strings.Contains(err.Error(), "chmod 700 /proc/self") {
		t.Fatalf("Open on /proc/self: %v", err)
	}
}
