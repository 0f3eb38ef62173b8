package hub

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestNofileSkip: a hub that counts its descriptors by walking them and is
// far below the warning level counts them once a minute; one near it, or
// given the count by the kernel, at every tick.
func TestNofileSkip(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		open, limit uint64
		walked      bool
		want        int
	}{
		{open: 10_000, limit: 1 << 20, walked: true, want: 5},
		{open: 399, limit: 1000, walked: true, want: 5},
		{open: 400, limit: 1000, walked: true, want: 0},
		{open: 900, limit: 1000, walked: true, want: 0},
		{open: 5, limit: 0, walked: true, want: 0},
		// The kernel's count costs the same at any count: the bench's
		// 10,000 runners of 20,000 descriptors are checked every tick.
		{open: 10_000, limit: 20_000, want: 0},
		{open: 10, limit: 1 << 20, want: 0},
	} {
		if got := nofileSkip(c.open, c.limit, c.walked); got != c.want {
			t.Errorf("%d of %d open (walked %v): skip %d checks, want %d", c.open, c.limit, c.walked, got, c.want)
		}
	}
}

// TestOpenFilesCountsEveryDescriptor: the count the hub warns by follows
// the descriptors it opens, and on a kernel that gives the count it is
// read without a walk.
func TestOpenFilesCountsEveryDescriptor(t *testing.T) {
	before, limit, _, ok := openFiles()
	if !ok {
		t.Skip("no " + procFDs)
	}
	const extra = 64
	dir := t.TempDir()
	for i := range extra {
		f, err := os.Create(filepath.Join(dir, fmt.Sprint(i)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
	}
	after, limit2, walked, ok := openFiles()
	if !ok || limit2 != limit || limit == 0 {
		t.Fatalf("second count: ok %v, limit %d then %d", ok, limit, limit2)
	}
	// Other tests of the package may open and close descriptors meanwhile:
	// the count grows by about extra, never by none.
	if after < before+extra/2 {
		t.Errorf("%d descriptors open before and %d after opening %d more", before, after, extra)
	}
	if fi, err := os.Stat(procFDs); err == nil && fi.Size() > 0 && walked {
		t.Errorf("the kernel gives the count (%d), but the descriptors were walked", fi.Size())
	}
}

// TestNofileWarning: the descriptor warning is logged once when the hub
// crosses 80 % of its limit, and cleared below 70 %.
func TestNofileWarning(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	for _, step := range []struct {
		open, limit   uint64
		before, after bool   // warned before and after the check
		want          string // in the log, "" for nothing
	}{
		{open: 700, limit: 1000},
		{open: 800, limit: 1000, after: true, want: "near the limit"},
		{open: 900, limit: 1000, before: true, after: true},
		{open: 750, limit: 1000, before: true, after: true},
		{open: 650, limit: 1000, before: true, want: "back below"},
		{open: 5, limit: 0},
	} {
		buf.Reset()
		got := nofileCheck(log, step.open, step.limit, step.before)
		if step.want == "" && buf.Len() > 0 || step.want != "" && !strings.Contains(buf.String(), step.want) {
			t.Errorf("%d of %d open: logged %q, want %q", step.open, step.limit, buf.String(), step.want)
		}
		if got != step.after {
			t.Errorf("%d of %d open: warned %v, want %v", step.open, step.limit, got, step.after)
		}
	}
}
