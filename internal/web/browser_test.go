package web

import (
	"fmt"
	"net/http"
	"net/http/httptest"
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
	if got := testkit.Eval[string](b, `String(window.pwned) + document.querySelectorAll("#log script, #log img, #events img").length`); got != "undefined0" {
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
