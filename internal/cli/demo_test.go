//go:build !drover_runner

package cli

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The demo refuses, before starting anything, what it cannot do, and says
// what would work. (The demo itself runs in the e2e suite.)
func TestDemoRefusesWhatItCannotDo(t *testing.T) {
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"demo", "--agent", "native"}, 2, "no model server"},
		{[]string{"demo", "--agent", "nobody"}, 2, "want exec, claude"},
		{[]string{"demo", "--agent", "claude"}, 1, "$ANTHROPIC_API_KEY"},
		{[]string{"demo", "--sandbox", "docker"}, 2, "bwrap or none"},
		{[]string{"demo", "--timeout", "0s"}, 2, "want a positive duration"},
	} {
		if r := runCLI(t, nil, "", tc.args...); r.code != tc.code || !strings.Contains(r.stderr, tc.want) {
			t.Errorf("%v: %d %q", tc.args, r.code, r.stderr)
		}
	}
}

// The demo writes the review-loop example as examples/pipelines holds it,
// with every script its commands name, at the path they name it by.
func TestDemoWritesTheReviewLoopExample(t *testing.T) {
	dir := t.TempDir()
	if err := writeReviewLoop(dir); err != nil {
		t.Fatal(err)
	}
	yaml, err := os.ReadFile(filepath.Join(dir, "examples", "pipelines", "review-loop.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	scripts := regexp.MustCompile(`examples/pipelines/[\w.-]+\.sh`).FindAllString(string(yaml), -1)
	if len(scripts) < 2 {
		t.Fatalf("the review loop names scripts %v", scripts)
	}
	for _, p := range append(scripts, "examples/pipelines/review-loop.yaml") {
		got, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(p)))
		if err != nil {
			t.Errorf("the demo did not write %s, which the review loop runs: %v", p, err)
			continue
		}
		want, err := os.ReadFile(filepath.Join("..", "..", filepath.FromSlash(p)))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("the demo's %s differs from the module's", p)
		}
	}
}
