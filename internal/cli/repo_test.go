package cli

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"io"
	"log/slog"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"drover/internal/apitypes"
	"drover/internal/gitcmd"
	"drover/internal/hub"
	"drover/internal/protocol"
	"drover/internal/rules"
)

// realHub starts an in-process hub behind an HTTP server and returns the
// environment a CLI invocation needs to use it, and its data directory.
func realHub(t *testing.T, cfg ...hub.Config) (map[string]string, string) {
	t.Helper()
	var c hub.Config
	if len(cfg) > 0 {
		c = cfg[0]
	}
	data := t.TempDir()
	c.DataDir, c.Logger = data, slog.New(slog.NewTextHandler(io.Discard, nil))
	h, err := hub.Open(context.Background(), c)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h.Handler())
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
		h.Close()
	})
	tok, err := os.ReadFile(h.AdminTokenPath())
	if err != nil {
		t.Fatal(err)
	}
	return map[string]string{"DROVER_HUB": srv.URL, "DROVER_TOKEN": strings.TrimSpace(string(tok)), "HOME": t.TempDir()}, data
}

func gitC(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := gitcmd.Git{}.Out(context.Background(), dir, args...)
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return out
}

// userRepo makes a checkout named "web" with one commit and a .gitignore.
func userRepo(t *testing.T) (string, string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "web")
	gitC(t, t.TempDir(), "init", "--quiet", dir)
	writeFile(t, filepath.Join(dir, "main.go"), "package main\n")
	writeFile(t, filepath.Join(dir, ".gitignore"), "*.log\n")
	gitC(t, dir, "add", "-A")
	gitC(t, dir, "commit", "--quiet", "-m", "first")
	return dir, gitC(t, dir, "rev-parse", "HEAD")
}

// submitted runs `drover run --repo` and returns the job.
func submitted(t *testing.T, env map[string]string, args ...string) apitypes.JobView {
	t.Helper()
	r := runCLI(t, env, "", append(append([]string{"run", "--json"}, args...), "--agent", "exec", "--", "true")...)
	if r.code != 0 {
		t.Fatalf("run: code %d, stderr %q", r.code, r.stderr)
	}
	var v apitypes.JobView
	if err := json.Unmarshal([]byte(r.stdout), &v); err != nil {
		t.Fatalf("run printed %q: %v", r.stdout, err)
	}
	return v
}

func TestRunRepoPinsACleanCheckout(t *testing.T) {
	env, _ := realHub(t)
	dir, head := userRepo(t)
	writeFile(t, filepath.Join(dir, "build.log"), "ignored\n")
	v := submitted(t, env, "--repo", dir)
	if v.Project != "web" || v.Base != head || v.Head != head || v.Mode != protocol.ModeFix {
		t.Fatalf("job: %+v", v)
	}
	r := runCLI(t, env, "", "show", v.ID)
	for _, want := range []string{"Project:", "web", "Base:", head, "Mode:", "fix"} {
		if !strings.Contains(r.stdout, want) {
			t.Errorf("show does not print %q:\n%s", want, r.stdout)
		}
	}
	// Submitting the same commit again sends nothing new and works.
	if v2 := submitted(t, env, "--repo", dir, "--mode", "observe", "--project", "web2"); v2.Base != head || v2.Mode != protocol.ModeObserve || v2.Project != "web2" {
		t.Fatalf("second job: %+v", v2)
	}
}

func TestRunRepoRefusesADirtyTree(t *testing.T) {
	env, _ := realHub(t)
	dir, _ := userRepo(t)
	writeFile(t, filepath.Join(dir, "main.go"), "package main // edited\n")
	r := runCLI(t, env, "", "run", "--repo", dir, "--agent", "exec", "--", "true")
	if r.code != 1 || !strings.Contains(r.stderr, "uncommitted changes") || !strings.Contains(r.stderr, "main.go") || !strings.Contains(r.stderr, "--dirty") {
		t.Fatalf("dirty run: code %d, stderr %q", r.code, r.stderr)
	}
	if r := runCLI(t, env, "", "jobs", "--json"); strings.Contains(r.stdout, `"id"`) {
		t.Fatalf("a refused run made a job: %s", r.stdout)
	}
	// Bad combinations are usage errors.
	for _, args := range [][]string{
		{"--dirty"}, {"--mode", "fix"}, {"--context", "x"}, {"--repo", dir, "--ref", "HEAD", "--dirty"}, {"--repo", dir, "--mode", "yolo"},
	} {
		r := runCLI(t, env, "", append(append([]string{"run"}, args...), "--agent", "exec", "--", "true")...)
		if r.code != 2 {
			t.Errorf("%q: code %d, stderr %q", args, r.code, r.stderr)
		}
	}
}

func TestRunRepoDirtyMakesAThrowawayCommit(t *testing.T) {
	env, data := realHub(t)
	dir, head := userRepo(t)
	writeFile(t, filepath.Join(dir, "main.go"), "package main // edited\n")
	writeFile(t, filepath.Join(dir, "staged.txt"), "staged\n")
	gitC(t, dir, "add", "staged.txt")
	writeFile(t, filepath.Join(dir, "new/untracked.txt"), "new\n")
	writeFile(t, filepath.Join(dir, "debug.log"), "ignored\n")
	indexBefore, err := os.ReadFile(filepath.Join(dir, ".git", "index"))
	if err != nil {
		t.Fatal(err)
	}
	statusBefore := gitC(t, dir, "status", "--porcelain")

	v := submitted(t, env, "--repo", dir, "--dirty")
	if v.Base == head || v.Project != "web" {
		t.Fatalf("job: %+v", v)
	}
	// The user's HEAD, branch, index and status are as they were.
	if got := gitC(t, dir, "rev-parse", "HEAD"); got != head {
		t.Errorf("HEAD moved to %s", got)
	}
	if got := gitC(t, dir, "symbolic-ref", "HEAD"); got != "refs/heads/main" {
		t.Errorf("HEAD is %s", got)
	}
	if indexAfter, _ := os.ReadFile(filepath.Join(dir, ".git", "index")); !bytes.Equal(indexBefore, indexAfter) {
		t.Errorf("the user's index changed")
	}
	if got := gitC(t, dir, "status", "--porcelain"); got != statusBefore {
		t.Errorf("status changed:\n%s\nwas\n%s", got, statusBefore)
	}
	// The hub has the throwaway commit: on HEAD, with the tracked and
	// untracked files and without the ignored one.
	repo := filepath.Join(data, "repos", "web.git")
	if parent := gitC(t, repo, "rev-parse", v.Base+"^"); parent != head {
		t.Errorf("throwaway commit's parent is %s, want %s", parent, head)
	}
	files := gitC(t, repo, "ls-tree", "-r", "--name-only", v.Base)
	if files != ".gitignore\nmain.go\nnew/untracked.txt\nstaged.txt" {
		t.Errorf("throwaway commit has:\n%s", files)
	}
	if got := gitC(t, repo, "show", v.Base+":main.go"); got != "package main // edited" {
		t.Errorf("main.go in the commit: %q", got)
	}
}

func TestRunRepoRefusesSubmodules(t *testing.T) {
	env, _ := realHub(t)
	dir, head := userRepo(t)
	gitC(t, dir, "update-index", "--add", "--cacheinfo", "160000,"+head+",vendor/lib")
	gitC(t, dir, "commit", "--quiet", "-m", "submodule")
	r := runCLI(t, env, "", "run", "--repo", dir, "--agent", "exec", "--", "true")
	if r.code != 1 || !strings.Contains(r.stderr, "submodule") {
		t.Fatalf("code %d, stderr %q", r.code, r.stderr)
	}
}

func TestFetchCreatesOrFastForwardsOnly(t *testing.T) {
	env, _ := realHub(t)
	dir, first := userRepo(t)
	writeFile(t, filepath.Join(dir, "second.txt"), "2\n")
	gitC(t, dir, "add", "-A")
	gitC(t, dir, "commit", "--quiet", "-m", "second")
	v := submitted(t, env, "--repo", dir)
	base := v.Base

	// A fresh clone gets the result as a new branch.
	clone := filepath.Join(t.TempDir(), "clone")
	gitC(t, dir, "clone", "--quiet", dir, clone)
	r := runCLI(t, env, "", "fetch", v.ID, "--repo", clone)
	if r.code != 0 || !strings.Contains(r.stdout, "drover/"+v.ID+" created") {
		t.Fatalf("fetch: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if got := gitC(t, clone, "rev-parse", "drover/"+v.ID); got != base {
		t.Fatalf("branch at %s, want %s", got, base)
	}
	if r := runCLI(t, env, "", "fetch", v.ID, "--repo", clone); r.code != 0 || !strings.Contains(r.stdout, "up to date") {
		t.Fatalf("fetch again: %q %q", r.stdout, r.stderr)
	}
	if refs := gitC(t, clone, "for-each-ref", "refs/drover/"); refs != "" {
		t.Fatalf("temporary refs left behind: %s", refs)
	}

	// A branch that moved elsewhere is never overwritten.
	gitC(t, clone, "checkout", "--quiet", "-b", "moved", first)
	writeFile(t, filepath.Join(clone, "mine.txt"), "mine\n")
	gitC(t, clone, "add", "-A")
	gitC(t, clone, "commit", "--quiet", "-m", "mine")
	mine := gitC(t, clone, "rev-parse", "HEAD")
	r = runCLI(t, env, "", "fetch", v.ID, "--repo", clone, "--branch", "moved")
	if r.code != 1 || !strings.Contains(r.stderr, "has moved") {
		t.Fatalf("fetch onto a moved branch: code %d, stderr %q", r.code, r.stderr)
	}
	if got := gitC(t, clone, "rev-parse", "moved"); got != mine {
		t.Fatalf("moved branch was changed to %s", got)
	}

	// A checked-out branch behind the result: refused with local changes,
	// fast-forwarded (working tree too) without.
	gitC(t, clone, "checkout", "--quiet", "-b", "behind", first)
	writeFile(t, filepath.Join(clone, "main.go"), "package main // local\n")
	r = runCLI(t, env, "", "fetch", v.ID, "--repo", clone, "--branch", "behind")
	if r.code != 1 || !strings.Contains(r.stderr, "local changes") || !strings.Contains(r.stderr, "main.go") {
		t.Fatalf("fetch onto a dirty checked-out branch: code %d, stderr %q", r.code, r.stderr)
	}
	if got := gitC(t, clone, "rev-parse", "behind"); got != first {
		t.Fatalf("dirty branch was changed to %s", got)
	}
	gitC(t, clone, "checkout", "--quiet", "--", "main.go")
	r = runCLI(t, env, "", "fetch", v.ID, "--repo", clone, "--branch", "behind")
	if r.code != 0 || !strings.Contains(r.stdout, "fast-forwarded") {
		t.Fatalf("fast-forward: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if got := gitC(t, clone, "rev-parse", "HEAD"); got != base {
		t.Fatalf("HEAD at %s, want %s", got, base)
	}
	if _, err := os.Stat(filepath.Join(clone, "second.txt")); err != nil {
		t.Fatalf("working tree not updated: %v", err)
	}

	// diff of a job that published nothing is empty.
	if r := runCLI(t, env, "", "diff", v.ID, "--repo", clone); r.code != 0 || r.stdout != "" {
		t.Fatalf("diff: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

func TestContextFilesAreChecked(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	writeFile(t, "spec.md", "# spec\n")
	writeFile(t, "docs/notes.txt", "notes\n")
	writeFile(t, ".env", "TOKEN=x\n")
	writeFile(t, "deploy.pem", "x\n")
	writeFile(t, "id_ed25519", "x\n")
	writeFile(t, "innocent.txt", "hi\n-----BEGIN RSA PRIVATE KEY-----\nMIIE\n")
	if err := os.Symlink("spec.md", "link.md"); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir("folder", 0o755); err != nil {
		t.Fatal(err)
	}
	big, err := os.Create("big.bin")
	if err != nil {
		t.Fatal(err)
	}
	if err := big.Truncate(rules.MaxContextFile + 1); err != nil {
		t.Fatal(err)
	}
	big.Close()
	outside := filepath.Join(t.TempDir(), "outside.txt")
	writeFile(t, outside, "outside\n")

	got, err := readContextFiles([]string{outside})
	if err != nil {
		t.Fatalf("good files: %v", err)
	}
	if len(got) != 1 || got[0].Name != "outside.txt" {
		t.Fatalf("absolute path kept as %+v", got)
	}
	got, err = readContextFiles([]string{"spec.md", "docs/notes.txt"})
	if err != nil || len(got) != 2 || got[1].Name != "docs/notes.txt" || string(got[1].Data) != "notes\n" {
		t.Fatalf("relative files: %+v %v", got, err)
	}
	many := make([]string, rules.MaxContextFiles+1)
	for i := range many {
		many[i] = "spec.md"
	}
	for _, tt := range []struct {
		paths []string
		want  string
	}{
		{[]string{"link.md"}, "symlink"},
		{[]string{"folder"}, "not a regular file"},
		{[]string{".env"}, ".env"},
		{[]string{"deploy.pem"}, "private key"},
		{[]string{"id_ed25519"}, "SSH key"},
		{[]string{"innocent.txt"}, "private key"},
		{[]string{"../" + filepath.Base(dir) + "/spec.md"}, "clean relative path"},
		{[]string{"big.bin"}, "limit"},
		{many, "limit is 100"},
		{[]string{"spec.md", "./spec.md"}, "twice"},
	} {
		if _, err := readContextFiles(tt.paths); err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%.60q: got %v, want an error mentioning %q", tt.paths, err, tt.want)
		}
	}

	// Through the CLI, a refused file stops the run before anything is sent.
	env, _ := realHub(t)
	repo, _ := userRepo(t)
	r := runCLI(t, env, "", "run", "--repo", repo, "--context", ".env", "--agent", "exec", "--", "true")
	if r.code != 1 || !strings.Contains(r.stderr, ".env") {
		t.Fatalf("run with .env: code %d, stderr %q", r.code, r.stderr)
	}
	if v := submitted(t, env, "--repo", repo, "--context", "spec.md", "--context", "docs/notes.txt"); v.ID == "" {
		t.Fatal("run with context files failed")
	}
}

func TestRunRepoOverTheTransferCapSaysWhatToDo(t *testing.T) {
	env, _ := realHub(t, hub.Config{TransferCap: 64 << 10})
	dir, _ := userRepo(t)
	noise := make([]byte, 256<<10)
	if _, err := rand.Read(noise); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "big.bin"), string(noise))
	gitC(t, dir, "add", "-A")
	gitC(t, dir, "commit", "--quiet", "-m", "big")
	r := runCLI(t, env, "", "run", "--repo", dir, "--agent", "exec", "--", "true")
	if r.code != 1 || !strings.Contains(r.stderr, "drover projects map web URL") {
		t.Fatalf("code %d, stderr %q", r.code, r.stderr)
	}
}
