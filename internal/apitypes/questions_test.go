package apitypes

import (
	"strings"
	"testing"

	"drover/internal/rules"
)

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
		{AnswerRequest{Text: strings.Repeat("a", rules.MaxAnswer+1)}, nil, "", false},
	}
	for _, tt := range tests {
		got, err := tt.req.Resolve(tt.choices)
		if (err == nil) != tt.ok || (tt.ok && got != tt.want) {
			t.Errorf("Resolve(%+v) = %q, %v; want %q ok=%v", tt.req, got, err, tt.want, tt.ok)
		}
	}
}
