package eval

import (
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/store"
)

func TestIsTestPath(t *testing.T) {
	for p, want := range map[string]bool{
		"tests/test_add.sh": true, "pkg/x_test.go": true, "src/test_util.py": true, "a/__tests__/b.js": true,
		"web/app.test.ts": true, "lib/foo_spec.rb": true, "src/FooTest.java": true, "conftest.py": true,
		"internal/testdata/x.json": true, "Test/x": true,
		"calc.sh": false, "src/testing_utils_impl.go": false, "latest/x.go": false, "contest.py": false, "attest.go": false,
	} {
		if got := IsTestPath(p); got != want {
			t.Errorf("IsTestPath(%q) = %v, want %v", p, got, want)
		}
	}
}

func TestPassAtK(t *testing.T) {
	for _, c := range []struct {
		n, c, k int
		want    float64
	}{
		{1, 1, 1, 1}, {1, 0, 1, 0}, {4, 1, 1, 0.25}, {4, 2, 1, 0.5},
		{4, 1, 2, 0.5},       // 1 - C(3,2)/C(4,2) = 1 - 3/6
		{5, 2, 3, 0.9},       // 1 - C(3,3)/C(5,3) = 1 - 1/10
		{3, 0, 3, 0},         // none passed
		{2, 1, 3, 1},         // k past n: one passed of all drawn
		{0, 0, 1, 0},         // no sample
		{10, 3, 10, 1},       // every sample drawn
		{10, 3, 2, 8.0 / 15}, // 1 - C(7,2)/C(10,2) = 1 - 21/45
	} {
		if got := PassAtK(c.n, c.c, c.k); math.Abs(got-c.want) > 1e-12 {
			t.Errorf("PassAtK(%d, %d, %d) = %v, want %v", c.n, c.c, c.k, got, c.want)
		}
	}
}

// The report counts each graded sample once: refused lines, skipped and
// pending samples are listed but not counted; an instance's pass@N comes
// of its samples in every repeat.
func TestReportCountsEachGradedSampleOnce(t *testing.T) {
	ev := store.Eval{ID: "e-1", Name: "m", Params: `{"attempts":2,"repeats":2}`, State: store.EvalDone, CreatedAt: time.Unix(0, 0)}
	item := func(id string, r, a int, s store.EvalItemState, cost float64, patch string) store.EvalItem {
		return store.EvalItem{EvalID: "e-1", InstanceID: id, Repeat: r, Attempt: a, State: s, CostUSD: cost, Tokens: 100, Patch: patch}
	}
	items := []store.EvalItem{
		item("", 0, 0, store.ItemRefused, 0, ""),
		item("a", 1, 1, store.ItemResolved, 1, "pa"), item("a", 1, 2, store.ItemResolved, 1, ""),
		item("a", 2, 1, store.ItemUnresolved, 1, ""), item("a", 2, 2, store.ItemResolved, 1, ""),
		item("b", 1, 1, store.ItemUnresolved, 1, "pb"), item("b", 1, 2, store.ItemUnresolved, 1, ""),
		item("b", 2, 1, store.ItemUnresolved, 1, ""), item("b", 2, 2, store.ItemSkipped, 0, ""),
		item("c", 1, 1, store.ItemAgent, 0.5, ""),
	}
	r := report(ev, items)
	if r.Instances != 2 || r.Total != 7 || r.Resolved != 3 || r.Refused != 1 || r.Skipped != 1 || r.Pending != 1 || r.N != 2 {
		t.Fatalf("report: %+v", r)
	}
	// a: n=4 c=3: pass@1 .75, pass@2 1; b: 0 and 0.
	if math.Abs(r.PassAt1-0.375) > 1e-12 || math.Abs(r.PassAtN-0.5) > 1e-12 {
		t.Errorf("pass@1 %v pass@2 %v, want 0.375 and 0.5", r.PassAt1, r.PassAtN)
	}
	if r.CostUSD != 7.5 || math.Abs(r.CostPerResolved-2.5) > 1e-12 || r.Tokens != 1000 {
		t.Errorf("cost %v (per resolved %v), tokens %d", r.CostUSD, r.CostPerResolved, r.Tokens)
	}
	// Repeat 1: 2 of 4; repeat 2: 1 of 3.
	if len(r.Repeats) != 2 || r.Repeats[0].Resolved != 2 || r.Repeats[0].Total != 4 || r.Repeats[1].Resolved != 1 || r.Repeats[1].Total != 3 {
		t.Fatalf("repeats: %+v", r.Repeats)
	}
	lo, hi := 1.0/3, 0.5
	sd := math.Sqrt(((lo-5.0/12)*(lo-5.0/12) + (hi-5.0/12)*(hi-5.0/12)) / 1)
	if math.Abs(r.Min-lo) > 1e-12 || math.Abs(r.Max-hi) > 1e-12 || math.Abs(r.Stddev-sd) > 1e-12 {
		t.Errorf("spread %v %v %v, want %v %v %v", r.Min, r.Max, r.Stddev, lo, hi, sd)
	}
	want := []apitypes.EvalPrediction{{InstanceID: "a", ModelNameOrPath: "m", ModelPatch: "pa"}, {InstanceID: "b", ModelNameOrPath: "m", ModelPatch: "pb"}}
	if len(r.Predictions) != 2 || r.Predictions[0] != want[0] || r.Predictions[1] != want[1] {
		t.Errorf("predictions %+v", r.Predictions)
	}
}

// The grading script passes only when every test does, stops at a test
// past its wall limit with timeout's code, and gives each named test to
// test_cmd as its argument.
func TestGradeScript(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "run.sh"), []byte("case $1 in ok*) exit 0;; hang) sleep 60;; *) exit 1;; esac\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name string
		in   apitypes.EvalInstance
		want int
	}{
		{"test_cmd passes", apitypes.EvalInstance{TestCmd: "sh run.sh ok"}, 0},
		{"test_cmd fails", apitypes.EvalInstance{TestCmd: "sh run.sh no"}, 1},
		{"test_cmd hangs", apitypes.EvalInstance{TestCmd: "sh run.sh hang"}, exitWall},
		{"named tests pass", apitypes.EvalInstance{TestCmd: "sh run.sh", FailToPass: []string{"ok 1"}, PassToPass: []string{"ok2"}}, 0},
		{"a named test fails", apitypes.EvalInstance{TestCmd: "sh run.sh", FailToPass: []string{"ok"}, PassToPass: []string{"no"}}, 1},
		{"commands", apitypes.EvalInstance{FailToPass: []string{"true"}, PassToPass: []string{"sh run.sh ok"}}, 0},
		{"a command fails", apitypes.EvalInstance{FailToPass: []string{"false"}, PassToPass: []string{"true"}}, 1},
		{"a command hangs", apitypes.EvalInstance{FailToPass: []string{"sh run.sh hang"}, PassToPass: []string{"true"}}, exitWall},
	} {
		t.Run(c.name, func(t *testing.T) {
			args := gradeArgs(c.in, 1)
			cmd := exec.Command(args[0], args[1:]...)
			cmd.Dir = dir
			out, err := cmd.CombinedOutput()
			code := 0
			if ee, ok := err.(*exec.ExitError); ok {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != c.want {
				t.Errorf("exit %d, want %d:\n%s", code, c.want, out)
			}
		})
	}
}

// A run's name and dataset are plain text of up to 200 bytes: anything
// else is refused before anything is kept.
func TestParamsRefuseBadNames(t *testing.T) {
	ok := apitypes.EvalRunRequest{Agent: "claude", Name: "claude/opus", Dataset: "lite.jsonl", Lines: []apitypes.EvalLine{{Line: 1, Refused: "x"}}}
	if p, err := params(ok); err != nil || p.Dataset != "lite.jsonl" {
		t.Fatalf("good request: %+v %v", p, err)
	}
	for _, tc := range []struct {
		name string
		bad  func(*apitypes.EvalRunRequest)
		want string
	}{
		{"name with ESC", func(r *apitypes.EvalRunRequest) { r.Name = "x\x1b[2J" }, "name:"},
		{"long name", func(r *apitypes.EvalRunRequest) { r.Name = strings.Repeat("n", 201) }, "name:"},
		{"dataset with a newline", func(r *apitypes.EvalRunRequest) { r.Dataset = "a\nb" }, "dataset:"},
		{"long dataset", func(r *apitypes.EvalRunRequest) { r.Dataset = strings.Repeat("d", 201) }, "dataset:"},
	} {
		req := ok
		tc.bad(&req)
		if _, err := params(req); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want a refusal of %s", tc.name, err, tc.want)
		}
	}
}
