// Package disk makes small file systems for tests of full disks: a tmpfs
// created and removed by the test, and a filler that fills it. It imports
// nothing of drover but fsutil and ciskip, so any package's tests may use
// it.
package disk

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"drover/internal/fsutil"
	"drover/internal/testkit/ciskip"
)

// Tmpfs mounts a tmpfs of size bytes on a new directory under t.TempDir()
// and unmounts it when the test ends. It needs root (CI runs as root);
// elsewhere the test is skipped (failed under CI=true).
func Tmpfs(t testing.TB, size int64) string {
	t.Helper()
	if os.Geteuid() != 0 {
		ciskip.Skipf(t, "mounting a tmpfs needs root")
	}
	dir := filepath.Join(t.TempDir(), "tmpfs")
	if err := os.Mkdir(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+strconv.FormatInt(size, 10), "tmpfs", dir).CombinedOutput()
	if err != nil {
		ciskip.Skipf(t, "cannot mount a tmpfs: %v: %s", err, out)
	}
	// Registered after t.TempDir's removal, so it runs before it.
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("unmount the test's tmpfs %s: %v: %s", dir, err, out)
		}
	})
	return dir
}

// Fill writes a filler file in dir until at most leave bytes are free on
// its file system (0: until the disk refuses a write), and returns the
// function that removes it again (from any goroutine; at the latest when
// the test ends).
func Fill(t testing.TB, dir string, leave int64) (free func()) {
	t.Helper()
	path := filepath.Join(dir, "filler")
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatalf("create filler: %v", err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for {
		avail, err := fsutil.FreeBytes(dir)
		if err != nil {
			t.Fatal(err)
		}
		n := min(avail-leave, int64(len(buf)))
		if n <= 0 {
			break
		}
		if _, err := f.Write(buf[:n]); err != nil {
			if fsutil.IsNoSpace(err) {
				break
			}
			t.Fatalf("fill %s: %v", dir, err)
		}
	}
	var once sync.Once
	free = func() {
		once.Do(func() {
			if err := os.Remove(path); err != nil && !errors.Is(err, os.ErrNotExist) {
				t.Errorf("remove filler: %v", err)
			}
		})
	}
	t.Cleanup(free)
	return free
}
