package sandboxtest

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// No container engine works on this project's machines (the docker CLI is
// there, its daemon is not), so tests run docker and podman boundaries
// against a FAKE engine: a shell script that records its argv, knows a
// fixed set of images and, for `run`, runs the command after the image
// (after "--" and the image) directly on the host. It checks the command
// line drover gives the engine, not container isolation.
const fakeEngine = `#!/bin/sh
for a in "$@"; do printf '%s\037' "$a"; done >> "$DOCKER_FAKE_LOG"
printf '\n' >> "$DOCKER_FAKE_LOG"
has() { for i in $DOCKER_FAKE_IMAGES; do [ "$i" = "$1" ] && return 0; done; return 1; }
case "$1" in
version) [ -n "$DOCKER_FAKE_DOWN" ] && { echo "Cannot connect to the engine" >&2; exit 1; }; echo 24.0.7-fake ;;
image) [ "$5" = -- ] && has "$6" || { echo "No such image: $6" >&2; exit 1; }; echo sha256:fake ;;
run)
	shift
	while [ "$#" -gt 0 ] && [ "$1" != -- ]; do
		[ "$1" = --workdir ] && cd "$2"
		shift
	done
	shift 2
	exec "$@" ;;
esac
`

// FakeEngine is the fake container engine installed by FakeEngineOnPath.
type FakeEngine struct {
	log string
}

// FakeEngineOnPath installs the fake engine as docker and podman, first
// on PATH, knowing images (DOCKER_FAKE_DOWN set non-empty: the engine does
// not answer).
func FakeEngineOnPath(t testing.TB, images ...string) FakeEngine {
	dir := t.TempDir()
	for _, name := range []string{"docker", "podman"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(fakeEngine), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	e := FakeEngine{log: filepath.Join(dir, "argv.log")}
	t.Setenv("PATH", dir+":/usr/bin:/bin")
	t.Setenv("DOCKER_FAKE_LOG", e.log)
	t.Setenv("DOCKER_FAKE_IMAGES", strings.Join(images, " "))
	return e
}

// Calls returns every recorded engine command line.
func (e FakeEngine) Calls(t testing.TB) [][]string {
	b, err := os.ReadFile(e.log)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		t.Fatal(err)
	}
	var out [][]string
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		if line != "" {
			out = append(out, strings.Split(strings.TrimSuffix(line, "\x1f"), "\x1f"))
		}
	}
	return out
}

// All returns the recorded command lines of subcommand sub.
func (e FakeEngine) All(t testing.TB, sub string) [][]string {
	var out [][]string
	for _, c := range e.Calls(t) {
		if len(c) > 0 && c[0] == sub {
			out = append(out, c)
		}
	}
	return out
}

// Find returns the first recorded command line of subcommand sub.
func (e FakeEngine) Find(t testing.TB, sub string) []string {
	t.Helper()
	if all := e.All(t, sub); len(all) > 0 {
		return all[0]
	}
	t.Fatalf("no %q call in %q", sub, e.Calls(t))
	return nil
}
