package forgehook

import (
	"fmt"
	"regexp"
	"strings"

	"drover/internal/rules"
)

// Verbs of a comment command.
const (
	VerbRun     = "run"
	VerbRetry   = "retry"
	VerbCancel  = "cancel"
	VerbAddress = "address"
)

// DefaultPrefix starts a comment command unless a project chose another.
const DefaultPrefix = "/drover"

// maxCommandLine bounds a command's first line.
const maxCommandLine = 1024

// Command is a comment command: `PREFIX run [--agent A] PROMPT`,
// `PREFIX retry`, `PREFIX cancel` or `PREFIX address`.
type Command struct {
	Verb  string
	Agent string // run's --agent; "" for the project's default
	// Prompt is run's: the rest of the first line, then the comment's
	// other lines; address's: the other lines. Untrusted text for the
	// agent.
	Prompt string
}

// shellChars are what a command's line may not hold: nothing runs it in a
// shell, but a comment holding them was written for one, and a refusal
// says so rather than guess.
const shellChars = "`$;|&<>\\(){}"

var (
	agentRE  = regexp.MustCompile(`^[a-z0-9][a-z0-9._-]{0,63}$`)
	prefixRE = regexp.MustCompile(`^[/@!][A-Za-z0-9][A-Za-z0-9._-]{0,31}$`)
)

// CheckPrefix is the rule of a command prefix a project may choose: '/',
// '@' or '!' then a name.
func CheckPrefix(p string) error {
	if !prefixRE.MatchString(p) {
		return fmt.Errorf("command prefix %q: '/', '@' or '!' then 1-32 letters, digits or ._-", rules.Clip(rules.Escape(p, false), 40))
	}
	return nil
}

// ParseCommand reads a comment's body as a command of prefix. Only a
// comment whose first line starts with prefix (then a space or the line's
// end) is one: a quoted or indented line, a code block, or a mention
// further down is not (ok false, no error). A comment that is one but
// malformed is an error that says why, for the reply.
func ParseCommand(prefix, body string) (cmd Command, ok bool, err error) {
	first, rest, _ := strings.Cut(body, "\n")
	first = strings.TrimSuffix(first, "\r")
	if !strings.HasPrefix(first, prefix) {
		return Command{}, false, nil
	}
	after := first[len(prefix):]
	if after != "" && after[0] != ' ' && after[0] != '\t' {
		return Command{}, false, nil // "/droverx", "/drover-bot": another word
	}
	if len(first) > maxCommandLine {
		return Command{}, true, &rules.LimitError{What: "command line", Size: len(first), Limit: maxCommandLine}
	}
	if err := rules.CheckPlainText("command", first, false); err != nil {
		return Command{}, true, err
	}
	if i := strings.IndexAny(first, shellChars); i >= 0 {
		return Command{}, true, fmt.Errorf("the command holds %q: commands take no shell syntax; write the prompt on the lines below", first[i])
	}
	words := strings.Fields(after)
	if len(words) == 0 {
		return Command{}, true, fmt.Errorf("no command after %s: want %s run [--agent A] PROMPT, %s retry, %s cancel or %s address",
			prefix, prefix, prefix, prefix, prefix)
	}
	cmd.Verb, words = words[0], words[1:]
	switch cmd.Verb {
	case VerbRetry, VerbCancel, VerbAddress:
		if len(words) > 0 {
			return Command{}, true, fmt.Errorf("%s %s takes nothing after it, not %q", prefix, cmd.Verb, rules.Clip(words[0], 40))
		}
		if cmd.Verb == VerbAddress {
			// The review's words below the command reach the agent, as a
			// review's requesting changes do.
			cmd.Prompt = strings.TrimSpace(rest)
			if err := rules.CheckPlainText("prompt", cmd.Prompt, true); err != nil {
				return Command{}, true, err
			}
		}
		return cmd, true, nil
	case VerbRun:
	default:
		return Command{}, true, fmt.Errorf("unknown command %q: want run, retry, cancel or address", rules.Clip(cmd.Verb, 40))
	}
flags:
	for len(words) > 0 && strings.HasPrefix(words[0], "-") {
		flag, val, hasVal := strings.Cut(words[0], "=")
		words = words[1:]
		switch flag {
		case "--":
			if hasVal {
				return Command{}, true, fmt.Errorf("unknown flag %q", rules.Clip(flag+"="+val, 40))
			}
			break flags
		case "--agent":
		default:
			return Command{}, true, fmt.Errorf("unknown flag %q: %s run takes only --agent", rules.Clip(flag, 40), prefix)
		}
		if !hasVal {
			if len(words) == 0 {
				return Command{}, true, fmt.Errorf("--agent needs an agent's name")
			}
			val, words = words[0], words[1:]
		}
		if cmd.Agent != "" {
			return Command{}, true, fmt.Errorf("--agent given twice")
		}
		if !agentRE.MatchString(val) {
			return Command{}, true, fmt.Errorf("agent %q: 1-64 lower-case letters, digits or ._-", rules.Clip(val, 40))
		}
		cmd.Agent = val
	}
	cmd.Prompt = strings.TrimSpace(strings.Join(words, " ") + "\n" + rest)
	if cmd.Prompt == "" {
		return Command{}, true, fmt.Errorf("%s run needs a prompt: what the agent should do", prefix)
	}
	if err := rules.CheckPlainText("prompt", cmd.Prompt, true); err != nil {
		return Command{}, true, err
	}
	return cmd, true, nil
}
