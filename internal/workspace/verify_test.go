package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestReadBundleHeader(t *testing.T) {
	id := strings.Repeat("ab", 20)
	tests := []struct {
		in      string
		refs    int
		prereqs int
		bad     string
	}{
		{in: "# v2 git bundle\n-" + id + " parent\n" + id + " refs/heads/x\n\nPACK", refs: 1, prereqs: 1},
		{in: "# v3 git bundle\n@object-format=sha1\n" + id + " refs/heads/x\n" + id + " refs/heads/y\n\nPACK", refs: 2},
		{in: "# v3 git bundle\n@object-format=sha256\n\n", bad: "not supported"},
		{in: "hello", bad: "not a git bundle"},
		{in: "# v2 git bundle\n" + id + "\n\n", bad: "malformed"},
		{in: "# v2 git bundle\n-xyz\n\n", bad: "not a commit id"},
		{in: "# v2 git bundle\n" + id + " refs/heads/x\n", bad: "truncated"},
	}
	for _, tt := range tests {
		b, err := ReadBundleHeader(strings.NewReader(tt.in))
		if tt.bad != "" {
			if err == nil || !strings.Contains(err.Error(), tt.bad) {
				t.Errorf("%.40q: got %v, want an error mentioning %q", tt.in, err, tt.bad)
			}
			continue
		}
		if err != nil || len(b.Refs) != tt.refs || len(b.Prerequisites) != tt.prereqs || tt.in[b.packOffset:] != "PACK" {
			t.Errorf("%.40q: got %+v, %v", tt.in, b, err)
		}
	}
}

func TestNames(t *testing.T) {
	for name, want := range map[string]bool{
		"web": true, "a.b_c-d": true, "0x": true, strings.Repeat("a", 64): true,
		"": false, "Web": false, "-web": false, ".web": false, "web.git": false, "a..b": false,
		"a/b": false, "web.lock": false, strings.Repeat("a", 65): false,
	} {
		if ValidProject(name) != want {
			t.Errorf("ValidProject(%q) = %v", name, !want)
		}
	}
	for ref, want := range map[string]bool{
		UploadRefPrefix + "up-123": true, UploadRefPrefix + "a": true,
		UploadRefPrefix: false, UploadRefPrefix + "a/b": false, UploadRefPrefix + "x.lock": false,
		"refs/heads/main": false, JobRef("j-1"): false, UploadRefPrefix + "..": false,
	} {
		if ValidUploadRef(ref) != want {
			t.Errorf("ValidUploadRef(%q) = %v", ref, !want)
		}
	}
}

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
