package eval

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/e2e/e2ekit"
	"drover/internal/testkit"
	"drover/internal/testkit/fakemodel"
)

// evalScript is what one agent's model does on each instance of the
// synthetic set (keyed by its problem statement, which every request of
// the instance's conversation carries), and which instances that
// resolves.
type evalScript struct {
	turns    map[string][]fakemodel.Turn
	resolved map[string]bool
	changed  map[string]string // instance -> a line its model_patch holds; none: no change
}

func writeFile(path, content string) fakemodel.Turn {
	return fakemodel.CallTool("write_file", map[string]any{"path": path, "content": content})
}

// The first agent fixes add, mul, neg and inc; on sub it only rewrites
// the test (and its own run of the test passes), on inc it fixes the
// code and rewrites the test too.
var evalScriptA = evalScript{
	turns: map[string][]fakemodel.Turn{
		"add 2 3 gives -1": {
			fakemodel.CallTool("edit_file", map[string]any{"path": "calc.sh", "old_text": "$1 - $2", "new_text": "$1 + $2"}),
			e2ekit.Deliver("add adds"),
		},
		"mul adds":                  {writeFile("calc.sh", "mul() { echo $(($1 * $2)); }\n"), e2ekit.Deliver("mul multiplies")},
		"upper does not upper-case": {e2ekit.Deliver("I could not find the bug")},
		"rev2 does not reverse":     {writeFile("text.sh", "rev2() { printf '%s%s\\n' \"$1\" \"$1\"; }\n"), e2ekit.Deliver("rev2 reverses")},
		"sub adds": {
			writeFile("tests/test_sub.sh", "exit 0\n"),
			fakemodel.CallTool("run_command", map[string]any{"command": "sh tests/test_sub.sh && echo AGENT-TESTS-PASS"}),
			e2ekit.Deliver("the tests pass"),
		},
		"neg is the identity": {
			fakemodel.CallTool("edit_file", map[string]any{"path": "calc.sh", "old_text": "neg() { echo $1; }", "new_text": "neg() { echo $((0 - $1)); }"}),
			e2ekit.Deliver("neg negates"),
		},
		"double does not double": {writeFile("calc.sh", "double() { echo $(($1 * 2)); }\nhalf() { echo $1; }\n"), e2ekit.Deliver("double doubles")},
		"one is slow":            {e2ekit.Deliver("nothing to do")},
		"inc does not increment": {writeFile("calc.sh", "inc() { echo $(($1 + 1)); }\n"), writeFile("tests/test_inc.sh", "exit 0\n"), e2ekit.Deliver("inc increments")},
	},
	resolved: map[string]bool{"calc__add-1": true, "calc__mul-1": true, "calc__neg-1": true, "calc__inc-1": true},
	changed: map[string]string{"calc__add-1": "+add() { echo $(($1 + $2)); }", "calc__mul-1": "+mul() { echo $(($1 * $2)); }",
		"text__rev-1": "+rev2()", "calc__sub-1": "tests/test_sub.sh", "calc__neg-1": "+neg() { echo $((0 - $1)); }",
		"calc__double-1": "+half() { echo $1; }", "calc__inc-1": "tests/test_inc.sh"},
}

// The second agent fixes add, upper, rev, sub and double; on inc it only
// rewrites the test.
var evalScriptB = evalScript{
	turns: map[string][]fakemodel.Turn{
		"add 2 3 gives -1": {
			fakemodel.CallTool("edit_file", map[string]any{"path": "calc.sh", "old_text": "$1 - $2", "new_text": "$1 + $2"}),
			e2ekit.Deliver("add adds"),
		},
		"mul adds":                  {e2ekit.Deliver("mul looks right to me")},
		"upper does not upper-case": {writeFile("text.sh", "upper() { printf '%s\\n' \"$1\" | tr a-z A-Z; }\n"), e2ekit.Deliver("upper upper-cases")},
		"rev2 does not reverse": {
			writeFile("text.sh", "rev2() { a=${1%?} b=${1#?}; printf '%s%s\\n' \"$b\" \"$a\"; }\n"),
			e2ekit.Deliver("rev2 reverses two letters"),
		},
		"sub adds": {
			fakemodel.CallTool("edit_file", map[string]any{"path": "calc.sh", "old_text": "$1 + $2", "new_text": "$1 - $2"}),
			e2ekit.Deliver("sub subtracts"),
		},
		"neg is the identity":    {e2ekit.Deliver("neg looks right to me")},
		"double does not double": {writeFile("calc.sh", "double() { echo $(($1 * 2)); }\nhalf() { echo $(($1 / 2)); }\n"), e2ekit.Deliver("double doubles")},
		"one is slow":            {e2ekit.Deliver("nothing to do")},
		"inc does not increment": {writeFile("tests/test_inc.sh", "exit 0\n"), e2ekit.Deliver("the test passes")},
	},
	resolved: map[string]bool{"calc__add-1": true, "text__upper-1": true, "text__rev-1": true, "calc__sub-1": true, "calc__double-1": true},
	changed: map[string]string{"calc__add-1": "+add() { echo $(($1 + $2)); }", "text__upper-1": "tr a-z A-Z",
		"text__rev-1": "+rev2()", "calc__sub-1": "+sub() { echo $(($1 - $2)); }", "calc__double-1": "+double() { echo $(($1 * 2)); }",
		"calc__inc-1": "tests/test_inc.sh"},
}

// fakes starts one fake model per instance of s behind one router.
func (s evalScript) fakes(t *testing.T, fake func(testing.TB, []fakemodel.Turn, ...fakemodel.Option) *fakemodel.FakeServer) (*fakemodel.Router, map[string]*fakemodel.FakeServer) {
	servers := map[string]*fakemodel.FakeServer{}
	var routes []fakemodel.Route
	for statement, turns := range s.turns {
		servers[statement] = fake(t, turns, fakemodel.RequireKey(e2ekit.RealKey))
		routes = append(routes, fakemodel.Route{Key: statement, Server: servers[statement]})
	}
	return fakemodel.NewRouter(t, routes...), servers
}

// The synthetic set evaluated end to end by two agents at once on one
// hub, each the native loop on a fake model server of its own protocol
// (OpenAI-compatible and Anthropic), each fixing its own subset: each
// report's numbers are what its script plants, a rewritten test moves no
// grade, and the predictions are SWE-bench JSONL naming the agent and
// model, with each attempted instance's patch.
func TestEvalOfTheSyntheticSetByTwoAgents(t *testing.T) {
	t.Parallel()
	h := testkit.StartHub(t, bin)
	dataset := evalSet(t)
	type agentRun struct {
		name, provider, form, model, runner string
		fake                                func(testing.TB, []fakemodel.Turn, ...fakemodel.Option) *fakemodel.FakeServer
		script                              evalScript
		servers                             map[string]*fakemodel.FakeServer
		id                                  string
	}
	runs := []*agentRun{
		{name: "oai", provider: "openai-compatible", form: "/v1", model: "qwen-fake", fake: fakemodel.NewFakeChat, script: evalScriptA},
		{name: "claude", provider: "anthropic", model: "claude-fake", fake: fakemodel.NewFakeAnthropic, script: evalScriptB},
	}
	for _, a := range runs {
		var router *fakemodel.Router
		router, a.servers = a.script.fakes(t, a.fake)
		r := h.LoginRunner(t, "r-eval-"+a.name, h.URL)
		if out, err := r.CLI(e2ekit.RealKey+"\n", "account", "add", "--agent", "native", "--label", a.name, "--provider", a.provider,
			"--base-url", router.URL+a.form, "--model", a.model, "--api-key-stdin", "--no-probe"); err != nil {
			t.Fatalf("account add: %v\n%s", err, out)
		}
		r.Start("--slots", "2")
	}
	// Started one after the other (each pushes the set's repositories),
	// then run at once.
	for _, a := range runs {
		out, err := h.CLI("eval", "run", dataset, "--agent", "native:"+a.name, "--model", a.model, "--max-parallel", "3", "--grade-wall", "3s")
		if err != nil {
			t.Fatalf("drover eval run --agent native:%s: %v\n%s", a.name, err, out)
		}
		a.id = strings.TrimSpace(out[strings.LastIndex(strings.TrimSpace(out), "\n")+1:])
	}
	c := h.Client()
	for _, a := range runs {
		v := waitEval(t, c, a.id, 8*time.Minute, func(v apitypes.EvalView) bool { return v.State != "running" })
		preds := filepath.Join(t.TempDir(), a.name+".jsonl")
		out, err := h.CLI("eval", "report", a.id, "--json", "--predictions", preds)
		if err != nil {
			t.Fatalf("drover eval report: %v\n%s", err, out)
		}
		var r apitypes.EvalReport
		if err := json.Unmarshal([]byte(out), &r); err != nil {
			t.Fatalf("report: %v\n%s", err, out)
		}
		want := len(a.script.resolved)
		if r.Instances != len(evalPlanted) || r.Total != len(evalPlanted) || r.Resolved != want || r.Refused != 4 || r.Pending != 0 ||
			!near(r.PassAt1, float64(want)/float64(len(evalPlanted))) || r.Tokens == 0 {
			t.Errorf("%s: %d instances, %d/%d resolved, %d refused, %d pending, pass@1 %v, %d tokens; want %d, %d/%d, 4, 0, %v, some",
				a.name, r.Instances, r.Resolved, r.Total, r.Refused, r.Pending, r.PassAt1, r.Tokens,
				len(evalPlanted), want, len(evalPlanted), float64(want)/float64(len(evalPlanted)))
		}
		for _, it := range v.Items {
			if it.State == "refused" {
				continue
			}
			if got := it.State == "resolved"; got != a.script.resolved[it.InstanceID] {
				t.Errorf("%s: %s %s (%s), planted resolved %v", a.name, it.InstanceID, it.State, it.Reason, a.script.resolved[it.InstanceID])
			}
		}
		checkEachItemOneJobEach(t, evalJobKeys(t, c), v)

		got, data := readPredictions(t, preds)
		if len(got) != len(evalPlanted) {
			t.Errorf("%s: %d predictions, want %d:\n%s", a.name, len(got), len(evalPlanted), data)
		}
		for id := range evalPlanted {
			p, line := got[id], a.script.changed[id]
			if p.ModelNameOrPath != "native:"+a.name+"/"+a.model || (line == "") != (p.ModelPatch == "") || !strings.Contains(p.ModelPatch, line) {
				t.Errorf("%s: prediction of %s: %+v; want model_name_or_path native:%s/%s and a patch with %q", a.name, id, p, a.name, a.model, line)
			}
		}
		// Each instance's conversation asked for each of its turns once.
		for statement, f := range a.servers {
			seen := map[int]int{}
			for _, req := range f.Requests() {
				if req.Turn >= 0 {
					seen[req.Turn]++
				}
			}
			for i := range a.script.turns[statement] {
				if seen[i] != 1 {
					t.Errorf("%s, %q: turn %d answered %d times, want once:\n%s", a.name, statement, i, seen[i], f.Dump())
				}
			}
		}
	}
	// The test rewritten passed in the agent's own sandbox; its grade
	// ran the base's test and failed.
	if res, ok := runs[0].servers["sub adds"].Result(1); !ok || !strings.Contains(res.Output, "AGENT-TESTS-PASS") {
		t.Errorf("the agent's run of its rewritten test: %+v", res)
	}
}
