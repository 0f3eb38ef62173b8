package testkit

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"

	"drover/internal/testkit/ciskip"
)

// Browser is a headless Chromium for a test, driven with chromedp.
type Browser struct {
	t   testing.TB
	Ctx context.Context // run chromedp actions with it
	dir string          // screenshots
}

// StartBrowser starts headless Chromium (Debian's chromium, which
// scripts/test installs): skipped on a developer's machine without it,
// failed under CI=true. It is stopped when the test ends. Screenshots go to
// a temporary folder kept after the test, whose path the test logs.
func StartBrowser(t testing.TB) *Browser {
	t.Helper()
	path := ""
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			path = p
			break
		}
	}
	if path == "" {
		ciskip.Skipf(t, "no chromium on PATH for the browser tests (apt-get install chromium)")
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(path),
		chromedp.NoSandbox, // CI runs as root, where Chromium's sandbox refuses to start
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 900),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelCtx := chromedp.NewContext(actx)
	t.Cleanup(func() { cancelCtx(); cancelAlloc() })
	// The first run starts the browser, for as long as its context lives:
	// no deadline on it.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium %s: %v", path, err)
	}
	dir, err := os.MkdirTemp("", "drover-screens-")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("browser screenshots in %s", dir)
	return &Browser{t: t, Ctx: ctx, dir: dir}
}

// Do runs steps with a deadline, failing the test (with a screenshot) on
// an error.
func (b *Browser) Do(what string, d time.Duration, steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, d)
	defer cancel()
	if err := chromedp.Do(ctx, steps...); err != nil {
		b.Screenshot("failed-" + what)
		b.t.Fatalf("browser: %s: %v", what, err)
	}
}

// Eval evaluates a JavaScript expression in the page and returns its value.
func Eval[T any](b *Browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, 20*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("browser: evaluate %s: %v", expr, err)
	}
	return v
}

// Until waits until the JavaScript expression is truthy, failing the test
// (with a screenshot) after d.
func (b *Browser) Until(what string, d time.Duration, expr string) {
	b.t.Helper()
	b.Do(what, d+5*time.Second, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(d), chromedp.WithPollingInterval(50*time.Millisecond))(ctx, t)
		return err
	}))
}

// Screenshot saves the whole page as NAME.png in the screenshots folder.
func (b *Browser) Screenshot(name string) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.Ctx, 20*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	p := filepath.Join(b.dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
	}
}

// Submit clicks the element (a form's button) and waits for the page that
// answers it to load. The click is the page's own, found and dispatched in
// one step: a live page may re-render its buttons between a lookup of the
// node and a click at its id (chromedp's "Could not find node with given
// id").
func (b *Browser) Submit(what, sel string) {
	b.t.Helper()
	click := fmt.Sprintf(`(() => { const e = document.querySelector(%q); if (!e) throw new Error("no element " + %q); e.click(); return true })()`, sel, sel)
	b.Do(what, time.Minute, chromedp.WaitVisible(chromedp.CSS(sel)), chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
		_, err := chromedp.WaitEvent(page.LoadEventFired, nil, chromedp.Evaluate[bool](click))(ctx, t)
		return err
	}))
}

// DismissDialogs accepts every JavaScript dialog the browser's pages open
// from now on: a page that alerts (Gitea built without its frontend assets
// alerts that they are missing) would otherwise block every later step.
func (b *Browser) DismissDialogs() {
	opening := chromedp.Events(b.Ctx, page.JavascriptDialogOpening)
	go func() {
		for _, err := range opening {
			if err != nil {
				return
			}
			// Answered from another goroutine than the one reading events.
			go func() {
				_ = chromedp.Do(b.Ctx, chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
					_, err := cdp.Call(ctx, t, page.HandleJavaScriptDialog, page.HandleJavaScriptDialogParams{Accept: true})
					return err
				}))
			}()
		}
	}()
}
