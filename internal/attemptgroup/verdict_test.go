package attemptgroup

import (
	"strings"
	"testing"
)

func TestParseVerdict(t *testing.T) {
	for _, tc := range []struct {
		name, data string
		want       []int // the ranking, or nil for a refusal
		err        string
	}{
		{"valid", `{"ranking": [{"attempt": "attempt-2", "reason": "tests pass"}, {"attempt": "attempt-1", "reason": "no tests"}, {"attempt": "attempt-3", "reason": "breaks"}]}`, []int{2, 1, 3}, ""},
		{"empty", ``, nil, "delivered nothing"},
		{"not json", `attempt-2 is best`, nil, "not a JSON verdict"},
		{"fenced", "```json\n{\"ranking\": []}\n```", nil, "not a JSON verdict"},
		{"two values", `{"ranking": []} {"ranking": []}`, nil, "not a JSON verdict"},
		{"key twice", `{"ranking": [], "ranking": []}`, nil, "not a JSON verdict"},
		{"no ranking", `{}`, nil, "no ranking"},
		{"null ranking", `{"ranking": null}`, nil, "no ranking"},
		{"unknown field", `{"ranking": [], "winner": "attempt-1"}`, nil, "unknown field"},
		{"unknown field in a place", `{"ranking": [{"attempt": "attempt-1", "reason": "r", "score": 3}]}`, nil, "unknown field"},
		{"unknown attempt", `{"ranking": [{"attempt": "attempt-4", "reason": "r"}, {"attempt": "attempt-1", "reason": "r"}, {"attempt": "attempt-2", "reason": "r"}, {"attempt": "attempt-3", "reason": "r"}]}`, nil, `"attempt-4" is not an attempt`},
		{"number", `{"ranking": [{"attempt": "2", "reason": "r"}]}`, nil, "is not an attempt"},
		{"leading zero", `{"ranking": [{"attempt": "attempt-01", "reason": "r"}]}`, nil, "is not an attempt"},
		{"duplicate", `{"ranking": [{"attempt": "attempt-1", "reason": "r"}, {"attempt": "attempt-1", "reason": "r"}, {"attempt": "attempt-2", "reason": "r"}]}`, nil, "ranked twice"},
		{"missing", `{"ranking": [{"attempt": "attempt-1", "reason": "r"}, {"attempt": "attempt-3", "reason": "r"}]}`, nil, "attempt-2 is not ranked"},
		{"blank reason", `{"ranking": [{"attempt": "attempt-1", "reason": " "}, {"attempt": "attempt-2", "reason": "r"}, {"attempt": "attempt-3", "reason": "r"}]}`, nil, "must not be blank"},
		{"control in reason", `{"ranking": [{"attempt": "attempt-1", "reason": "a\u001b[2Jb"}, {"attempt": "attempt-2", "reason": "r"}, {"attempt": "attempt-3", "reason": "r"}]}`, nil, "reason"},
		{"long reason", `{"ranking": [{"attempt": "attempt-1", "reason": "` + strings.Repeat("x", MaxReason+1) + `"}, {"attempt": "attempt-2", "reason": "r"}, {"attempt": "attempt-3", "reason": "r"}]}`, nil, "limit"},
		{"too big", `{"ranking": [], "x": "` + strings.Repeat("x", MaxVerdict) + `"}`, nil, "the limit is"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := ParseVerdict([]byte(tc.data), 3)
			if tc.want == nil {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("got %v, %v; want an error with %q", got, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			for i, k := range tc.want {
				if got[i].Attempt != k || got[i].Reason == "" {
					t.Fatalf("got %+v, want %v", got, tc.want)
				}
			}
		})
	}
}
