package rules

import (
	"errors"
	"strings"
	"testing"
	"time"
)

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
