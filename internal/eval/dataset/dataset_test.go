package dataset

import (
	"strings"
	"testing"
)

const base = "0123456789abcdef0123456789abcdef01234567"

// Every bad line is refused with its reason and the good ones go on; a
// duplicate instance_id keeps the first.
func TestReadRefusesBadLinesAndKeepsTheRest(t *testing.T) {
	in := strings.Join([]string{
		`{"instance_id": "a-1", "repo": "web", "base_commit": "` + base + `", "problem_statement": "p", "test_cmd": "make test"}`,
		``,
		`not json`,
		`{"instance_id": "b-1", "repo": "web", "base_commit": "` + base + `", "problem_statement": "p"}`,
		`{"instance_id": "a-1", "repo": "web", "base_commit": "` + base + `", "problem_statement": "again", "test_cmd": "true"}`,
		`{"instance_id": "c-1", "repo": "web", "base_commit": "main", "problem_statement": "p", "test_cmd": "true"}`,
		`{"instance_id": "d-1", "repo": "web", "base_commit": "` + base + `", "problem_statement": "p", "FAIL_TO_PASS": "[\"t1\"]", "PASS_TO_PASS": ["t2", "t1"]}`,
		`{"instance_id": "e#1", "repo": "web", "base_commit": "` + base + `", "problem_statement": "p", "test_cmd": "true"}`,
		`{"repo": "web"} {"repo": "web"}`,
		`{"instance_id": "f-1", "repo": "", "base_commit": "` + base + `", "problem_statement": " ", "test_cmd": "true"}`,
		`{"instance_id": "g-1", "repo": "web", "base_commit": "` + base + `", "problem_statement": "p", "test_cmd": "true", "image": "swebench/sweb.eval.x86_64.g-1"}`,
		`{"instance_id": "h-1", "repo": "web", "base_commit": "` + base + `", "problem_statement": "p", "test_cmd": "true", "image": "img -v /:/host"}`,
	}, "\n")
	lines, err := Read(strings.NewReader(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []struct {
		line    int
		id      string
		refused string
	}{
		{1, "a-1", ""},
		{3, "", "not a JSON instance"},
		{4, "b-1", "missing test_cmd or FAIL_TO_PASS/PASS_TO_PASS"},
		{5, "a-1", `duplicate instance_id "a-1" (first on line 1)`},
		{6, "c-1", "full 40-hex commit id"},
		{7, "d-1", ""},
		{8, "e#1", "without # or :"},
		{9, "", "more than one JSON value"},
		{10, "f-1", "missing repo, problem_statement"},
		{11, "g-1", ""},
		{12, "h-1", `image "img -v /:/host"`},
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d: %+v", len(lines), len(want), lines)
	}
	for i, w := range want {
		l := lines[i]
		if l.Line != w.line || l.InstanceID != w.id || !strings.Contains(l.Refused, w.refused) || (w.refused == "") != (l.Instance != nil) {
			t.Errorf("line %d: %+v, want id %q refused %q", w.line, l, w.id, w.refused)
		}
	}
	if got := Tests(*lines[5].Instance); strings.Join(got, ",") != "t1,t2" {
		t.Errorf("tests of d-1: %q", got)
	}
	if got := lines[9].Instance.Image; got != "swebench/sweb.eval.x86_64.g-1" {
		t.Errorf("image of g-1: %q", got)
	}
}
