package agent

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"drover/internal/tools"
)

func gitRepo(t *testing.T, files map[string]string, tracked ...string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git := func(args ...string) {
		if out, err := exec.Command("git", append([]string{"-C", dir}, args...)...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	git("init", "-q")
	if len(tracked) > 0 {
		git(append([]string{"add", "--"}, tracked...)...)
	}
	return dir
}

func TestBuildPrompt(t *testing.T) {
	files := map[string]string{
		"AGENTS.md":           "Run make test.\n",
		"CLAUDE.md":           "Prefer small commits.\n",
		"a/AGENTS.md":         "a rules",
		"b/c/AGENTS.md":       "c rules",
		"untracked/AGENTS.md": "sneaky",
	}
	dir := gitRepo(t, files, "AGENTS.md", "CLAUDE.md", "a/AGENTS.md", "b/c/AGENTS.md")
	answered := &tools.Answer{Text: "use postgres", Approved: true}
	pending := &tools.Answer{Text: "use mysql"}
	tests := []struct {
		name string
		in   PromptInput
		has  []string
		not  []string
	}{
		{"codex", PromptInput{Prompt: "Fix the bug.", Worktree: dir},
			[]string{"working unattended for drover", `"checkpoint"`, "# AGENTS.md", "Run make test.", "- a/AGENTS.md\n- b/c/AGENTS.md\n",
				"# The job\n\nFix the bug.\n"},
			[]string{"Prefer small commits", "untracked", "Question:", "sparse"}},
		{"claude with history", PromptInput{Prompt: "Fix the bug.", Worktree: dir, RootFiles: []string{"CLAUDE.md"},
			Questions: []tools.QuestionRecord{{Question: "Which database?", Answer: answered}, {Question: "Which port?", Answer: pending}}},
			[]string{"# CLAUDE.md", "Prefer small commits.", "Question: Which database?\nAnswer: use postgres\n",
				"Question: Which port?\nAnswer: (none yet)\n"},
			[]string{"use mysql"}},
		{"sparse", PromptInput{Prompt: "Fix the bug.", Worktree: dir, Sparse: []string{"a", "b/c"}},
			[]string{"sparse checkout: it holds only a, b/c,", `"sparse_add"`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := BuildPrompt(context.Background(), tt.in)
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range tt.has {
				if !strings.Contains(p, s) {
					t.Errorf("prompt lacks %q:\n%s", s, p)
				}
			}
			for _, s := range tt.not {
				if strings.Contains(p, s) {
					t.Errorf("prompt has %q:\n%s", s, p)
				}
			}
			if strings.HasPrefix(p, "-") {
				t.Error("prompt starts with '-': a CLI would take it for a flag")
			}
		})
	}
}

func TestBuildPromptEdges(t *testing.T) {
	big := strings.Repeat("x", MaxInstructionFile+100)
	dir := gitRepo(t, map[string]string{"AGENTS.md": big}, "AGENTS.md")
	p, err := BuildPrompt(context.Background(), PromptInput{Prompt: "p", Worktree: dir})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(p, big) || !strings.Contains(p, "AGENTS.md is longer") {
		t.Error("long AGENTS.md not cut")
	}
	empty := gitRepo(t, nil)
	if p, err := BuildPrompt(context.Background(), PromptInput{Prompt: "p", Worktree: empty}); err != nil || strings.Contains(p, "# AGENTS.md") {
		t.Errorf("no AGENTS.md: %v\n%s", err, p)
	}
	if _, err := BuildPrompt(context.Background(), PromptInput{Prompt: " ", Worktree: empty}); err == nil {
		t.Error("empty prompt accepted")
	}
	if _, err := BuildPrompt(context.Background(), PromptInput{Prompt: "p", Worktree: t.TempDir()}); err == nil {
		t.Error("a directory that is no git checkout was accepted")
	}
}
