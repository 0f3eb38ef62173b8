package rules

import (
	"fmt"
	"time"
)

// The agent tools and the person in the loop: questions, answers,
// deliveries, the live job context and resuming a session. The runner relays
// its tool server's calls as the ask, deliver and context requests; people
// answer over the HTTP API (AnswerRequest, QuestionList).

// Limits on what an agent or a person may send. The runner's tool server
// checks them first; the hub checks again what reaches it.
const (
	MaxQuestion       = 8 << 10  // bytes of a question
	MaxChoices        = 20       // choices offered with a question
	MaxChoice         = 500      // bytes of one choice
	MaxAnswer         = 64 << 10 // bytes of an answer
	MaxSummary        = 64 << 10 // bytes of a delivery summary
	MaxMessage        = 64 << 10 // bytes of a checkpoint message
	MaxSparseAdd      = 64       // folders of one sparse_add
	MaxQuestionExpiry = 365 * 24 * time.Hour
)

// CheckQuestion checks a question and its choices against the limits.
func CheckQuestion(question string, choices []string) error {
	if err := CheckText("question", question, MaxQuestion); err != nil {
		return err
	}
	if len(choices) > MaxChoices {
		return &LimitError{What: "choices", Size: len(choices), Limit: MaxChoices, Unit: "choices"}
	}
	for i, c := range choices {
		// A choice is one line: a newline in one could fake another.
		what := fmt.Sprintf("choice %d", i+1)
		if err := CheckText(what, c, MaxChoice); err != nil {
			return err
		}
		if err := CheckPlainText(what, c, false); err != nil {
			return err
		}
	}
	return nil
}

// QuestionExpiry is the wait of a question asked with expires_in_seconds
// (the tools' unit), from 0 (no expiry) to MaxQuestionExpiry.
func QuestionExpiry(seconds int64) (time.Duration, error) {
	if max := int64(MaxQuestionExpiry / time.Second); seconds < 0 || seconds > max { // more would overflow a Duration
		return 0, fmt.Errorf("expires_in_seconds is %d; want 0 (no expiry) to %d (a year)", seconds, max)
	}
	return time.Duration(seconds) * time.Second, nil
}

// CheckSummary checks a delivery's summary.
func CheckSummary(s string) error { return CheckText("summary", s, MaxSummary) }

// CheckMessage checks a checkpoint's message.
func CheckMessage(s string) error { return CheckText("message", s, MaxMessage) }

// CheckSparseAdd checks the number of folders one sparse_add names; the
// runner checks each with the sparse path rule.
func CheckSparseAdd(paths []string) error {
	if len(paths) == 0 || len(paths) > MaxSparseAdd {
		return fmt.Errorf("name 1 to %d folders", MaxSparseAdd)
	}
	return nil
}

// LimitError is an argument over a size limit (the hub answers too_large).
type LimitError struct {
	What        string
	Size, Limit int
	Unit        string // "" for bytes
}

func (e *LimitError) Error() string {
	unit := e.Unit
	if unit == "" {
		unit = "bytes"
	}
	return fmt.Sprintf("%s: %d %s; the limit is %d", e.What, e.Size, unit, e.Limit)
}
