package spec

import (
	"strings"
	"testing"
)

func TestParseVerdict(t *testing.T) {
	many := `{"approved":false,"findings":[` + strings.Repeat(`{"text":"x"},`, MaxFindings) + `{"text":"y"}]}`
	for _, tc := range []struct{ name, in, want string }{
		{"approved", `{"approved": true, "findings": []}`, ""},
		{"approved without findings", `{"approved": true}`, ""},
		{"rejected", `{"approved": false, "findings": [{"id": "F1", "text": "no tests", "file": "a.go", "line": 3}]}`, ""},
		{"empty", ``, "no JSON value"},
		{"not json", `approved`, "verdict:"},
		{"no approved", `{"findings": []}`, "approved is required"},
		{"approved null", `{"approved": null}`, "approved is required"},
		{"duplicate key", `{"approved": true, "approved": false}`, "verdict:"},
		{"duplicate key in case", `{"approved": true, "Approved": false}`, "verdict:"},
		{"unknown field", `{"approved": true, "score": 3}`, `unknown field "score"`},
		{"trailing data", `{"approved": true} {}`, "verdict:"},
		{"wrong type", `{"approved": "yes"}`, "verdict:"},
		{"blank finding", `{"approved": false, "findings": [{"text": "  "}]}`, "finding 1 text is required"},
		{"control in file", `{"approved": false, "findings": [{"text": "x", "file": "a\u001b[2J"}]}`, "finding 1 file has a control character"},
		{"negative line", `{"approved": false, "findings": [{"text": "x", "line": -1}]}`, "line -1 is negative"},
		{"too many findings", many, "201 findings; the limit is 200"},
		{"oversize", `{"approved": false, "findings": [{"text": "` + strings.Repeat("x", MaxVerdict) + `"}]}`, "bytes; the limit is 65536"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			v, err := ParseVerdict([]byte(tc.in))
			switch {
			case tc.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tc.want != "" && err == nil:
				t.Fatalf("accepted: %+v", v)
			case tc.want != "" && !strings.Contains(err.Error(), tc.want):
				t.Fatalf("error %q does not say %q", err, tc.want)
			}
		})
	}
	v, _ := ParseVerdict([]byte(`{"approved": false, "findings": [{"id": "F1", "text": "no tests", "file": "a.go", "line": 3}]}`))
	if v.Approved || len(v.Findings) != 1 || v.Findings[0] != (Finding{ID: "F1", Text: "no tests", File: "a.go", Line: 3}) {
		t.Fatalf("parsed %+v", v)
	}
}

func TestRepeats(t *testing.T) {
	round1 := Verdict{Findings: []Finding{{Text: "The parser panics on empty input."}, {Text: "no tests for Repeats"}}}
	for _, tc := range []struct {
		name  string
		round Verdict
		want  []string
	}{
		{"same text", Verdict{Findings: []Finding{{Text: "no tests for Repeats"}}}, []string{"no tests for Repeats"}},
		{"case, spacing and punctuation", Verdict{Findings: []Finding{{Text: "  the parser PANICS on empty input"}, {Text: "new: slow"}}}, []string{"  the parser PANICS on empty input"}},
		{"other id, file and line still repeat", Verdict{Findings: []Finding{{ID: "X9", Text: "no tests for repeats!", File: "b.go", Line: 9}}}, []string{"no tests for repeats!"}},
		{"new findings only", Verdict{Findings: []Finding{{Text: "the parser panics on empty output"}}}, nil},
		{"approved, nothing found", Verdict{Approved: true}, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got []string
			for _, f := range tc.round.Repeats(round1) {
				got = append(got, f.Text)
			}
			if strings.Join(got, "|") != strings.Join(tc.want, "|") {
				t.Fatalf("repeats %q, want %q", got, tc.want)
			}
		})
	}
	if r := round1.Repeats(Verdict{}); r != nil {
		t.Fatalf("a first round repeats %v", r)
	}
}
