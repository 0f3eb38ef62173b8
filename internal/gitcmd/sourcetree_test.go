package gitcmd

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckSourceTree(t *testing.T) {
	ctx := context.Background()
	g := Git{}
	dir := t.TempDir()
	run := func(args ...string) string {
		t.Helper()
		out, err := g.Out(ctx, dir, args...)
		if err != nil {
			t.Fatalf("git %v: %v", args, err)
		}
		return out
	}
	run("init", "--quiet", dir)
	write := func(p, s string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, p)), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, p), []byte(s), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	commit := func() string {
		run("add", "-A")
		run("commit", "--quiet", "-m", "x")
		return run("rev-parse", "HEAD")
	}
	write("a.txt", "a\n")
	write(".gitattributes", "# filter=lfs in a comment is fine\n*.txt text eol=lf -filter\n")
	if err := CheckSourceTree(ctx, g, dir, commit()); err != nil {
		t.Fatalf("plain tree: %v", err)
	}
	write("deep/dir/.gitattributes", "*.bin filter=crypt\n")
	err := CheckSourceTree(ctx, g, dir, commit())
	if err == nil || !strings.Contains(err.Error(), "filter=crypt") || !strings.Contains(err.Error(), "deep/dir/.gitattributes") {
		t.Fatalf("filtered tree: %v", err)
	}
}

// FuzzDeclaredFilter: the .gitattributes scan never panics and reports a
// filter only where a line names one.
func FuzzDeclaredFilter(f *testing.F) {
	for _, s := range []string{"*.bin filter=lfs diff=lfs\n", "# *.x filter=a\n", "*.c text\n", "x filter=\n", "\n\n", strings.Repeat("a", 70000) + " filter=x"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		if len(data) > 1<<17 {
			return
		}
		pattern, filter, ok := declaredFilter(data)
		if !ok {
			return
		}
		if !bytes.Contains(data, []byte("filter="+filter)) || pattern == "" || strings.HasPrefix(pattern, "#") {
			t.Fatalf("filter %q for %q found in %q", filter, pattern, data)
		}
	})
}
