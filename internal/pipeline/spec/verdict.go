package spec

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strings"
	"unicode"

	"drover/internal/rules"
)

// Limits on a verdict.
const (
	MaxVerdict  = 64 << 10 // bytes
	MaxFindings = 200
)

// Verdict is what an adversary step delivers: whether it approves, and
// what it found.
type Verdict struct {
	Approved bool      `json:"approved"`
	Findings []Finding `json:"findings"`
}

// Finding is one thing a verdict found; File and Line place it, when given.
type Finding struct {
	ID   string `json:"id,omitempty"`
	Text string `json:"text"`
	File string `json:"file,omitempty"`
	Line int    `json:"line,omitempty"`
}

// ParseVerdict reads a verdict strictly: well-formed JSON (rules.CheckJSON:
// no key twice, bounded depth), no unknown field, "approved" present,
// within MaxVerdict and MaxFindings, and each finding's text plain and not
// blank. Silence is not approval: empty data is refused.
func ParseVerdict(data []byte) (Verdict, error) {
	var v Verdict
	if len(data) > MaxVerdict {
		return v, fmt.Errorf("verdict: %d bytes; the limit is %d", len(data), MaxVerdict)
	}
	if err := rules.CheckJSON(data); err != nil {
		return v, fmt.Errorf("verdict: %w", err)
	}
	var probe struct {
		Approved *bool `json:"approved"`
	}
	if err := json.Unmarshal(data, &probe); err != nil {
		return v, fmt.Errorf("verdict: %w", err)
	}
	if probe.Approved == nil {
		return v, fmt.Errorf("verdict: approved is required")
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&v); err != nil {
		return Verdict{}, fmt.Errorf("verdict: %w", err)
	}
	if len(v.Findings) > MaxFindings {
		return Verdict{}, fmt.Errorf("verdict: %d findings; the limit is %d", len(v.Findings), MaxFindings)
	}
	for i, f := range v.Findings {
		what := fmt.Sprintf("finding %d", i+1)
		if err := rules.CheckText(what+" text", f.Text, MaxVerdict); err != nil {
			return Verdict{}, fmt.Errorf("verdict: %w", err)
		}
		for _, fd := range []struct{ name, val string }{{"id", f.ID}, {"file", f.File}} {
			if err := rules.CheckPlainText(what+" "+fd.name, fd.val, false); err != nil {
				return Verdict{}, fmt.Errorf("verdict: %w", err)
			}
		}
		if f.Line < 0 {
			return Verdict{}, fmt.Errorf("verdict: %s line %d is negative", what, f.Line)
		}
	}
	return v, nil
}

// Repeats returns the findings of v that earlier already had, compared on
// their text with case, punctuation and spacing folded: a loop whose round
// repeats a finding is not converging.
func (v Verdict) Repeats(earlier Verdict) []Finding {
	seen := map[string]bool{}
	for _, f := range earlier.Findings {
		seen[normalize(f.Text)] = true
	}
	var out []Finding
	for _, f := range v.Findings {
		if seen[normalize(f.Text)] {
			out = append(out, f)
		}
	}
	return out
}

// normalize is a finding's text as Repeats compares it: lower case, words
// of letters and digits separated by one space.
func normalize(s string) string {
	return strings.Join(strings.FieldsFunc(strings.ToLower(s), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsDigit(r)
	}), " ")
}
