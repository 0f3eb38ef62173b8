package agent

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"path/filepath"
	"strings"

	"drover/internal/gitcmd"
	"drover/internal/tools"
)

// MaxInstructionFile caps how much of one instruction file goes into the
// prompt: the prompt travels as one argv entry, which Linux limits to
// 128 KiB, and the agent can read the rest itself.
const MaxInstructionFile = 32 << 10

// MaxNestedList caps the bytes of nested AGENTS.md paths the prompt lists.
const MaxNestedList = 16 << 10

// PromptInput is what BuildPrompt assembles an attempt's prompt from.
type PromptInput struct {
	Prompt   string // the job's prompt
	Worktree string // the attempt's worktree, a git checkout
	// RootFiles are the instruction files at the worktree's root given in
	// full: AGENTS.md always, plus e.g. CLAUDE.md for Claude Code.
	RootFiles []string
	// Questions are earlier questions and their answers, for an attempt that
	// starts a fresh session after the job waited on a question.
	Questions []tools.QuestionRecord
	// Sparse are the folders a sparse worktree holds (none: it is whole).
	Sparse []string
}

// systemText maps habits of interactive use onto drover's tools; the CLIs'
// own system prompts assume a person at the terminal and a pushable remote.
const systemText = `You are working unattended for drover, in a git worktree of the job's repository. Nobody reads this terminal.
- Use drover's tools (` + tools.ServerName + `): "checkpoint" publishes your work in progress as a commit, "deliver" finishes the job with your summary, "ask" puts a question to the person who submitted the job, "context" shows the job, its attached files and earlier answers.
- Do not push, open pull or merge requests, or use a forge CLI (gh, glab, ...): drover publishes your commits. Where a workflow says to push or open a pull request, call checkpoint (and deliver at the end) instead.
- Do not ask in plain text or wait for terminal input: call ask, then end your turn.
- The job is completed only by deliver; a turn that ends without deliver or ask fails.`

// BuildPrompt assembles the prompt of an attempt: drover's system text, the
// root instruction files, where nested AGENTS.md files are (tracked ones
// only, so that build output cannot smuggle instructions in), earlier
// answers, and the job's prompt last, where models weigh it most.
func BuildPrompt(ctx context.Context, in PromptInput) (string, error) {
	if strings.TrimSpace(in.Prompt) == "" {
		return "", errors.New("prompt: the job has no prompt")
	}
	var b strings.Builder
	b.WriteString(systemText)
	b.WriteString("\n")
	if len(in.Sparse) > 0 {
		// Without it an agent takes the missing folders for missing code.
		fmt.Fprintf(&b, "- This worktree is a sparse checkout: it holds only %s, with the files of the top folder and of the folders on the way. "+
			"If the task needs files elsewhere, call %q with their folders; what you do not check out stays as it is in the result.\n",
			promptText([]byte(strings.Join(in.Sparse, ", "))), tools.ToolSparseAdd)
	}
	var nested []string
	if in.Worktree != "" { // a job without a repository has no instructions
		for _, name := range append([]string{"AGENTS.md"}, in.RootFiles...) {
			if err := writeRootFile(&b, in.Worktree, name); err != nil {
				return "", err
			}
		}
		var err error
		if nested, err = nestedAgentsFiles(ctx, in.Worktree); err != nil {
			return "", err
		}
	}
	if len(nested) > 0 {
		b.WriteString("\nThese directories have their own AGENTS.md; read it before you work in them:\n")
		listed := 0
		for _, p := range nested {
			// Bounded, as the root files are: the repository decides how
			// many there are, and a prompt over Linux's 128 KiB argv entry
			// limit kept the agent from starting.
			if listed+len(p) > MaxNestedList {
				fmt.Fprintf(&b, "- ... and more (git ls-files '**/AGENTS.md' lists them all)\n")
				break
			}
			listed += len(p)
			b.WriteString("- " + string(promptText([]byte(p))) + "\n")
		}
	}
	if len(in.Questions) > 0 {
		b.WriteString("\nYou asked these questions earlier in this job; the answers are the submitter's decisions:\n")
		for _, q := range in.Questions {
			fmt.Fprintf(&b, "\nQuestion: %s\n", q.Question)
			if q.Answer != nil && q.Answer.Approved {
				fmt.Fprintf(&b, "Answer: %s\n", q.Answer.Text)
			} else {
				b.WriteString("Answer: (none yet)\n")
			}
		}
	}
	b.WriteString("\n# The job\n\n")
	b.WriteString(in.Prompt)
	b.WriteString("\n")
	return b.String(), nil
}

// writeRootFile adds the worktree's file name, if it exists, in full up
// to MaxInstructionFile.
func writeRootFile(b *strings.Builder, worktree, name string) error {
	data, err := os.ReadFile(filepath.Join(worktree, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("prompt: read %s: %w", name, err)
	}
	fmt.Fprintf(b, "\n# %s (the repository's instructions)\n\n", name)
	if len(data) > MaxInstructionFile {
		fmt.Fprintf(b, "%s\n\n[%s is longer; read the rest of it yourself.]\n", promptText(data[:MaxInstructionFile]), name)
		return nil
	}
	b.Write(promptText(bytes.TrimRight(data, "\n")))
	b.WriteString("\n")
	return nil
}

// promptText makes a file's bytes fit for an argv entry (found by
// FuzzBuildPrompt): a NUL byte made exec refuse the whole command, so a
// repository's AGENTS.md holding one kept every agent from starting; and
// invalid UTF-8 was passed on only when the file was within the limit.
func promptText(data []byte) []byte {
	return bytes.ReplaceAll(bytes.ToValidUTF8(data, nil), []byte{0}, nil)
}

// nestedAgentsFiles lists the tracked AGENTS.md files below the root,
// through the workspace's git runner (sanitized environment, hooks and
// filters off): only that package runs git.
func nestedAgentsFiles(ctx context.Context, worktree string) ([]string, error) {
	out, err := gitcmd.Git{}.Run(ctx, gitcmd.Cmd{Dir: worktree,
		Args: []string{"ls-files", "-z", "--", ":(glob)**/AGENTS.md"}})
	if err != nil {
		return nil, fmt.Errorf("prompt: list AGENTS.md files: %w", err)
	}
	var paths []string
	for _, p := range strings.Split(string(out), "\x00") {
		if p != "" && p != "AGENTS.md" {
			paths = append(paths, p)
		}
	}
	return paths, nil
}
