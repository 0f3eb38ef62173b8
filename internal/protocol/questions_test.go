package protocol

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"drover/internal/rules"
)

func TestAskValidate(t *testing.T) {
	many := make([]string, rules.MaxChoices+1)
	for i := range many {
		many[i] = "c"
	}
	tests := []struct {
		name  string
		ask   Ask
		ok    bool
		limit bool // refused as a LimitError
	}{
		{"plain", Ask{Question: "Which one?\n\tDetails.", Choices: []string{"a", "b"}, ExpiresIn: Duration(time.Hour)}, true, false},
		{"at the limits", Ask{Question: strings.Repeat("q", rules.MaxQuestion), Choices: []string{strings.Repeat("c", rules.MaxChoice)}}, true, false},
		{"blank", Ask{Question: " \n "}, false, false},
		{"question too long", Ask{Question: strings.Repeat("q", rules.MaxQuestion+1)}, false, true},
		{"too many choices", Ask{Question: "?", Choices: many}, false, true},
		{"choice too long", Ask{Question: "?", Choices: []string{strings.Repeat("c", rules.MaxChoice+1)}}, false, true},
		{"blank choice", Ask{Question: "?", Choices: []string{"a", ""}}, false, false},
		{"escape sequence", Ask{Question: "\x1b]0;pwned\x07"}, false, false},
		{"not UTF-8", Ask{Question: "\xff"}, false, false},
		{"negative expiry", Ask{Question: "?", ExpiresIn: Duration(-time.Millisecond)}, false, false},
		{"expiry over a year", Ask{Question: "?", ExpiresIn: Duration(rules.MaxQuestionExpiry + time.Millisecond)}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.ask.Validate()
			var le *rules.LimitError
			if (err == nil) != tt.ok || errors.As(err, &le) != tt.limit {
				t.Fatalf("Validate() = %v; want ok=%v limit=%v", err, tt.ok, tt.limit)
			}
		})
	}
}

func TestFitHistoryKeepsTheNewest(t *testing.T) {
	var qs []QuestionView
	for i := range 10 {
		qs = append(qs, QuestionView{ID: string(rune('a' + i)), Question: strings.Repeat("x", 1000)})
	}
	one, _ := json.Marshal(qs[0])
	kept, omitted := FitHistory(qs, 3*len(one)+10)
	if len(kept) != 3 || omitted != 7 || kept[0].ID != "h" || kept[2].ID != "j" {
		t.Fatalf("kept %d (from %q), omitted %d", len(kept), kept[0].ID, omitted)
	}
	if kept, omitted := FitHistory(qs, 1<<20); len(kept) != 10 || omitted != 0 {
		t.Fatalf("everything fits: kept %d, omitted %d", len(kept), omitted)
	}
}
