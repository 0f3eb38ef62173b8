package web

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
)

// fakeEval is the one evaluation the fake backend knows: an instance id,
// a reason and a name an agent or a dataset could have written as markup.
var fakeEval = apitypes.EvalReport{
	Eval: apitypes.EvalView{ID: "e-1", State: "running", Agent: "claude", Name: "claude/<i>opus</i>", Dataset: "lite-<b>8</b>.jsonl",
		Attempts: 2, Repeats: 2, CreatedAt: time.Now().Add(-time.Hour), Done: 5, Total: 7, Resolved: 3, Graded: 4, CostUSD: 1.5,
		Items: []apitypes.EvalItemView{
			{InstanceID: "calc-1", Line: 1, Repeat: 1, Attempt: 1, State: "resolved", AgentJob: "j-1", GradeJob: "j-2", PatchBytes: 321},
			{InstanceID: "<script>alert(1)</script>", Line: 2, Repeat: 1, Attempt: 1, State: "unresolved",
				Reason: "tests failed: <script>alert(2)</script>", AgentJob: "j-3", GradeJob: "j-4", PatchBytes: 12},
			{InstanceID: "bad", Line: 3, State: "refused", Reason: "base <img src=x> is not a commit"},
		}},
	Instances: 2, Resolved: 3, Total: 4, Pending: 2, Refused: 1, PassAt1: 0.75, N: 2, PassAtN: 1, CostUSD: 1.5, Tokens: 900,
	CostPerResolved: 0.5, TokensPerResolved: 300, Min: 0.5, Max: 1, Stddev: 0.3536,
	Repeats:     []apitypes.EvalRepeat{{Repeat: 1, Resolved: 1, Total: 2, Rate: 0.5}, {Repeat: 2, Resolved: 2, Total: 2, Rate: 1}},
	Predictions: []apitypes.EvalPrediction{{InstanceID: "calc-1", ModelPatch: "diff --git a/secret-patch b/secret-patch"}},
}

func (f *fakeBackend) Evals(context.Context, User) ([]apitypes.EvalView, error) {
	v := fakeEval.Eval
	v.Items = nil
	return []apitypes.EvalView{v}, nil
}

func (f *fakeBackend) EvalReport(_ context.Context, _ User, id string) (apitypes.EvalReport, error) {
	if id != fakeEval.Eval.ID {
		return apitypes.EvalReport{}, &Error{Status: http.StatusNotFound, Msg: "no evaluation " + id}
	}
	return fakeEval, nil
}

// The evaluations pages: the list with each one's progress, resolved
// share and cost; an evaluation's numbers (pass@1, pass@N, the spread
// over repeats, cost per resolved) and its items linking to their jobs.
// Instance ids, reasons and names are untrusted and render escaped; the
// patches are not on the page.
func TestEvalPagesRender(t *testing.T) {
	srv := serve(t, newFake(), Config{})
	cookie := signIn(t, srv)
	unescaped := func(path, b string) {
		t.Helper()
		for _, bad := range []string{"<script>alert", "<img src", "<i>opus", "<b>8"} {
			if strings.Contains(b, bad) {
				t.Errorf("GET %s: unescaped %q in\n%s", path, bad, b)
			}
		}
	}
	code, b := get(t, srv, cookie, "/evals")
	for _, want := range []string{`<a href="/evals/e-1"><code>e-1</code></a>`, "lite-&lt;b&gt;8&lt;/b&gt;.jsonl", "claude/&lt;i&gt;opus&lt;/i&gt;",
		`<td class="done">5/7</td>`, `<td class="resolved">3/4</td>`, "$1.5000", `<a href="/evals" aria-current="page">Evaluations</a>`} {
		if code != http.StatusOK || !strings.Contains(b, want) {
			t.Errorf("GET /evals: %d, want %q in\n%s", code, want, b)
		}
	}
	unescaped("/evals", b)

	code, b = get(t, srv, cookie, "/evals/e-1")
	if code != http.StatusOK {
		t.Fatalf("GET /evals/e-1: %d\n%s", code, b)
	}
	unescaped("/evals/e-1", b)
	for _, want := range []string{
		`<dd id="resolved">3/4 (75.0%)</dd>`, `<dd id="pass1">0.750</dd>`, `<dt>pass@2</dt><dd id="passn">1.000</dd>`,
		"min 50.0%, max 100.0%, stddev 35.4% over 2 repeats", `<li data-repeat="2">repeat 2: 2/2 (100.0%)</li>`,
		"per resolved $0.5000, 300 tokens",
		`<code>&lt;script&gt;alert(1)&lt;/script&gt;</code>`, `<small class="reason">tests failed: &lt;script&gt;alert(2)&lt;/script&gt;</small>`,
		`<small class="reason">base &lt;img src=x&gt; is not a commit</small>`,
		`<a href="/jobs/j-3"><code>j-3</code></a>`, `<a href="/jobs/j-4"><code>j-4</code></a>`, `<td class="patch">321 B</td>`,
		`id="eval-live" data-eval="e-1" data-version="`, `<a href="/evals" aria-current="page">Evaluations</a>`,
	} {
		if !strings.Contains(b, want) {
			t.Errorf("GET /evals/e-1: want %q in\n%s", want, b)
		}
	}
	if strings.Contains(b, "secret-patch") {
		t.Errorf("the page shows a patch:\n%s", b)
	}

	// Unknown (or not the user's: the backend says the same) reads as not
	// found, the page and its stream alike.
	for _, path := range []string{"/evals/e-2", "/evals/e-2/live", "/evals/%3Cb%3Ex%3C%2Fb%3E"} {
		if code, b := get(t, srv, cookie, path); code != http.StatusNotFound || strings.Contains(b, "calc-1") || strings.Contains(b, "<b>x") {
			t.Errorf("GET %s: %d\n%s", path, code, b)
		}
	}
}
