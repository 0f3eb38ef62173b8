package eval

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/client"
	"drover/internal/e2e/e2ekit"
	"drover/internal/testkit"
)

// evalSet is the synthetic SWE-bench-shaped set of testdata/eval, made
// real in a temporary folder: each of repos/* becomes a repository of one
// commit, and the dataset names those commits. It returns the dataset's
// path.
func evalSet(t *testing.T) string {
	t.Helper()
	src := filepath.Join("testdata", "eval")
	dst := filepath.Join(t.TempDir(), "eval")
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dst, "dataset.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	repos, err := os.ReadDir(filepath.Join(dst, "repos"))
	if err != nil {
		t.Fatal(err)
	}
	text := string(data)
	for _, r := range repos {
		dir := filepath.Join(dst, "repos", r.Name())
		e2ekit.Git(t, dir, "init", "--quiet")
		e2ekit.Git(t, dir, "add", "-A")
		e2ekit.Git(t, dir, "commit", "--quiet", "-m", "planted bug "+r.Name())
		text = strings.ReplaceAll(text, "BASE_"+r.Name(), e2ekit.Git(t, dir, "rev-parse", "HEAD"))
	}
	path := filepath.Join(dst, "dataset.jsonl")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// evalPlanted is what the set plants: each instance resolved or not by
// the scripted agent (testdata/eval/agent.sh).
var evalPlanted = map[string]bool{
	"calc__add-1": true, "calc__mul-1": true, "calc__neg-1": true, "calc__inc-1": true,
	"text__upper-1": false, "text__rev-1": false, "calc__sub-1": false, "calc__double-1": false, "calc__hang-1": false,
}

func waitEval(t *testing.T, c *client.Client, id string, d time.Duration, cond func(apitypes.EvalView) bool) apitypes.EvalView {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		v, err := c.Eval(ctx, id)
		cancel()
		if err == nil && cond(v) {
			return v
		}
		if time.Now().After(deadline) {
			b, _ := json.MarshalIndent(v, "", "  ")
			t.Fatalf("evaluation %s: condition not met within %s (err %v); last:\n%s", id, d, err, b)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// An evaluation of the synthetic set, its hub killed mid-run: the report
// matches what the set plants (a rewritten test changes no grade), every
// bad line is refused with its reason, and no instance ran twice.
func TestEvalOfTheSyntheticSetSurvivesHubKill(t *testing.T) {
	t.Parallel()
	h := testkit.StartHub(t, bin)
	h.StartRunner(t, "r1")
	c := h.Client()
	dataset := evalSet(t)
	agent, err := os.ReadFile(filepath.Join("testdata", "eval", "agent.sh"))
	if err != nil {
		t.Fatal(err)
	}
	args := []string{"eval", "run", dataset, "--agent", "exec", "--exec", string(agent),
		"--repeats", "2", "--max-parallel", "3", "--grade-wall", "3s"}
	out, err := h.CLI(args...)
	if err != nil {
		t.Fatalf("drover eval run: %v\n%s", err, out)
	}
	id := strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])

	// Killed once some items were graded and others not yet.
	waitEval(t, c, id, 5*time.Minute, func(v apitypes.EvalView) bool {
		return v.Counts["resolved"]+v.Counts["unresolved"] >= 2
	})
	h.Kill()
	h.Restart()
	h.StartRunner(t, "r2")
	v := waitEval(t, c, id, 10*time.Minute, func(v apitypes.EvalView) bool { return v.State != "running" })

	// The same command again finds the same evaluation.
	if again, err := h.CLI(args...); err != nil || !strings.Contains(again, id) {
		t.Fatalf("drover eval run again: %v\n%s", err, again)
	}

	preds := filepath.Join(t.TempDir(), "preds.jsonl")
	out, err = h.CLI("eval", "report", id, "--json", "--predictions", preds)
	if err != nil {
		t.Fatalf("drover eval report: %v\n%s", err, out)
	}
	var r apitypes.EvalReport
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("report: %v\n%s", err, out)
	}
	planted := 0
	for _, ok := range evalPlanted {
		if ok {
			planted++
		}
	}
	if r.Instances != len(evalPlanted) || r.Total != 2*len(evalPlanted) || r.Resolved != 2*planted || r.Refused != 4 || r.Pending != 0 || r.Skipped != 0 {
		t.Fatalf("report: %d instances, %d/%d resolved, %d refused, %d pending, %d skipped; want %d, %d/%d, 4, 0, 0\n%s",
			r.Instances, r.Resolved, r.Total, r.Refused, r.Pending, r.Skipped, len(evalPlanted), 2*planted, 2*len(evalPlanted), out)
	}
	want := float64(planted) / float64(len(evalPlanted))
	if !near(r.PassAt1, want) || !near(r.PassAtN, want) || r.Min != r.Max || r.Stddev != 0 || len(r.Repeats) != 2 || !near(r.Repeats[0].Rate, want) {
		t.Fatalf("pass@1 %v pass@N %v, repeats %+v (min %v max %v sd %v); want %v each", r.PassAt1, r.PassAtN, r.Repeats, r.Min, r.Max, r.Stddev, want)
	}
	refused := map[int]string{}
	for _, it := range v.Items {
		if it.State == "refused" {
			refused[it.Line] = it.Reason
			continue
		}
		if got := it.State == "resolved"; got != evalPlanted[it.InstanceID] {
			t.Errorf("%s repeat %d: %s (%s), planted resolved %v", it.InstanceID, it.Repeat, it.State, it.Reason, evalPlanted[it.InstanceID])
		}
		if it.InstanceID == "calc__hang-1" && !strings.Contains(it.Reason, "wall limit") {
			t.Errorf("the hanging test's item: %s", it.Reason)
		}
	}
	for line, why := range map[int]string{10: "not a JSON instance", 11: "0123456789", 12: "missing test_cmd", 13: "duplicate instance_id"} {
		if !strings.Contains(refused[line], why) {
			t.Errorf("line %d refused for %q, want it to say %q", line, refused[line], why)
		}
	}

	// The predictions: one a line, each instance's first sample; the
	// agent's whole diff, its rewrite of the test included.
	got, data := readPredictions(t, preds)
	if len(got) != len(evalPlanted) || got["calc__add-1"].ModelNameOrPath != "exec" ||
		!strings.Contains(got["calc__add-1"].ModelPatch, "+add() { echo $(($1 + $2)); }") ||
		!strings.Contains(got["calc__sub-1"].ModelPatch, "tests/test_sub.sh") || got["text__upper-1"].ModelPatch != "" {
		t.Fatalf("predictions:\n%s", data)
	}

	// Nothing ran twice: one job per key, and each key the item's.
	perKey := evalJobKeys(t, c)
	for k := range perKey {
		if !strings.HasPrefix(k, "eval:"+id+":") {
			t.Errorf("a job has key %q, not the evaluation's", k)
		}
	}
	checkEachItemOneJobEach(t, perKey, v)
}

// readPredictions reads a predictions file, SWE-bench JSONL, by
// instance; and its text.
func readPredictions(t *testing.T, path string) (map[string]apitypes.EvalPrediction, []byte) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]apitypes.EvalPrediction{}
	for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
		var p apitypes.EvalPrediction
		if err := json.Unmarshal([]byte(l), &p); err != nil {
			t.Fatalf("prediction %q: %v", l, err)
		}
		got[p.InstanceID] = p
	}
	return got, data
}

// evalJobKeys counts the hub's jobs by idempotency key.
func evalJobKeys(t *testing.T, c *client.Client) map[string]int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	l, err := c.Jobs(ctx, client.JobFilter{Limit: 1000})
	if err != nil {
		t.Fatal(err)
	}
	perKey := map[string]int{}
	for _, j := range l.Jobs {
		perKey[j.Key]++
	}
	return perKey
}

// checkEachItemOneJobEach checks that each of v's keys has one job, and
// each item not refused one agent job and one grading job.
func checkEachItemOneJobEach(t *testing.T, perKey map[string]int, v apitypes.EvalView) {
	t.Helper()
	for k, n := range perKey {
		if strings.HasPrefix(k, "eval:"+v.ID+":") && n != 1 {
			t.Errorf("key %s: %d jobs", k, n)
		}
	}
	for _, it := range v.Items {
		if it.State == "refused" {
			continue
		}
		for _, what := range []string{"agent", "grade"} {
			if k := "eval:" + v.ID + ":" + it.InstanceID + "#" + strconv.Itoa(it.Repeat) + "#1:" + what; perKey[k] != 1 {
				t.Errorf("item %s#%d: %d jobs of key %s", it.InstanceID, it.Repeat, perKey[k], k)
			}
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-9 && b-a < 1e-9 }
