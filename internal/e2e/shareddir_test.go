package e2e

import (
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"drover/internal/testkit"
)

// TestHubsShareADataDirectory: hub processes on one data directory and one
// Postgres database share the first one's admin token; SIGKILLing one
// leaves its scratch directory (a spooled transfer in it), which the next
// hub to start removes, while the live hub's stays untouched.
func TestHubsShareADataDirectory(t *testing.T) {
	t.Parallel()
	url := testkit.StartPostgres(t)
	data := filepath.Join(t.TempDir(), "hub")
	scratch := func() []string {
		t.Helper()
		m, err := filepath.Glob(filepath.Join(data, "tmp", "hub-*"))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	a := testkit.StartHubIn(t, bin, data, "--db", url)
	aDirs := scratch()
	b := testkit.StartHubIn(t, bin, data, "--db", url)
	bDirs := slices.DeleteFunc(scratch(), func(d string) bool { return slices.Contains(aDirs, d) })
	if len(aDirs) != 1 || len(bDirs) != 1 {
		t.Fatalf("scratch directories: first hub %v, second %v; want one each", aDirs, bDirs)
	}
	if a.Admin != b.Admin {
		t.Fatal("the second hub wrote another admin token")
	}
	for _, d := range append(aDirs, bDirs...) {
		if err := os.WriteFile(filepath.Join(d, "publish-1.bundle"), []byte("spooled"), 0o600); err != nil {
			t.Fatal(err)
		}
	}

	a.Kill()
	c := testkit.StartHubIn(t, bin, data, "--db", url)
	if _, err := os.Stat(aDirs[0]); !os.IsNotExist(err) {
		t.Errorf("the killed hub's scratch directory survived the next start: %v", err)
	}
	if got, err := os.ReadFile(filepath.Join(bDirs[0], "publish-1.bundle")); err != nil || string(got) != "spooled" {
		t.Errorf("the live hub's spooled transfer: %q %v", got, err)
	}
	// The log is read apart from stdout's listening line: give it time.
	said := func() bool {
		out := c.Output()
		return strings.Contains(out, "removed leftovers of interrupted transfers") &&
			strings.Contains(out, "sharing the data directory with other live hubs")
	}
	for deadline := time.Now().Add(time.Minute); !said() && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if !said() {
		t.Errorf("the third hub's log does not say what it removed and whom it shares with:\n%s", c.Output())
	}
	if c.Admin != b.Admin {
		t.Fatal("the third hub wrote another admin token")
	}
}
