package cli

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/rules"
)

// An instance's repo is a local checkout when it names a folder beside the
// dataset or is no project's name; otherwise it is a hub project.
func TestLocalRepo(t *testing.T) {
	dir := t.TempDir()
	if err := os.Mkdir(filepath.Join(dir, "calc"), 0o755); err != nil {
		t.Fatal(err)
	}
	for repo, want := range map[string]bool{
		"calc": true, "./calc": true, "repos/add": true, "/abs/path": true, "../up": true, "django/django": true,
		"web": false, "my-project.x": false,
	} {
		if got := localRepo(dir, repo); got != want {
			t.Errorf("localRepo(%q) = %v, want %v", repo, got, want)
		}
	}
}

// The default key is the request's: the same dataset and settings make
// the same key, any change another.
func TestEvalKeyIsTheRequests(t *testing.T) {
	req := apitypes.EvalRunRequest{Agent: "claude", Attempts: 2, Lines: []apitypes.EvalLine{{Line: 1, Refused: "x"}}}
	other := req
	other.Attempts = 3
	if evalKey(req) != evalKey(req) || evalKey(req) == evalKey(other) {
		t.Fatalf("keys %s %s %s", evalKey(req), evalKey(req), evalKey(other))
	}
}

// evalRoutes are the evaluations list's route, over h.evals.
func (h *fakeHub) evalRoutes(mux *http.ServeMux) {
	mux.HandleFunc("GET /api/v1/evals", func(w http.ResponseWriter, r *http.Request) {
		h.evalLimits = append(h.evalLimits, r.URL.Query().Get("limit"))
		reply(w, 200, apitypes.EvalList{Evals: h.evals})
	})
	mux.HandleFunc("POST /api/v1/evals", func(w http.ResponseWriter, r *http.Request) {
		var req apitypes.EvalRunRequest
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			fail(w, 400, rules.ErrBadRequest, err.Error())
			return
		}
		h.evalRuns = append(h.evalRuns, req)
		reply(w, 201, apitypes.EvalView{ID: "e-" + strconv.Itoa(len(h.evalRuns)), State: "running"})
	})
}

// eval run names the dataset by its file's name, which is not part of the
// default key (the same dataset under another name is the same run); a
// name that is not plain text is left out, not refused.
func TestEvalRunNamesItsDataset(t *testing.T) {
	h := newFakeHub(t)
	dir := t.TempDir()
	line := `{"instance_id":"a","repo":"web","base_commit":"` + strings.Repeat("1", 40) + `","problem_statement":"fix","test_cmd":"true"}` + "\n"
	for _, name := range []string{"lite.jsonl", "copy.jsonl", "bad\x1b[2J.jsonl"} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(line), 0o644); err != nil {
			t.Fatal(err)
		}
		if r := runCLI(t, forgeEnv(h), "", "eval", "run", filepath.Join(dir, name), "--agent", "claude"); r.code != 0 {
			t.Fatalf("eval run %q: code %d, stderr %q", name, r.code, r.stderr)
		}
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.evalRuns) != 3 {
		t.Fatalf("%d runs", len(h.evalRuns))
	}
	for i, want := range []string{"lite.jsonl", "copy.jsonl", ""} {
		if got := h.evalRuns[i].Dataset; got != want {
			t.Errorf("run %d: dataset %q, want %q", i, got, want)
		}
		if h.evalRuns[i].Key != h.evalRuns[0].Key {
			t.Errorf("run %d: key %q, want %q: the file's name changed it", i, h.evalRuns[i].Key, h.evalRuns[0].Key)
		}
	}
}

// eval list: one line per evaluation with its dataset, agent, state,
// items ended of all, resolved of graded, cost and age, names escaped;
// --json prints the hub's list as it is.
func TestEvalList(t *testing.T) {
	h := newFakeHub(t)
	now := time.Now()
	h.evals = []apitypes.EvalView{
		{ID: "e-2", Dataset: hostile, Agent: "claude", State: "running", Done: 3, Total: 8, Resolved: 2, Graded: 3, CostUSD: 0.75,
			CreatedAt: now.Add(-2 * time.Hour)},
		{ID: "e-1", Agent: "native:local", State: "done", Done: 4, Total: 4, Resolved: 1, Graded: 4, CreatedAt: now.Add(-72 * time.Hour)},
	}
	r := runCLI(t, forgeEnv(h), "", "eval", "list", "--limit", "5")
	if r.code != 0 {
		t.Fatalf("code %d, stderr %q", r.code, r.stderr)
	}
	wantTable(t, r.stdout, [][]string{
		{"ID", "DATASET", "AGENT", "STATE", "DONE", "RESOLVED", "COST", "CREATED"},
		{"e-2", hostileShown, "claude", "running", "3/8", "2/3", "$0.7500", "2h"},
		{"e-1", "-", "native:local", "done", "4/4", "1/4", "$0.0000", "3d"},
	})
	r = runCLI(t, forgeEnv(h), "", "eval", "list", "--json")
	var l apitypes.EvalList
	if err := json.Unmarshal([]byte(r.stdout), &l); r.code != 0 || err != nil || len(l.Evals) != 2 || l.Evals[0].Resolved != 2 {
		t.Fatalf("--json: code %d, %v\n%s", r.code, err, r.stdout)
	}
	h.mu.Lock()
	if fmt.Sprint(h.evalLimits) != "[5 50]" {
		t.Errorf("limits sent %q, want 5 then the default 50", h.evalLimits)
	}
	h.mu.Unlock()
	if r := runCLI(t, forgeEnv(h), "", "eval", "list", "--limit", "-1"); r.code != 2 {
		t.Errorf("--limit -1: code %d", r.code)
	}
}
