// Package plainbuild compiles cmd/drover without -race for the tests that
// run drover as a user would (the bench, the version stamp). It uses the
// compile flags of scripts/release (CGO_ENABLED=0, -trimpath), which
// scripts/test also builds with before the tests: the suite then compiles
// the module without -race once, and these tests and the release test find
// it in the build cache (from an empty home each plain compile of the
// module costs minutes of the suite's 2 cores). It imports nothing of
// drover, so any package's tests may use it.
package plainbuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Build compiles cmd/drover to dir/drover with the given -ldflags (link
// flags change no compiled package) and returns the binary's path.
func Build(dir, ldflags string) (string, error) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || strings.TrimSpace(string(gomod)) == "" {
		return "", fmt.Errorf("find the module root: %v", err)
	}
	bin := filepath.Join(dir, "drover")
	args := []string{"build", "-trimpath", "-o", bin}
	if ldflags != "" {
		args = append(args, "-ldflags", ldflags)
	}
	cmd := exec.Command("go", append(args, "./cmd/drover")...)
	cmd.Dir = filepath.Dir(strings.TrimSpace(string(gomod)))
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("go build -trimpath ./cmd/drover (CGO_ENABLED=0): %v\n%s", err, out)
	}
	return bin, nil
}
