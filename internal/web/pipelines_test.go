package web

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
)

// fakePipeline is p1: plan, then a fan-out over two items, then a review
// loop that stopped for a person (its reason a hostile script), then a
// publish step after both the review and the plan.
func fakePipeline() apitypes.PipelineView {
	one, two := 0, 1
	return apitypes.PipelineView{ID: "p1", Name: "review-<b>loop</b>", Project: "demo", Base: strings.Repeat("a", 40), Requester: "alice",
		State: "running", CreatedAt: time.Now().Add(-time.Hour), CostUSD: 0.5, Tokens: 1234,
		Steps: []apitypes.PipelineStepView{
			{ID: "plan", Kind: "agent", State: "done", CostUSD: 0.25, Runs: []apitypes.PipelineRunView{{Key: "plan", State: "done", Job: "j1", JobState: "completed", Attempts: 1, Summary: "<i>planned</i>"}}},
			{ID: "impl", Kind: "exec", DependsOn: []string{"plan"}, State: "running", Runs: []apitypes.PipelineRunView{
				{Key: "impl/0", Item: &one, ItemValue: "<img src=x onerror=alert(1)>", State: "done", Job: "j2", JobState: "completed"},
				{Key: "impl/1", Item: &two, ItemValue: "b.go", State: "running", Job: "j3", JobState: "running", Attempts: 2}}},
			{ID: "review", Kind: "agent", DependsOn: []string{"impl"}, State: "needs_human", Reason: "<script>alert(1)</script>", Rounds: 2, MaxRounds: 3},
			{ID: "ship", Kind: "publish", DependsOn: []string{"review", "plan"}, State: "pending"},
		}}
}

func (f *fakeBackend) Pipelines(context.Context, User) ([]apitypes.PipelineView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []apitypes.PipelineView
	for _, p := range f.pipes {
		p.StepsTotal, p.StepsDone = len(p.Steps), 0
		for _, st := range p.Steps {
			if st.State == "done" || st.State == "skipped" {
				p.StepsDone++
			}
		}
		p.Steps = nil // as the API's list: counts, and steps only on the pipeline itself
		out = append(out, p)
	}
	return out, nil
}

func (f *fakeBackend) Pipeline(_ context.Context, _ User, id string) (apitypes.PipelineView, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, p := range f.pipes {
		if p.ID == id {
			p.Steps = slices.Clone(p.Steps)
			return p, nil
		}
	}
	return apitypes.PipelineView{}, &Error{Status: http.StatusNotFound, Msg: "no pipeline " + id}
}

// setStep changes a step's state in every pipeline, as the engine would
// after a job's change, and says the hub changed.
func (f *fakeBackend) setStep(step, state string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	for i := range f.pipes {
		f.pipes[i].Steps = slices.Clone(f.pipes[i].Steps)
		for j := range f.pipes[i].Steps {
			if f.pipes[i].Steps[j].ID == step {
				f.pipes[i].Steps[j].State = state
			}
		}
	}
	close(f.changed)
	f.changed = make(chan struct{})
}

// Steps go in columns by their longest path from a step without inputs,
// in the file's order within a column, with an edge per dependency.
func TestPipelineLayout(t *testing.T) {
	step := func(id string, deps ...string) apitypes.PipelineStepView {
		return apitypes.PipelineStepView{ID: id, DependsOn: deps, State: "pending"}
	}
	for _, tt := range []struct {
		name  string
		steps []apitypes.PipelineStepView
		cells string // id@col,row of each node
		edges string // from>to of each edge
	}{
		{"empty", nil, "", ""},
		{"chain", []apitypes.PipelineStepView{step("a"), step("b", "a"), step("c", "b")}, "a@0,0 b@1,0 c@2,0", "a>b b>c"},
		{"longest path wins", []apitypes.PipelineStepView{step("a"), step("b", "a"), step("c", "a", "b")}, "a@0,0 b@1,0 c@2,0", "a>b a>c b>c"},
		{"file order in a column", []apitypes.PipelineStepView{step("x"), step("z", "x"), step("y", "x"), step("w")}, "x@0,0 z@1,0 y@1,1 w@0,1", "x>z x>y"},
		{"dependency listed later", []apitypes.PipelineStepView{step("late", "early"), step("early")}, "late@1,0 early@0,0", "early>late"},
		{"diamond", []apitypes.PipelineStepView{step("a"), step("b", "a"), step("c", "a"), step("d", "b", "c")}, "a@0,0 b@1,0 c@1,1 d@2,0", "a>b a>c b>d c>d"},
		{"across two columns", []apitypes.PipelineStepView{step("a"), step("b", "a"), step("b2", "a"), step("c", "b"), step("d", "c", "a")}, "a@0,0 b@1,0 b2@1,1 c@2,0 d@3,0", "a>b a>b2 b>c c>d a>d"},
		{"unknown dependency", []apitypes.PipelineStepView{step("a", "ghost")}, "a@0,0", ""},
		{"cycle is cut", []apitypes.PipelineStepView{step("a", "b"), step("b", "a")}, "a@1,0 b@0,0", "b>a a>b"},
		{"reads", []apitypes.PipelineStepView{step("a"), step("v", "a"), {ID: "judge", Reads: []string{"a", "v"}, State: "pending"}}, "a@0,0 v@1,0 judge@2,0", "a>v a>judge v>judge"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			g := layout(tt.steps)
			var cells, edges []string
			for _, n := range g.Nodes {
				cells = append(cells, fmt.Sprintf("%s@%d,%d", n.Step.ID, n.Col, n.Row))
				if n.X != margin+n.Col*(nodeW+colGap) || n.Y != margin+n.Row*(nodeH+rowGap) {
					t.Errorf("%s at (%d,%d), not in its cell", n.Step.ID, n.X, n.Y)
				}
				if n.X+nodeW > g.Width || n.Y+nodeH > g.Height {
					t.Errorf("%s at (%d,%d) is outside the %dx%d graph", n.Step.ID, n.X, n.Y, g.Width, g.Height)
				}
			}
			at := map[string]graphNode{}
			for _, n := range g.Nodes {
				at[n.Step.ID] = n
			}
			for _, e := range g.Edges {
				edges = append(edges, e.From+">"+e.To)
				from, to := at[e.From], at[e.To]
				if e.X1 != from.X+nodeW || e.Y1 != from.Y+nodeH/2 || e.X2 != to.X || e.Y2 != to.Y+nodeH/2 {
					t.Errorf("edge %s>%s from (%d,%d) to (%d,%d): not box edge to box edge", e.From, e.To, e.X1, e.Y1, e.X2, e.Y2)
				}
				if !strings.HasPrefix(e.D, fmt.Sprintf("M%d,%d ", e.X1, e.Y1)) || !strings.HasSuffix(e.D, fmt.Sprintf(" %d,%d", e.X2, e.Y2)) {
					t.Errorf("edge %s>%s is drawn as %q", e.From, e.To, e.D)
				}
				// An edge across columns runs under their boxes, inside the graph.
				var lane int
				if _, err := fmt.Sscanf(e.D[strings.Index(e.D, "L")+1:], "%d,%d", new(int), &lane); to.Col-from.Col > 1 && err != nil {
					t.Errorf("edge %s>%s across columns has no lane: %q", e.From, e.To, e.D)
				}
				for _, n := range g.Nodes {
					if n.Col > from.Col && n.Col < to.Col && lane < n.Y+nodeH || lane > g.Height {
						t.Errorf("edge %s>%s runs at y=%d, through %s or outside the graph", e.From, e.To, lane, n.Step.ID)
					}
				}
			}
			if got := strings.Join(cells, " "); got != tt.cells {
				t.Errorf("cells %q, want %q", got, tt.cells)
			}
			if got := strings.Join(edges, " "); got != tt.edges {
				t.Errorf("edges %q, want %q", got, tt.edges)
			}
		})
	}
	if g := layout([]apitypes.PipelineStepView{{ID: strings.Repeat("x", 40), State: "<b>odd</b>"}}); g.Nodes[0].Label != strings.Repeat("x", labelCh-1)+"…" || g.Nodes[0].Class != "st-other" {
		t.Errorf("a long id and an unknown state: %+v", g.Nodes[0])
	}
}

// The pages show the pipelines, each step's box coloured by its state in
// its column with an arrow per dependency, each run linking to its job,
// and every text the hub or an agent wrote escaped, in the SVG too.
func TestPipelinePagesRender(t *testing.T) {
	f := newFake()
	srv := serve(t, f, Config{})
	cookie := signIn(t, srv)
	unescaped := func(path, b string) {
		t.Helper()
		for _, bad := range []string{"<b>", "<i>", "<img", "<script>alert"} {
			if strings.Contains(b, bad) {
				t.Errorf("GET %s: unescaped %s in\n%s", path, bad, b)
			}
		}
	}
	code, b := get(t, srv, cookie, "/pipelines")
	for _, want := range []string{`<a href="/pipelines/p1"><code>p1</code></a>`, "review-&lt;b&gt;loop&lt;/b&gt;", `<td class="steps">1/4</td>`,
		"$0.5000", "<td>1234</td>", `<a href="/pipelines" aria-current="page">Pipelines</a>`} {
		if code != 200 || !strings.Contains(b, want) {
			t.Errorf("GET /pipelines: %d, want %q in\n%s", code, want, b)
		}
	}
	unescaped("/pipelines", b)

	code, b = get(t, srv, cookie, "/pipelines/p1")
	if code != 200 {
		t.Fatalf("GET /pipelines/p1: %d\n%s", code, b)
	}
	unescaped("/pipelines/p1", b)
	nodes := regexp.MustCompile(`<g class="node (st-[a-z_]+)" data-step="([a-z]+)" data-col="(\d)" data-row="(\d)"`).FindAllStringSubmatch(b, -1)
	var got []string
	for _, m := range nodes {
		got = append(got, m[2]+"@"+m[3]+","+m[4]+" "+m[1])
	}
	if want := "plan@0,0 st-done|impl@1,0 st-running|review@2,0 st-needs_human|ship@3,0 st-pending"; strings.Join(got, "|") != want {
		t.Errorf("the graph's nodes %q, want %q", strings.Join(got, "|"), want)
	}
	edges := regexp.MustCompile(`<path class="edge" data-from="([a-z]+)" data-to="([a-z]+)"`).FindAllStringSubmatch(b, -1)
	got = got[:0]
	for _, m := range edges {
		got = append(got, m[1]+">"+m[2])
	}
	if want := "plan>impl impl>review review>ship plan>ship"; strings.Join(got, " ") != want {
		t.Errorf("the graph's edges %q, want %q", strings.Join(got, " "), want)
	}
	for _, want := range []string{
		`<title>review: needs_human (&lt;script&gt;alert(1)&lt;/script&gt;)</title>`, // inside the SVG
		`<small class="reason">&lt;script&gt;alert(1)&lt;/script&gt;</small>`,        // in the table
		"agent · round 2/3", "exec · 2 items", `<a href="#step-review">`, `<tr id="step-review" data-step="review">`,
		`<code>&lt;img src=x onerror=alert(1)&gt;</code>`, `<small class="summary">&lt;i&gt;planned&lt;/i&gt;</small>`,
		`<a href="/jobs/j1"><code>j1</code></a>`, `<a href="/jobs/j3"><code>j3</code></a> (running, 2 attempts)`,
		`id="pipeline-live" data-pipeline="p1" data-version="`,
	} {
		if !strings.Contains(b, want) {
			t.Errorf("GET /pipelines/p1: want %q in\n%s", want, b)
		}
	}

	// Unknown (or not the user's: the backend says the same) reads as not
	// found, the page and its stream alike.
	for _, path := range []string{"/pipelines/p2", "/pipelines/p2/live", "/pipelines/%3Cb%3Ex%3C%2Fb%3E"} {
		code, b := get(t, srv, cookie, path)
		if code != http.StatusNotFound || strings.Contains(b, "review") {
			t.Errorf("GET %s: %d\n%s", path, code, b)
		}
		unescaped(path, b)
	}
	f.mu.Lock()
	f.pipes = nil
	f.mu.Unlock()
	if _, b := get(t, srv, cookie, "/pipelines"); !strings.Contains(b, "No pipelines you may see") {
		t.Errorf("no pipelines:\n%s", b)
	}
}

// The pipeline page's live part comes again when a step's state changes,
// and not while the page has it as it is; the stream ends once the user
// may not see the pipeline.
func TestLivePipelineFollowsItsSteps(t *testing.T) {
	f, srv, cookie, ctx := streamFixture(t, "", 20*time.Millisecond)
	_, body := get(t, srv, cookie, "/pipelines/p1")
	m := regexp.MustCompile(`data-version="([0-9a-f]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no live part on the page:\n%s", body)
	}
	_, r := openStream(t, ctx, srv, cookie, "/pipelines/p1/live?version="+m[1], "")
	for _, ev := range readEvents(t, r, 3) {
		if ev.kind != ":" {
			t.Fatalf("a page with the pipeline as it is gets %+v", ev)
		}
	}
	f.setStep("review", "running")
	ev := nextEvent(t, r)
	if ev.kind != "pipeline" || ev.id == m[1] || !strings.Contains(ev.data, `<g class="node st-running" data-step="review"`) || strings.Contains(ev.data, "<script>alert") {
		t.Fatalf("after the review step runs again: %+v", ev)
	}
	_, r = openStream(t, ctx, srv, cookie, "/pipelines/p1/live?version=old", "")
	if ev2 := nextEvent(t, r); ev2.kind != "pipeline" || ev2.data != ev.data {
		t.Fatalf("a page with an older part gets %+v", ev2)
	}

	// The user no longer sees the pipeline, and no job changed: the
	// stream ends at a keep-alive, saying why.
	f.mu.Lock()
	f.pipes = nil
	f.mu.Unlock()
	for i := 0; ; i++ {
		ev := readEvents(t, r, 1)[0]
		if ev.kind == "failure" {
			if ev.data != "no pipeline p1" {
				t.Fatalf("the stream ends with %+v", ev)
			}
			break
		}
		if i > 20 {
			t.Fatalf("after %d keep-alives the stream of a pipeline the user may not see is still open (%+v)", i, ev)
		}
	}
}

// nextEvent is the stream's next event that is not a keep-alive.
func nextEvent(t *testing.T, r *bufio.Reader) sseEvent {
	t.Helper()
	for {
		if ev := readEvents(t, r, 1)[0]; ev.kind != ":" {
			return ev
		}
	}
}
