package apitypes

import (
	"fmt"
	"strings"

	"drover/internal/protocol"
	"drover/internal/rules"
)

// AnswerRequest answers the question a waiting job asked
// (POST /jobs/{id}/answer). Choice picks one of its choices (1-based);
// Text may then be empty and becomes the choice's text.
type AnswerRequest struct {
	Text   string `json:"text"`
	Choice int    `json:"choice,omitempty"`
}

// Resolve checks an answer against the question's choices and returns the
// text to record.
func (r AnswerRequest) Resolve(choices []string) (string, error) {
	if r.Choice < 0 || r.Choice > len(choices) {
		if len(choices) == 0 {
			return "", fmt.Errorf("choice %d: the question offers no choices; answer in text", r.Choice)
		}
		return "", fmt.Errorf("choice %d is out of range: pick 1 to %d", r.Choice, len(choices))
	}
	text := r.Text
	if strings.TrimSpace(text) == "" && r.Choice > 0 {
		text = choices[r.Choice-1]
	}
	return text, rules.CheckText("answer", text, rules.MaxAnswer)
}

// QuestionList is the answer to GET /questions: what waits on the caller.
type QuestionList struct {
	Questions []protocol.QuestionView `json:"questions"`
}
