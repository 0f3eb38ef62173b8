// Package plainbuild compiles cmd/drover without -race for the tests that
// run drover as a user would (the bench, the version stamp, the end-to-end
// packages that check behaviour rather than the processes' concurrency:
// internal/testkit.Plain). It uses the compile flags of scripts/release
// (CGO_ENABLED=0, -trimpath), which scripts/test also builds with before
// those tests: the suite then compiles the module without -race once, and
// these tests and the release test find it in the build cache (from an
// empty home each plain compile of the module costs minutes of the suite's
// 2 cores). It imports nothing of drover, so any package's tests may use it.
package plainbuild

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// BinaryEnv names the plain drover scripts/test builds once for all the
// packages that run one: each linking its own costs a link of the whole
// binary (about 10 CPU seconds) per test.
const BinaryEnv = "DROVER_TEST_PLAIN_BINARY"

// Drover returns $DROVER_TEST_PLAIN_BINARY when set, else compiles
// cmd/drover into dir (Build without link flags).
func Drover(dir string) (string, error) {
	if prebuilt := os.Getenv(BinaryEnv); prebuilt != "" {
		if fi, err := os.Stat(prebuilt); err != nil || fi.IsDir() || fi.Mode()&0o111 == 0 {
			return "", fmt.Errorf("%s=%s is not an executable file (%v)", BinaryEnv, prebuilt, err)
		}
		return prebuilt, nil
	}
	return Build(dir, "")
}

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
