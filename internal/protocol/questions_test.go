package protocol

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"
)

func TestAskValidate(t *testing.T) {
	many := make([]string, MaxChoices+1)
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
		{"at the limits", Ask{Question: strings.Repeat("q", MaxQuestion), Choices: []string{strings.Repeat("c", MaxChoice)}}, true, false},
		{"blank", Ask{Question: " \n "}, false, false},
		{"question too long", Ask{Question: strings.Repeat("q", MaxQuestion+1)}, false, true},
		{"too many choices", Ask{Question: "?", Choices: many}, false, true},
		{"choice too long", Ask{Question: "?", Choices: []string{strings.Repeat("c", MaxChoice+1)}}, false, true},
		{"blank choice", Ask{Question: "?", Choices: []string{"a", ""}}, false, false},
		{"escape sequence", Ask{Question: "\x1b]0;pwned\x07"}, false, false},
		{"not UTF-8", Ask{Question: "\xff"}, false, false},
		{"negative expiry", Ask{Question: "?", ExpiresIn: Duration(-time.Millisecond)}, false, false},
		{"expiry over a year", Ask{Question: "?", ExpiresIn: Duration(MaxQuestionExpiry + time.Millisecond)}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := tt.ask.Validate()
			var le *LimitError
			if (err == nil) != tt.ok || errors.As(err, &le) != tt.limit {
				t.Fatalf("Validate() = %v; want ok=%v limit=%v", err, tt.ok, tt.limit)
			}
		})
	}
}

func TestAnswerResolve(t *testing.T) {
	choices := []string{"sqlite", "postgres"}
	tests := []struct {
		req     AnswerRequest
		choices []string
		want    string
		ok      bool
	}{
		{AnswerRequest{Text: "free text"}, choices, "free text", true},
		{AnswerRequest{Choice: 2}, choices, "postgres", true},
		{AnswerRequest{Choice: 1, Text: "sqlite, in WAL mode"}, choices, "sqlite, in WAL mode", true},
		{AnswerRequest{Choice: 3}, choices, "", false},
		{AnswerRequest{Choice: -1}, choices, "", false},
		{AnswerRequest{Choice: 1}, nil, "", false},
		{AnswerRequest{}, choices, "", false},
		{AnswerRequest{Text: strings.Repeat("a", MaxAnswer+1)}, nil, "", false},
	}
	for _, tt := range tests {
		got, err := tt.req.Resolve(tt.choices)
		if (err == nil) != tt.ok || (tt.ok && got != tt.want) {
			t.Errorf("Resolve(%+v) = %q, %v; want %q ok=%v", tt.req, got, err, tt.want, tt.ok)
		}
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

// TestToolLimits holds each limit on what an agent's tools send, at the
// limit and one over: the runner's tool server and the hub both check
// with these functions.
func TestToolLimits(t *testing.T) {
	folders := func(n int) []string { return make([]string, n) }
	expiry := func(s int64) error { _, err := QuestionExpiry(s); return err }
	year := int64(MaxQuestionExpiry / time.Second)
	tests := []struct {
		name  string
		err   error
		ok    bool
		limit bool // refused as a LimitError
	}{
		{"question at the limit", CheckQuestion(strings.Repeat("q", MaxQuestion), nil), true, false},
		{"question over", CheckQuestion(strings.Repeat("q", MaxQuestion+1), nil), false, true},
		{"choices at the limit", CheckQuestion("?", strings.Split(strings.Repeat("c", MaxChoices), "")), true, false},
		{"choices over", CheckQuestion("?", strings.Split(strings.Repeat("c", MaxChoices+1), "")), false, true},
		{"choice at the limit", CheckQuestion("?", []string{strings.Repeat("c", MaxChoice)}), true, false},
		{"choice over", CheckQuestion("?", []string{strings.Repeat("c", MaxChoice+1)}), false, true},
		{"choice of two lines", CheckQuestion("?", []string{"a\nb"}), false, false},
		{"summary at the limit", CheckSummary(strings.Repeat("s", MaxSummary)), true, false},
		{"summary over", CheckSummary(strings.Repeat("s", MaxSummary+1)), false, true},
		{"blank summary", CheckSummary(" \n"), false, false},
		{"summary with an escape", CheckSummary("done\x1b[2J"), false, false},
		{"message at the limit", CheckMessage(strings.Repeat("m", MaxMessage)), true, false},
		{"message over", CheckMessage(strings.Repeat("m", MaxMessage+1)), false, true},
		{"one folder", CheckSparseAdd(folders(1)), true, false},
		{"folders at the limit", CheckSparseAdd(folders(MaxSparseAdd)), true, false},
		{"no folder", CheckSparseAdd(nil), false, false},
		{"folders over", CheckSparseAdd(folders(MaxSparseAdd + 1)), false, false},
		{"no expiry", expiry(0), true, false},
		{"expiry at the limit", expiry(year), true, false},
		{"expiry over", expiry(year + 1), false, false},
		{"negative expiry", expiry(-1), false, false},
		{"expiry that would overflow a Duration", expiry(1 << 62), false, false},
	}
	for _, tt := range tests {
		var le *LimitError
		if (tt.err == nil) != tt.ok || errors.As(tt.err, &le) != tt.limit {
			t.Errorf("%s: %v; want ok=%v limit=%v", tt.name, tt.err, tt.ok, tt.limit)
		}
	}
}
