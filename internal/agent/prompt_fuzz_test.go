package agent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzBuildPrompt: the root instruction files are the repository's (any
// bytes its author committed). The prompt built from them is one argv
// entry: it must hold no NUL (exec refuses it, so the agent would never
// start) and be valid UTF-8, and it carries at most MaxInstructionFile of
// each file.
func FuzzBuildPrompt(f *testing.F) {
	f.Add([]byte("# Rules\nRun make test.\n"), []byte("claude notes"))
	f.Add([]byte("a\x00b"), []byte{})
	f.Add([]byte("\xff\xfe invalid"), []byte("\xc3"))
	f.Add([]byte(strings.Repeat("x", MaxInstructionFile+10)), []byte{})
	git, err := exec.LookPath("git")
	if err != nil {
		f.Skip("git is not installed")
	}
	wt := f.TempDir()
	if out, err := exec.Command(git, "init", "-q", wt).CombinedOutput(); err != nil {
		f.Fatalf("git init: %v %s", err, out)
	}
	f.Fuzz(func(t *testing.T, agents, claude []byte) {
		if len(agents)+len(claude) > 4*MaxInstructionFile {
			return
		}
		if err := os.WriteFile(filepath.Join(wt, "AGENTS.md"), agents, 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(wt, "CLAUDE.md"), claude, 0o644); err != nil {
			t.Fatal(err)
		}
		p, err := BuildPrompt(context.Background(), PromptInput{Prompt: "fix it", Worktree: wt, RootFiles: []string{"CLAUDE.md"}})
		if err != nil {
			t.Fatal(err)
		}
		if strings.ContainsRune(p, 0) {
			t.Fatal("prompt holds a NUL byte")
		}
		if !utf8.ValidString(p) {
			t.Fatal("prompt is not UTF-8")
		}
		if max := len(systemText) + 2*MaxInstructionFile + 1024; len(p) > max {
			t.Fatalf("prompt of %d bytes, over %d", len(p), max)
		}
		if !strings.HasSuffix(p, "# The job\n\nfix it\n") {
			t.Fatalf("prompt does not end with the job's prompt: %q", p[max(0, len(p)-80):])
		}
	})
}

// TestNestedAgentsListIsBounded: a repository with thousands of nested
// AGENTS.md files gets a prompt that still fits in one argv entry.
func TestNestedAgentsListIsBounded(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("git is not installed")
	}
	wt := t.TempDir()
	if out, err := exec.Command(git, "init", "-q", wt).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	var idx strings.Builder
	for i := range 5000 { // index entries only: ls-files lists the index
		idx.WriteString("100644 e69de29bb2d1d6434b8b29ae775ad8c2e48c5391\t" + strings.Repeat("d", 20) + "/" + strconv.Itoa(i) + "/AGENTS.md\n")
	}
	cmd := exec.Command(git, "-C", wt, "update-index", "--index-info")
	cmd.Stdin = strings.NewReader(idx.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("update-index: %v %s", err, out)
	}
	p, err := BuildPrompt(context.Background(), PromptInput{Prompt: "go", Worktree: wt})
	if err != nil {
		t.Fatal(err)
	}
	if len(p) > 64<<10 || !strings.Contains(p, "and more") || !strings.Contains(p, "/0/AGENTS.md") {
		t.Fatalf("prompt of %d bytes", len(p))
	}
}
