package runner

import (
	"os"
	"path/filepath"
	"testing"

	"drover/internal/protocol"
)

// A setup's key changes with its commands and the contents of its key
// files, and never follows a symlink out of the worktree.
func TestSetupKey(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	key := func(s protocol.SetupSpec) string {
		t.Helper()
		k, err := setupKey(&s, dir)
		if err != nil {
			t.Fatal(err)
		}
		return k
	}
	write("go.sum", "a v1\n")
	base := protocol.SetupSpec{Commands: []string{"go mod download"}, KeyFiles: []string{"go.sum"}}
	k1 := key(base)
	if key(base) != k1 {
		t.Fatal("the same setup has two keys")
	}
	if key(protocol.SetupSpec{Commands: []string{"go mod download", "true"}, KeyFiles: base.KeyFiles}) == k1 {
		t.Error("another command list has the same key")
	}
	write("go.sum", "a v2\n")
	if key(base) == k1 {
		t.Error("another go.sum has the same key")
	}
	secret := filepath.Join(t.TempDir(), "secret")
	if err := os.WriteFile(secret, []byte("a v1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	os.Remove(filepath.Join(dir, "go.sum"))
	absent := key(base)
	if err := os.Symlink(secret, filepath.Join(dir, "go.sum")); err != nil {
		t.Fatal(err)
	}
	if key(base) != absent || absent == k1 {
		t.Error("a symlinked key file was followed")
	}
	if _, err := setupKey(&protocol.SetupSpec{KeyFiles: []string{"../x"}}, dir); err == nil {
		t.Error("a key file outside the worktree was accepted")
	}
}
