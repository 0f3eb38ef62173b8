package cli

import (
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"

	"drover/internal/apitypes"
)

// reviewPipeline is a valid pipeline file: an agent step whose prompt is
// PROMPT's file, a param goal without a default, and a staged-able publish.
func reviewPipeline(prompt string) string {
	return "name: review\nparams:\n  - name: goal\nsteps:\n  - id: review\n    kind: agent\n    agent: claude\n" +
		"    prompt_file: " + prompt + "\n  - id: ship\n    kind: publish\n    depends_on: [review]\n"
}

const reviewPrompt = "---\nmode: observe\n---\nReview it for {{params.goal}}.\n"

// TestPipelineRunRefusesBeforeAnything: a bad file, a prompt file that is
// outside the repository or a secret, or bad params are refused with what
// is wrong (the file's line for the file), and nothing reaches the hub.
func TestPipelineRunRefusesBeforeAnything(t *testing.T) {
	outside := tempFile(t, "outside.md", reviewPrompt)
	for _, tt := range []struct {
		name  string
		file  string            // the pipeline file, p.yaml in the checkout
		files map[string]string // more files in the checkout
		link  string            // agents/link.md points at a file outside
		fifo  bool              // agents/pipe.md is a FIFO (opening it would block)
		args  []string
		code  int
		want  string
	}{
		{"unknown field", "name: p\nsteps:\n  - id: a\n    kind: exec\n    comand: [x]\n", nil, "", false, nil, 1,
			`p.yaml:5: step: unknown field "comand"`},
		{"loop without max_rounds", "name: p\nsteps:\n  - id: a\n    kind: exec\n    command: [x]\n    loop:\n      until: verdict.approved\n", nil, "", false, nil, 1,
			`p.yaml:3: step "a": loop needs max_rounds`},
		{"prompt file climbs out", reviewPipeline("../outside.md"), nil, "", false, []string{"--param", "goal=x"}, 1,
			`p.yaml:8: step "review": prompt_file "../outside.md" must be a relative path inside the repository`},
		{"prompt file symlink out", reviewPipeline("agents/link.md"), nil, outside, false, []string{"--param", "goal=x"}, 1,
			`p.yaml:8: step "review": reading prompt_file:`},
		{"prompt file a FIFO", reviewPipeline("agents/pipe.md"), nil, "", true, []string{"--param", "goal=x"}, 1,
			`p.yaml:8: step "review": reading prompt_file: agents/pipe.md is not a regular file`},
		{"prompt file missing", reviewPipeline("agents/none.md"), nil, "", false, []string{"--param", "goal=x"}, 1,
			`p.yaml:8: step "review": reading prompt_file:`},
		{"prompt file a secret", reviewPipeline("conf/.env"), map[string]string{"conf/.env": reviewPrompt}, "", false, []string{"--param", "goal=x"}, 1,
			`looks like a .env file`},
		{"prompt file in .git", reviewPipeline(".git/config"), nil, "", false, []string{"--param", "goal=x"}, 1,
			`.git component`},
		{"param missing", reviewPipeline("agents/r.md"), map[string]string{"agents/r.md": reviewPrompt}, "", false, nil, 2,
			`p.yaml:3: param goal has no default: give it (--param goal=VALUE)`},
		{"param unknown", reviewPipeline("agents/r.md"), map[string]string{"agents/r.md": reviewPrompt}, "", false,
			[]string{"--param", "goal=x", "--param", "speed=9"}, 2, `param speed: p.yaml declares no such param`},
		{"param without =", reviewPipeline("agents/r.md"), nil, "", false, []string{"--param", "goal"}, 2, `--param "goal": want NAME=VALUE`},
		{"param without name", reviewPipeline("agents/r.md"), nil, "", false, []string{"--param", "=x"}, 2, `--param "=x": the name is empty`},
		{"param with ESC", reviewPipeline("agents/r.md"), nil, "", false, []string{"--param", "goal=a\x1b[2J"}, 2, `--param goal`},
		{"param twice", reviewPipeline("agents/r.md"), nil, "", false, []string{"--param", "goal=a", "--param", "goal=b"}, 2, `--param goal is given twice`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newFakeHub(t)
			dir, _ := userRepo(t)
			writeFile(t, filepath.Join(dir, "p.yaml"), tt.file)
			for name, content := range tt.files {
				writeFile(t, filepath.Join(dir, name), content)
			}
			if tt.link != "" {
				if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.Symlink(tt.link, filepath.Join(dir, "agents", "link.md")); err != nil {
					t.Fatal(err)
				}
			}
			if tt.fifo {
				if err := os.MkdirAll(filepath.Join(dir, "agents"), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := syscall.Mkfifo(filepath.Join(dir, "agents", "pipe.md"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			args := append([]string{"pipeline", "run", filepath.Join(dir, "p.yaml"), "--repo", dir}, tt.args...)
			r := runCLI(t, forgeEnv(h), "", args...)
			if r.code != tt.code || !strings.Contains(r.stderr, tt.want) {
				t.Fatalf("code %d, stderr %q; want %d and %q", r.code, r.stderr, tt.code, tt.want)
			}
			h.mu.Lock()
			defer h.mu.Unlock()
			if h.reached != 0 {
				t.Fatalf("the hub got %d requests: %q", h.reached, h.requests)
			}
		})
	}
}

// TestPipelineRunSendsTheFile: the file, its prompt files, the params and
// the pinned commit of the checkout reach the hub in one request; the same
// key again answers the first pipeline.
func TestPipelineRunSendsTheFile(t *testing.T) {
	h := newFakeHub(t)
	// A project mapped to a remote: the commit is pinned, not pushed, as
	// drover run --repo does.
	h.projects = []apitypes.ProjectView{{Name: "web", Remote: "https://git.example/web.git"}}
	dir, _ := userRepo(t)
	src := reviewPipeline("agents/review.md")
	writeFile(t, filepath.Join(dir, "ci", "p.yaml"), src)
	writeFile(t, filepath.Join(dir, "agents", "review.md"), reviewPrompt)
	gitC(t, dir, "add", "-A")
	gitC(t, dir, "commit", "--quiet", "-m", "pipeline")
	head := strings.TrimSpace(gitC(t, dir, "rev-parse", "HEAD"))

	args := []string{"pipeline", "run", filepath.Join(dir, "ci", "p.yaml"), "--repo", dir, "--param", "goal=speed=fast",
		"--staged", "--key", "k1"}
	r := runCLI(t, forgeEnv(h), "", args...)
	if r.code != 0 || r.stdout != "p-k1\n" {
		t.Fatalf("code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	want := apitypes.PipelineRunRequest{File: "ci/p.yaml", Source: src, Files: map[string]string{"agents/review.md": reviewPrompt},
		Project: "web", Base: head, Params: map[string]string{"goal": "speed=fast"}, Staged: true, Key: "k1"}
	h.mu.Lock()
	got := h.pipelineRuns
	h.mu.Unlock()
	if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Fatalf("sent %+v\nwant %+v", got, want)
	}

	r = runCLI(t, forgeEnv(h), "", append(args, "--json", "--project", "web")...)
	var v apitypes.PipelineView
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &v) != nil || v.ID != "p-k1" || !strings.Contains(r.stderr, `key "k1" was used before: pipeline p-k1`) {
		t.Fatalf("again: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}

// hostile is text an agent or another user wrote, with what a terminal
// acts on.
const hostile = "evil\x1b[2J\x1b]0;title\x07\u009b31m\u202e"

// hostileShown is hostile as the CLI must print it.
const hostileShown = `evil\x1b[2J\x1b]0;title\x07\u009b31m\u202e`

// samplePipeline has a loop, a fan-out, a replayed run and a staged
// publish, and hostile text wherever the hub passes on someone's words.
func samplePipeline(now time.Time) apitypes.PipelineView {
	item := 1
	return apitypes.PipelineView{ID: "p-1", Name: "review", Project: "web", Base: strings.Repeat("a", 40), Requester: "ann",
		Staged: true, State: "needs_human", Reason: "loop verify: " + hostile, CreatedAt: now.Add(-5 * time.Minute),
		CostUSD: 1.25, Tokens: 4200, StepsDone: 2, StepsTotal: 3,
		Steps: []apitypes.PipelineStepView{
			{ID: "build", Kind: "agent", State: "done", CostUSD: 0.25, Tokens: 1000, Commit: strings.Repeat("b", 40),
				Runs: []apitypes.PipelineRunView{{Key: "build", State: "done", Job: "j-1", JobState: "completed", Attempts: 1,
					Replayed: true, Commit: strings.Repeat("b", 40)}}},
			{ID: "verify", Kind: "agent", State: "needs_human", Rounds: 3, MaxRounds: 3, CostUSD: 1, Tokens: 3200, Reason: hostile,
				Runs: []apitypes.PipelineRunView{
					{Key: "verify.r1", Round: 1, State: "done", Job: "j-2", JobState: "completed", Attempts: 2, Commit: strings.Repeat("c", 40)},
					{Key: "verify.r3", Round: 3, Item: &item, ItemValue: "pkg/" + hostile, State: "failed", Job: "j-4", JobState: "failed",
						Attempts: 1, Reason: "tests failed " + hostile}}},
			{ID: "ship", Kind: "publish", State: "skipped",
				Publication: &apitypes.PipelineStaged{Staged: true, Commit: strings.Repeat("c", 40), Mode: "pr", Branch: "drover/" + hostile}},
		}}
}

// TestPipelineShow: the steps in the file's order, each with its state,
// rounds, cost and runs, a staged publish with what it would publish, the
// totals; every word from the hub escaped; --json the view as it is.
func TestPipelineShow(t *testing.T) {
	h := newFakeHub(t)
	now := time.Now()
	h.pipelines = []apitypes.PipelineView{samplePipeline(now)}
	r := runCLI(t, forgeEnv(h), "", "pipeline", "show", "p-1")
	if r.code != 0 {
		t.Fatalf("code %d, stderr %q", r.code, r.stderr)
	}
	want := []string{
		"pipeline p-1 review: needs_human (staged: publishes nothing)",
		"  project web at aaaaaaaaaaaa, by ann, started 5m ago",
		"  reason: loop verify: " + hostileShown,
		"build [agent] done, $0.2500, 1000 tokens",
		"  - build: done job j-1 completed, 1 attempt(s), replayed, commit bbbbbbbbbbbb",
		"verify [agent] needs_human, round 3/3, $1.0000, 3200 tokens",
		"  reason: " + hostileShown,
		"  - verify.r1: done job j-2 completed, 2 attempt(s), commit cccccccccccc",
		"  - verify.r3 item pkg/" + hostileShown + ": failed job j-4 failed, 1 attempt(s)",
		"    reason: tests failed " + hostileShown,
		"ship [publish] skipped, $0.0000, 0 tokens",
		"  would publish cccccccccccc (pr to branch drover/" + hostileShown + ")",
		"in all: $1.2500, 4200 tokens",
	}
	if got := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n"); !reflect.DeepEqual(got, want) {
		t.Fatalf("show printed\n%s\nwant\n%s", r.stdout, strings.Join(want, "\n"))
	}

	r = runCLI(t, forgeEnv(h), "", "pipeline", "show", "p-1", "--json")
	var v apitypes.PipelineView
	if r.code != 0 || json.Unmarshal([]byte(r.stdout), &v) != nil {
		t.Fatalf("--json: code %d, stdout %q", r.code, r.stdout)
	}
	if sent := samplePipeline(now); v.Steps[1].Reason != sent.Steps[1].Reason || len(v.Steps) != 3 || v.Steps[2].Publication == nil {
		t.Fatalf("--json read back as %+v", v)
	}
	noControls(t, r.stdout)

	r = runCLI(t, forgeEnv(h), "", "pipeline", "show", "p-9")
	if r.code != 1 || !strings.Contains(r.stderr, "no pipeline p-9") {
		t.Fatalf("unknown: code %d, stderr %q", r.code, r.stderr)
	}
}

// noControls fails when out holds what a terminal would act on.
func noControls(t *testing.T, out string) {
	t.Helper()
	if strings.ContainsFunc(out, func(r rune) bool { return escaped(r) && r != '\n' }) {
		t.Fatalf("printed control characters: %q", out)
	}
}

// wantTable checks a printed table's lines, field by field, and that it
// printed no control characters.
func wantTable(t *testing.T, out string, want [][]string) {
	t.Helper()
	noControls(t, out)
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	if len(lines) != len(want) {
		t.Fatalf("printed\n%s", out)
	}
	for i, w := range want {
		if got := strings.Fields(lines[i]); !reflect.DeepEqual(got, w) {
			t.Errorf("line %d: %q, want %q", i, got, w)
		}
	}
}

// TestPipelinesTable: one row per pipeline, with the hub's count of its
// steps done of all, and escaped names.
func TestPipelinesTable(t *testing.T) {
	h := newFakeHub(t)
	now := time.Now()
	p := samplePipeline(now)
	q := apitypes.PipelineView{ID: "p-2", Name: hostile, Project: "api", State: "running", CostUSD: 0.5, Tokens: 7,
		CreatedAt: now.Add(-2 * time.Hour), StepsDone: 2, StepsTotal: 5}
	o := apitypes.PipelineView{ID: "p-0", Name: "old", Project: "api", State: "failed", CreatedAt: now.Add(-72 * time.Hour)}
	h.pipelines = []apitypes.PipelineView{q, p, o}
	r := runCLI(t, forgeEnv(h), "", "pipelines", "--limit", "5")
	if r.code != 0 {
		t.Fatalf("code %d, stderr %q", r.code, r.stderr)
	}
	wantTable(t, r.stdout, [][]string{
		{"ID", "NAME", "PROJECT", "STATE", "STEPS", "COST", "TOKENS", "AGE"},
		{"p-2", hostileShown, "api", "running", "2/5", "$0.5000", "7", "2h"},
		{"p-1", "review", "web", "needs_human", "2/3", "$1.2500", "4200", "5m"},
		{"p-0", "old", "api", "failed", "-", "$0.0000", "0", "3d"},
	})
	h.mu.Lock()
	defer h.mu.Unlock()
	if last := h.requests[len(h.requests)-1]; last != "GET /api/v1/pipelines" {
		t.Errorf("request %q", last)
	}
	if r := runCLI(t, forgeEnv(h), "", "pipelines", "--limit", "-1"); r.code != 2 {
		t.Errorf("--limit -1: code %d", r.code)
	}
}

// TestPipelineCancelRetry: each sends its request for the pipeline (and
// step) named, and says what became of it.
func TestPipelineCancelRetry(t *testing.T) {
	h := newFakeHub(t)
	h.pipelines = []apitypes.PipelineView{samplePipeline(time.Now())}
	for _, tt := range []struct {
		args   []string
		code   int
		stdout string
		action string // what the hub got; "" for nothing
	}{
		{[]string{"pipeline", "retry", "p-1", "verify"}, 0, "pipeline p-1 running\n", "retry p-1 verify"},
		{[]string{"pipeline", "cancel", "p-1"}, 0, "pipeline p-1 cancelled\n", "cancel p-1"},
		{[]string{"pipeline", "cancel", "p-9"}, 1, "", "cancel p-9"},
		{[]string{"pipeline", "retry", "p-1"}, 2, "", ""},
		{[]string{"pipeline", "cancel"}, 2, "", ""},
	} {
		h.mu.Lock()
		h.pipelineActions = nil
		h.mu.Unlock()
		r := runCLI(t, forgeEnv(h), "", tt.args...)
		if r.code != tt.code || r.stdout != tt.stdout {
			t.Errorf("%q: code %d, stdout %q, stderr %q", tt.args, r.code, r.stdout, r.stderr)
		}
		h.mu.Lock()
		if got := strings.Join(h.pipelineActions, ","); got != tt.action {
			t.Errorf("%q: the hub got %q, want %q", tt.args, got, tt.action)
		}
		h.mu.Unlock()
	}
}

// TestPipelineRunWait: --wait prints each event once, escaped, until the
// pipeline ends, then its tree, and exits with the code of its end.
func TestPipelineRunWait(t *testing.T) {
	for _, tt := range []struct {
		end  string
		code int
	}{
		{"done", 0}, {"needs_human", exitPipelineNeedsHuman}, {"failed", exitPipelineFailed}, {"cancelled", exitPipelineCancelled},
	} {
		t.Run(tt.end, func(t *testing.T) {
			h := newFakeHub(t)
			h.projects = []apitypes.ProjectView{{Name: "web", Remote: "https://git.example/web.git"}}
			now := time.Now()
			h.onPipelineShow = func(v *apitypes.PipelineView, shows int) {
				evs := h.pipelineEvents[v.ID]
				switch shows {
				case 1:
					h.pipelineEvents[v.ID] = append(evs, apitypes.PipelineEventView{Seq: 1, At: now, Kind: "step_started", Step: "review", Message: "round 1"})
				case 2:
					h.pipelineEvents[v.ID] = append(evs, apitypes.PipelineEventView{Seq: 2, At: now, Kind: "step_ended", Step: "review", Message: hostile})
					v.State = tt.end
				}
			}
			dir, _ := userRepo(t)
			writeFile(t, filepath.Join(dir, "p.yaml"), "name: p\nsteps:\n  - id: review\n    kind: exec\n    command: [make, test]\n")
			r := runCLI(t, forgeEnv(h), "", "pipeline", "run", filepath.Join(dir, "p.yaml"), "--repo", dir, "--wait")
			if r.code != tt.code {
				t.Fatalf("code %d, want %d; stderr %q", r.code, tt.code, r.stderr)
			}
			noControls(t, r.stdout+r.stderr)
			if strings.Count(r.stderr, "step_started review: round 1\n") != 1 || strings.Count(r.stderr, "step_ended review: "+hostileShown+"\n") != 1 {
				t.Errorf("events on stderr: %q", r.stderr)
			}
			if !strings.HasPrefix(r.stdout, "pipeline p-1 fake: "+tt.end+"\n") {
				t.Errorf("stdout %q", r.stdout)
			}
		})
	}
}
