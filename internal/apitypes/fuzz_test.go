package apitypes

import (
	"strings"
	"testing"

	"drover/internal/rules"
)

// Fuzz targets for what a peer sends: the gateway's frames and every
// message they carry, durations, text, context files and answers. Each
// checks that a parser never panics, that a refusal is an error (nothing
// half-decoded is trusted) and, where a format has one, that it round-trips.

// maxFuzzInput bounds what a target looks at: a frame is at most MaxFrame,
// and larger inputs only slow the fuzzer down.
const maxFuzzInput = 64 << 10

// FuzzAnswerResolve: an answer resolves to checked text, a choice out of
// range is refused, and a choice picks exactly its own text.
func FuzzAnswerResolve(f *testing.F) {
	f.Add("", 1, "yes\x00no")
	f.Add("free text", 0, "")
	f.Add(" ", 3, "a\x00b")
	f.Add("x", -1, "a")
	f.Add("", 0, "a")
	f.Fuzz(func(t *testing.T, text string, choice int, joined string) {
		if len(text)+len(joined) > maxFuzzInput {
			return
		}
		var choices []string
		if joined != "" {
			choices = strings.Split(joined, "\x00")
		}
		got, err := AnswerRequest{Text: text, Choice: choice}.Resolve(choices)
		if choice < 0 || choice > len(choices) {
			if err == nil {
				t.Fatalf("choice %d of %d accepted", choice, len(choices))
			}
			return
		}
		if err != nil {
			return
		}
		if rules.CheckText("answer", got, rules.MaxAnswer) != nil {
			t.Fatalf("resolved answer %q does not pass CheckText", got)
		}
		want := text
		if strings.TrimSpace(text) == "" && choice > 0 {
			want = choices[choice-1]
		}
		if got != want {
			t.Fatalf("answer %q choice %d resolved to %q, want %q", text, choice, got, want)
		}
	})
}
