// Package dataset reads an evaluation's dataset, a JSONL file of
// SWE-bench-shaped instances, and holds the rule of a good instance: the
// CLI and the hub check a dataset by the same rule. A bad line is refused
// with its reason; the others go on.
package dataset

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"strings"

	"drover/internal/apitypes"
	"drover/internal/gitcmd"
	"drover/internal/rules"
)

// Limits on a dataset.
const (
	MaxLine      = 1 << 20 // bytes of one line
	MaxInstances = 5000
	MaxID        = 100 // bytes of an instance_id
	MaxProblem   = 256 << 10
	MaxTests     = 1000 // FAIL_TO_PASS and PASS_TO_PASS together
)

// Read reads a dataset: one instance a line, blank lines skipped. A line
// that is not an instance is returned refused; an error is a read error
// or a dataset over the limits.
func Read(r io.Reader) ([]apitypes.EvalLine, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), MaxLine)
	var out []apitypes.EvalLine
	for n := 1; sc.Scan(); n++ {
		b := bytes.TrimSpace(sc.Bytes())
		if len(b) == 0 {
			continue
		}
		if len(out) == MaxInstances {
			return nil, fmt.Errorf("line %d: a dataset holds at most %d instances", n, MaxInstances)
		}
		l := apitypes.EvalLine{Line: n}
		var in apitypes.EvalInstance
		dec := json.NewDecoder(bytes.NewReader(b))
		if err := dec.Decode(&in); err != nil {
			l.Refused = "not a JSON instance: " + err.Error()
		} else if dec.More() {
			l.Refused = "more than one JSON value on the line"
		} else {
			l.InstanceID, l.Instance = in.InstanceID, &in
		}
		out = append(out, l)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read dataset: %w", err)
	}
	return Check(out), nil
}

// Check refuses, with a reason, every line whose instance breaks the
// rules (Instance), and every later line of an instance_id seen before.
func Check(lines []apitypes.EvalLine) []apitypes.EvalLine {
	first := map[string]int{}
	out := make([]apitypes.EvalLine, len(lines))
	for i, l := range lines {
		if l.Refused == "" && l.Instance == nil {
			l.Refused = "no instance"
		}
		if l.Refused == "" {
			l.InstanceID = l.Instance.InstanceID
			if err := Instance(*l.Instance); err != nil {
				l.Refused = err.Error()
			}
		}
		if l.InstanceID != "" && l.Refused == "" {
			if n, dup := first[l.InstanceID]; dup {
				l.Refused = fmt.Sprintf("duplicate instance_id %q (first on line %d)", l.InstanceID, n)
			} else {
				first[l.InstanceID] = l.Line
			}
		}
		if l.Refused != "" {
			l.Instance = nil
			l.Refused = rules.Clip(l.Refused, 500)
			if rules.CheckPlainText("instance_id", l.InstanceID, false) != nil || len(l.InstanceID) > MaxID {
				l.InstanceID = ""
			}
		}
		out[i] = l
	}
	return out
}

// Instance checks one instance's fields. Repo may be a local path here
// (the CLI's); the hub takes only projects.
func Instance(in apitypes.EvalInstance) error {
	var missing []string
	for _, f := range []struct{ name, v string }{
		{"instance_id", in.InstanceID}, {"repo", in.Repo}, {"base_commit", in.BaseCommit}, {"problem_statement", in.ProblemStatement},
	} {
		if strings.TrimSpace(f.v) == "" {
			missing = append(missing, f.name)
		}
	}
	if in.TestCmd == "" && len(in.FailToPass)+len(in.PassToPass) == 0 {
		missing = append(missing, "test_cmd or FAIL_TO_PASS/PASS_TO_PASS")
	}
	if len(missing) > 0 {
		return fmt.Errorf("missing %s", strings.Join(missing, ", "))
	}
	if len(in.InstanceID) > MaxID || rules.CheckPlainText("instance_id", in.InstanceID, false) != nil || strings.ContainsAny(in.InstanceID, "#:") {
		return fmt.Errorf("instance_id %q: up to %d bytes of plain text without # or :", rules.Clip(in.InstanceID, MaxID), MaxID)
	}
	if !gitcmd.ValidCommitID(in.BaseCommit) {
		return fmt.Errorf("base_commit %q must be a full 40-hex commit id", rules.Clip(in.BaseCommit, 60))
	}
	if len(in.ProblemStatement) > MaxProblem {
		return fmt.Errorf("problem_statement: %d bytes; the limit is %d", len(in.ProblemStatement), MaxProblem)
	}
	if n := len(in.FailToPass) + len(in.PassToPass); n > MaxTests {
		return fmt.Errorf("%d tests; the limit is %d", n, MaxTests)
	}
	for _, t := range append(append([]string{in.TestCmd}, in.FailToPass...), in.PassToPass...) {
		if strings.ContainsRune(t, 0) || len(t) > 4096 {
			return fmt.Errorf("a test command holds a NUL or is over 4096 bytes")
		}
	}
	for _, t := range append(append([]string{}, in.FailToPass...), in.PassToPass...) {
		if strings.TrimSpace(t) == "" {
			return fmt.Errorf("an empty test in FAIL_TO_PASS/PASS_TO_PASS")
		}
	}
	if in.Image != "" {
		if err := rules.CheckImage(in.Image); err != nil {
			return err
		}
	}
	return nil
}

// Tests is every test of an instance, FAIL_TO_PASS first, each once.
func Tests(in apitypes.EvalInstance) []string {
	var out []string
	seen := map[string]bool{}
	for _, t := range append(append([]string{}, in.FailToPass...), in.PassToPass...) {
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out
}
