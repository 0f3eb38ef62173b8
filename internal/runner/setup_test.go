package runner

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"drover/internal/protocol"
	"drover/internal/sandbox"
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
	// A key file below a symlinked folder that leaves the worktree counts
	// as absent.
	out := t.TempDir()
	if err := os.WriteFile(filepath.Join(out, "go.sum"), []byte("a v1\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(out, filepath.Join(dir, "sub")); err != nil {
		t.Fatal(err)
	}
	viaLink := protocol.SetupSpec{Commands: base.Commands, KeyFiles: []string{"sub/go.sum"}}
	linked := key(viaLink)
	os.Remove(filepath.Join(dir, "sub"))
	if key(viaLink) != linked {
		t.Error("a key file below a symlinked folder was read")
	}
	// The repository's setup script keys the setup by its contents.
	write("setup.sh", "echo one\n")
	withFile := protocol.SetupSpec{Commands: base.Commands, KeyFiles: base.KeyFiles, File: "setup.sh"}
	f1 := key(withFile)
	write("setup.sh", "echo two\n")
	if f1 == absent || key(withFile) == f1 {
		t.Error("the setup script's contents do not key the setup")
	}
	// A new approval may give it the project's secrets: it runs again.
	approved := withFile
	approved.FileApproved = []string{protocol.SetupFileHash([]byte("echo two\n"))}
	if key(approved) == key(withFile) {
		t.Error("the setup script's approvals do not key the setup")
	}
	if _, err := setupKey(&protocol.SetupSpec{KeyFiles: []string{"../x"}}, dir); err == nil {
		t.Error("a key file outside the worktree was accepted")
	}
}

// A phase's sandbox network is what its policies allow, plus what a vendor
// CLI needs; the open policy is recorded as such, and the setup alone gets
// the registry credentials.
func TestPhaseNetwork(t *testing.T) {
	spec := protocol.JobSpec{Repo: &protocol.RepoSpec{Project: "web"},
		Network: &protocol.NetworkSpec{
			Setup:   protocol.PhaseNetwork{Policies: []string{"open"}, Open: true},
			Agent:   protocol.PhaseNetwork{Policies: []string{"go"}, Allow: []string{"proxy.golang.org:443"}},
			Catalog: map[string][]string{"go": {"proxy.golang.org"}, "npm": {"registry.npmjs.org"}},
		},
		Setup: &protocol.SetupSpec{Commands: []string{"true"}, Credentials: []protocol.SetupCredential{{Name: "private",
			Upstream: "https://registry.example", Header: "Authorization", Key: "k", KeyEnv: "REG_KEY", BaseURLEnv: "REG_URL"}}},
	}
	extra := sandbox.Network{Allow: []string{"api.anthropic.com:443"}}
	agent := phaseNetwork(spec, "agent", extra, nil)
	if agent.Open || !slices.Equal(agent.Allow, []string{"api.anthropic.com:443", "proxy.golang.org:443"}) ||
		agent.Policy != "agent: go" || len(agent.Credentials) != 0 ||
		agent.Widen("registry.npmjs.org:443") != "drover projects network web --agent go,npm" {
		t.Fatalf("agent network = %+v", agent)
	}
	setup := phaseNetwork(spec, "setup", sandbox.Network{}, spec.Setup.Credentials)
	if !setup.Open || setup.Policy != "setup: OPEN (every host)" || len(setup.Credentials) != 1 || setup.Credentials[0].Key != "k" {
		t.Fatalf("setup network = %+v", setup)
	}
	if got := describeNetwork(spec, true); got != "setup: OPEN (every host); agent: go" {
		t.Fatalf("policy line = %q", got)
	}
	if got := phaseNetwork(protocol.JobSpec{}, "agent", extra, nil); !slices.Equal(got.Allow, extra.Allow) || got.Policy != "" {
		t.Fatalf("without a network spec = %+v", got)
	}
}
