package repo

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"drover/internal/apitypes"
	"drover/internal/e2e/e2ekit"
	"drover/internal/job"
	"drover/internal/testkit"
)

// webSignIn signs the browser in with a user token through the form.
func webSignIn(t *testing.T, b *testkit.Browser, h *testkit.Hub, token string) {
	t.Helper()
	b.Do("sign in", time.Minute,
		chromedp.Navigate(h.URL+"/signin"),
		chromedp.SendKeys(chromedp.CSS("#token"), token),
		chromedp.Click(chromedp.CSS("#signin button")),
		chromedp.WaitVisible(chromedp.CSS(".who")), // on the page after, signed in
	)
}

// reloadUntil reloads path until the expression is truthy.
func reloadUntil(t *testing.T, b *testkit.Browser, url, what, expr string, d time.Duration) {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		b.Do(what, time.Minute, chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("main")))
		if testkit.Eval[bool](b, "!!("+expr+")") {
			return
		}
		if time.Now().After(deadline) {
			b.Screenshot("failed-" + what)
			t.Fatalf("%s: not reached in %v", what, d)
		}
		time.Sleep(300 * time.Millisecond)
	}
}

// The dashboard in a real browser against the real binary: a runner login
// approved on the page its link opens, the runner shown online, a job
// submitted with the CLI listed and its log lines arriving live (a line
// with a script shown as text), the metrics, and sign-out.
func TestWebDashboardFollowsARealJob(t *testing.T) {
	t.Parallel()
	metricsToken := filepath.Join(t.TempDir(), "metrics.token")
	if err := os.WriteFile(metricsToken, []byte("m-secret\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	h := testkit.StartHub(t, bin, "--metrics-token-file", metricsToken)
	alice := h.AddUser(t, "alice")
	b := testkit.StartBrowser(t)
	webSignIn(t, b, h, alice.Token)
	b.Screenshot("jobs-empty")

	// The login link opens the approval page; approving there, signed in,
	// makes the runner alice's.
	r := h.LoginRunnerWith(t, "r1", h.URL, func(link string) {
		b.Do("approve the runner", time.Minute, chromedp.Navigate(link), chromedp.WaitVisible(chromedp.CSS("form button")))
		b.Screenshot("approve")
		b.Do("approve", time.Minute, chromedp.Click(chromedp.CSS("form[action=approve] button")), chromedp.WaitVisible(chromedp.CSS("p.ok")))
	})
	r.Start()
	reloadUntil(t, b, h.URL+"/runners", "runner online", `document.querySelector('tr[data-runner="r1"] .state') && document.querySelector('tr[data-runner="r1"] .state').textContent.includes("online") && document.querySelector('tr[data-runner="r1"]').textContent.includes("alice")`, time.Minute)
	b.Screenshot("runners")

	// A job whose last line comes well after its first (the sandbox sees
	// nothing of the test's files to wait on).
	v := alice.Run(t, "--agent", "exec", "--", "sh", "-c",
		`echo first line; echo '<script>window.pwned=1</script>'; sleep 15; echo last line`)
	reloadUntil(t, b, h.URL+"/jobs", "job listed", fmt.Sprintf(`document.querySelector('tr[data-job=%q]')`, v.ID), time.Minute)
	b.Screenshot("jobs")
	// The page may open before the first attempt: reload until it has a log.
	reloadUntil(t, b, h.URL+"/jobs/"+v.ID, "log shown", `[...document.querySelectorAll("#log .l")].some(e => e.textContent === "first line")`, 2*time.Minute)
	lines := testkit.Eval[string](b, `[...document.querySelectorAll("#log .l")].map(e => e.textContent).join("\n")`)
	if !strings.Contains(lines, "<script>window.pwned=1</script>") {
		t.Fatalf("the script line is not shown as text:\n%s", lines)
	}
	if strings.Contains(lines, "last line") {
		t.Fatal("the page opened after the last line: nothing left to arrive live (a very slow machine?)")
	}
	b.Until("the last line arrives live", time.Minute, `[...document.querySelectorAll("#log .l")].some(e => e.textContent === "last line")`)
	b.Until("the state follows", time.Minute, `document.getElementById("state").textContent === "completed"`)
	if got := testkit.Eval[string](b, `String(window.pwned) + document.querySelectorAll("#log script").length`); got != "undefined0" {
		t.Fatalf("the log's script ran or became an element: %s", got)
	}
	b.Screenshot("job")

	// The metrics, parsed as Prometheus parses them.
	req, _ := http.NewRequest("GET", h.URL+"/metrics", nil)
	req.Header.Set("Authorization", "Bearer m-secret")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	parser := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := parser.TextToMetricFamilies(strings.NewReader(string(body)))
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("metrics: %d %v\n%s", resp.StatusCode, err, body)
	}
	if n := fams["drover_runners_connected"].GetMetric()[0].GetGauge().GetValue(); n != 1 {
		t.Errorf("runners connected = %v", n)
	}
	if n := fams["drover_dispatch_latency_seconds"].GetMetric()[0].GetHistogram().GetSampleCount(); n < 1 {
		t.Errorf("dispatch latency samples = %v", n)
	}
	if n := fams["drover_log_bytes_total"].GetMetric()[0].GetCounter().GetValue(); n < float64(len("first line\nlast line\n")) {
		t.Errorf("log bytes = %v", n)
	}
	var completed float64
	for _, m := range fams["drover_attempts_finished_total"].GetMetric() {
		if m.GetLabel()[0].GetValue() == string(job.AttemptCompleted) {
			completed = m.GetCounter().GetValue()
		}
	}
	if completed != 1 {
		t.Errorf("completed attempts = %v\n%s", completed, body)
	}

	// Signed out, the pages ask to sign in again.
	b.Do("sign out", time.Minute, chromedp.Click(chromedp.CSS(".signout button")), chromedp.WaitVisible(chromedp.CSS("#signin")))
	b.Do("a page signed out", time.Minute, chromedp.Navigate(h.URL+"/jobs/"+v.ID), chromedp.WaitVisible(chromedp.CSS("#signin")))
}

// The agent's question, in the browser: another user's answer waits, the
// requester approves it with the inbox's button, and the job resumes and
// delivers.
func TestWebQuestionAnsweredInTheBrowser(t *testing.T) {
	t.Parallel()
	h := testkit.StartHub(t, bin)
	h.StartRunner(t, "r1")
	src := toolsCheckout(t)
	v := e2ekit.RunRepo(t, h, "--repo", src, "--tools", "--agent", "exec", "--", "./bin/mcpagent", "repo")
	c := h.Client()
	w := testkit.WaitJob(t, c, v.ID, 2*time.Minute, func(v apitypes.JobView) bool { return v.State == job.Waiting || v.State.Terminal() })
	if w.State != job.Waiting {
		t.Fatalf("job is %s, want waiting:\n%s", w.State, testkit.Log(t, c, v.ID, 0))
	}
	b := testkit.StartBrowser(t)

	// Another member of the job's project answers in the browser; the
	// answer waits for the requester.
	if w.Project == "" {
		t.Fatalf("the repo job has no project: %+v", w)
	}
	ops := h.AddUser(t, "ops")
	if out, err := h.CLI("projects", "members", "add", w.Project, "ops"); err != nil {
		t.Fatalf("add ops to %s: %v\n%s", w.Project, err, out)
	}
	webSignIn(t, b, h, ops.Token)
	b.Do("the inbox", time.Minute, chromedp.Navigate(h.URL+"/questions"), chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`section[data-job=%q]`, v.ID))))
	if got := testkit.Eval[string](b, `document.querySelector("section.question").textContent`); !strings.Contains(got, "which color?") || !strings.Contains(got, "2) blue") {
		t.Fatalf("the inbox shows:\n%s", got)
	}
	b.Screenshot("questions")
	b.Do("answer blue", time.Minute, chromedp.Click(chromedp.CSS(`section.question button.choice[value="2"]`)),
		chromedp.WaitVisible(chromedp.CSS("section.question .pending")))
	if testkit.Eval[bool](b, `!!document.querySelector("section.question button.approve")`) {
		t.Fatal("ops, who did not request the job, is offered the approve button")
	}
	if got := testkit.WaitJob(t, c, v.ID, time.Minute, func(apitypes.JobView) bool { return true }); got.State != job.Waiting {
		t.Fatalf("an unapproved answer moved the job: %s", got.State)
	}

	// The requester sees the pending answer and approves it.
	b.Do("sign out", time.Minute, chromedp.Click(chromedp.CSS(".signout button")), chromedp.WaitVisible(chromedp.CSS("#signin")))
	webSignIn(t, b, h, h.Admin)
	b.Do("the requester's inbox", time.Minute, chromedp.Navigate(h.URL+"/questions"), chromedp.WaitVisible(chromedp.CSS("section.question button.approve")))
	b.Screenshot("questions-approve")
	b.Do("approve", time.Minute, chromedp.Click(chromedp.CSS("section.question button.approve")), chromedp.WaitVisible(chromedp.CSS("main h1")))
	end := testkit.WaitJob(t, c, v.ID, 3*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	if end.State != job.Completed || end.Summary != "done" {
		t.Fatalf("job ended %s (%s), summary %q:\n%s", end.State, end.Reason, end.Summary, testkit.Log(t, c, v.ID, 2))
	}
	if len(end.Questions) != 1 || end.Questions[0].Answer == nil || end.Questions[0].Answer.Text != "blue" {
		t.Fatalf("questions = %+v", end.Questions)
	}
	b.Do("the job page", time.Minute, chromedp.Navigate(h.URL+"/jobs/"+v.ID), chromedp.WaitVisible(chromedp.CSS("#events")))
	if got := testkit.Eval[string](b, `document.body.innerText`); !strings.Contains(got, "drover fetch "+v.ID) || !strings.Contains(got, "answer") {
		t.Errorf("the job page lacks the fetch command or the answer:\n%s", got)
	}
	b.Screenshot("job-answered")
}
