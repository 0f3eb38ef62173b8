package buildinfo

import (
	"os"
	"os/exec"
	"strings"
	"testing"

	"drover/internal/testkit/plainbuild"
)

// A version set with -ldflags is what the binary reports.
func TestLdflagsVersion(t *testing.T) {
	if Version() == "" {
		t.Fatal("empty version")
	}
	bin, err := plainbuild.Build(t.TempDir(), "-X drover/internal/buildinfo.version=v9.8.7-test")
	if err != nil {
		t.Fatal(err)
	}
	for _, args := range [][]string{{"version"}, {"--version"}} {
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
		got, err := cmd.Output()
		if err != nil {
			t.Fatalf("drover %v: %v", args, err)
		}
		if !strings.Contains(string(got), "v9.8.7-test") {
			t.Errorf("drover %v = %q, want the ldflags version", args, got)
		}
	}
}
