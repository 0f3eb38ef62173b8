package web

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"drover/internal/testkit"
)

// browserSignIn signs alice in through the sign-in form.
func browserSignIn(b *testkit.Browser, base string) {
	b.Do("sign in", 30*time.Second,
		chromedp.Navigate(base+"/signin"),
		chromedp.SendKeys(chromedp.CSS("#token"), aliceToken),
		chromedp.Click(chromedp.CSS("#signin button")),
		chromedp.WaitVisible(chromedp.CSS("#jobs")),
	)
}

// Agent text is text: a log line with a script runs nothing and shows as
// written, colours become classes, and lines arrive live.
func TestBrowserLogIsTextAndArrivesLive(t *testing.T) {
	f := newFake()
	f.appendLog("<script>window.pwned=1</script>\n\x1b[32mgreen\x1b[0m plain\n<img src=x onerror=\"window.pwned=2\">\n", false)
	f.diff = []byte(" x.html | 2 +-\n 1 file changed, 1 insertion(+), 1 deletion(-)\ndiff --git a/x.html b/x.html\n--- a/x.html\n+++ b/x.html\n@@ -1,2 +1,2 @@\n-<b>old</b>\n+<img src=x onerror=\"window.pwned=3\">\n context\n")
	srv := serve(t, f, Config{})
	b := testkit.StartBrowser(t)
	browserSignIn(b, srv.URL)
	b.Do("job page", 30*time.Second, chromedp.Navigate(srv.URL+"/jobs/j1"), chromedp.WaitVisible(chromedp.CSS("#log .l")))
	if got := testkit.Eval[string](b, `document.querySelector("#log .l").textContent`); got != "<script>window.pwned=1</script>" {
		t.Fatalf("first line shows %q", got)
	}
	if got := testkit.Eval[string](b, `document.querySelector("#log .f2").textContent`); got != "green" {
		t.Fatalf("the green span: %q", got)
	}
	f.appendLog("a live line\n", false)
	b.Until("the live line", 20*time.Second, `[...document.querySelectorAll("#log .l")].some(e => e.textContent === "a live line")`)
	b.Until("the timeline", 10*time.Second, `document.querySelector("#events li") !== null`)
	if got := testkit.Eval[string](b, `String(window.pwned) + document.querySelectorAll("#log script, #log img, #events img, #diff img").length`); got != "undefined0" {
		t.Fatalf("agent text ran or became elements: %s", got)
	}
	b.Screenshot("job-log")
	f.appendLog("the end\n", true)
	b.Until("the log ends", 20*time.Second, `document.getElementById("logstatus").textContent === "log complete"`)
}

// A 50 MB log opens on its tail with a bounded DOM, and reading back keeps
// it bounded.
func TestBrowserLargeLogKeepsABoundedDOM(t *testing.T) {
	f := newFake()
	var sb strings.Builder
	for i := 0; sb.Len() < 50<<20; i++ {
		fmt.Fprintf(&sb, "line %07d \x1b[33mwarn\x1b[0m some agent output to fill the log up\n", i)
	}
	f.appendLog(sb.String(), false)
	last := strings.Split(strings.TrimSuffix(sb.String(), "\n"), "\n")
	lastLine := strings.ReplaceAll(last[len(last)-1], "\x1b[33m", "")
	lastLine = strings.ReplaceAll(lastLine, "\x1b[0m", "")
	srv := serve(t, f, Config{})
	b := testkit.StartBrowser(t)
	browserSignIn(b, srv.URL)

	start := time.Now()
	b.Do("open the 50 MB log", 30*time.Second, chromedp.Navigate(srv.URL+"/jobs/j1"), chromedp.WaitVisible(chromedp.CSS("#log .l")))
	t.Logf("50 MB log page usable after %v", time.Since(start))
	lines := func() int { return testkit.Eval[int](b, `document.querySelectorAll("#log .l").length`) }
	if n := lines(); n == 0 || n > maxLines {
		t.Fatalf("%d lines in the DOM", n)
	}
	if got := testkit.Eval[string](b, `document.querySelector("#log").lastElementChild.textContent`); got != lastLine {
		t.Fatalf("last line %q, want %q", got, lastLine)
	}
	for i := 0; i < 4; i++ { // past maxLines: the DOM drops lines at the bottom
		before := testkit.Eval[string](b, `document.querySelector("#log .l").textContent`)
		b.Do("earlier lines", 20*time.Second, chromedp.Click(chromedp.CSS("#earlier")))
		b.Until("earlier lines arrive", 20*time.Second, fmt.Sprintf(`document.querySelector("#log .l").textContent !== %q`, before))
		if n := lines(); n > maxLines {
			t.Fatalf("after %d windows back, %d lines in the DOM", i+1, n)
		}
	}
	if n := testkit.Eval[int](b, `document.getElementsByTagName("*").length`); n > 3*maxLines+200 {
		t.Fatalf("%d elements in the page", n)
	}
	b.Screenshot("large-log")
}

// A form on another origin that posts to the hub is refused, even from
// the same site (another port), and nothing is done.
func TestBrowserForgedPostIsRefused(t *testing.T) {
	f := newFake()
	srv := serve(t, f, Config{})
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<form id="f" method="post" action="%s/jobs/j1/cancel"><input name="csrf" value="guess"></form>
<script>document.getElementById("f").submit()</script>`, srv.URL)
	}))
	defer evil.Close()
	b := testkit.StartBrowser(t)
	browserSignIn(b, srv.URL)
	b.Do("the forged form", 30*time.Second, chromedp.Navigate(evil.URL), chromedp.WaitVisible(chromedp.CSS("#why")))
	why := testkit.Eval[string](b, `document.getElementById("why").textContent`)
	if !strings.HasPrefix(why, "Refused:") {
		t.Fatalf("the forged post's page says %q", why)
	}
	b.Screenshot("forged-post")
	if acts := f.actions(); len(acts) != 0 {
		t.Fatalf("the forged post acted: %v", acts)
	}
	// The page's own button works.
	b.Do("cancel from the page", 30*time.Second, chromedp.Navigate(srv.URL+"/jobs/j1"), chromedp.Click(chromedp.CSS("#cancel")))
	for deadline := time.Now().Add(30 * time.Second); len(f.actions()) == 0 && time.Now().Before(deadline); {
		time.Sleep(20 * time.Millisecond)
	}
	if acts := f.actions(); len(acts) != 1 || acts[0] != "cancel j1" {
		t.Fatalf("actions: %v", acts)
	}
}

// The runners page's up/down controls reorder the user's accounts: the
// post names the account and its new position, and the page shows the
// new order; another user's shared account has no controls.
func TestBrowserAccountOrderControls(t *testing.T) {
	f := newFake()
	srv := serve(t, f, Config{})
	b := testkit.StartBrowser(t)
	browserSignIn(b, srv.URL)
	order := func() string {
		return testkit.Eval[string](b, `Array.from(document.querySelectorAll("#account-order li")).map(l => l.dataset.account).join(" ")`)
	}
	b.Do("the runners page", 30*time.Second, chromedp.Navigate(srv.URL+"/runners"), chromedp.WaitVisible(chromedp.CSS("#account-order")))
	if got := order(); got != "box-1/acct_a box-1/acct_b box-2/acct_c" {
		t.Fatalf("account order shown: %q", got)
	}
	if n := testkit.Eval[int](b, `document.querySelectorAll("#account-order li:first-child button.up, #account-order li:last-child button.down").length`); n != 0 {
		t.Fatalf("%d buttons that move an account past the end", n)
	}
	if txt := testkit.Eval[string](b, `document.querySelector("#account-order").textContent`); !strings.Contains(txt, "<i>spare</i>") {
		t.Fatalf("a label is not shown as text: %q", txt)
	}
	// Each button posts; the page comes back with the new order and the
	// moved account marked.
	move := func(what, button, moved, want string) {
		t.Helper()
		b.Do(what, 30*time.Second, chromedp.Click(chromedp.CSS(button)),
			chromedp.WaitVisible(chromedp.CSS(fmt.Sprintf(`#account-order li.moved[data-account=%q]`, moved))))
		if got := order(); got != want {
			t.Fatalf("after %s: order %q, want %q", what, got, want)
		}
	}
	move("move the first account down", `#account-order li:first-child button.down`, "box-1/acct_a", "box-1/acct_b box-1/acct_a box-2/acct_c")
	move("move the last account up", `#account-order li:last-child button.up`, "box-2/acct_c", "box-1/acct_b box-2/acct_c box-1/acct_a")
	b.Screenshot("account-order")
	if acts := f.actions(); !slices.Equal(acts, []string{"move box-1/acct_a 2", "move box-2/acct_c 2"}) {
		t.Fatalf("moves posted: %v", acts)
	}
}

// A pipeline's page draws a box per step in the SVG, runs none of the
// text agents wrote, and follows the steps' states without a reload.
func TestBrowserPipelineGraph(t *testing.T) {
	f := newFake()
	f.pipes[0].Steps[2].Reason = `<img src=x onerror="window.pwned=1"><script>window.pwned=2</script>`
	srv := serve(t, f, Config{})
	b := testkit.StartBrowser(t)
	browserSignIn(b, srv.URL)
	b.Do("the pipeline page", 30*time.Second, chromedp.Navigate(srv.URL+"/pipelines/p1"), chromedp.WaitVisible(chromedp.CSS("#graph g.node")))
	if got := testkit.Eval[string](b, `[...document.querySelectorAll("#graph g.node")].map(g => g.dataset.step + ":" + g.getAttribute("class")).join(" ")`); got != "plan:node st-done impl:node st-running review:node st-needs_human ship:node st-pending" {
		t.Fatalf("the graph's boxes: %q", got)
	}
	if n := testkit.Eval[int](b, `document.querySelectorAll("#graph path.edge").length`); n != 4 {
		t.Fatalf("%d arrows, want 4", n)
	}
	testkit.Eval[bool](b, `(window.samePage = true)`)
	f.setStep("review", "running")
	b.Until("the review step runs", 20*time.Second, `document.querySelector('#graph g.node[data-step="review"]').classList.contains("st-running")`)
	if got := testkit.Eval[string](b, `String(window.pwned) + String(window.samePage) + document.querySelectorAll("#pipeline-live img, #pipeline-live script").length`); got != "undefinedtrue0" {
		t.Fatalf("agent text ran, became elements, or the page reloaded: %s", got)
	}
	b.Screenshot("pipeline-graph")
}
