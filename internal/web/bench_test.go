package web

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"drover/internal/testkit"
)

// benchOnly skips a measurement unless DROVER_BENCH=1 (docs/benchmarks.md).
func benchOnly(t *testing.T) {
	t.Helper()
	if os.Getenv("DROVER_BENCH") != "1" {
		t.Skip("a measurement: run with DROVER_BENCH=1 (docs/benchmarks.md)")
	}
}

func percentile(ds []time.Duration, p float64) time.Duration {
	slices.Sort(ds)
	return ds[min(len(ds)-1, int(float64(len(ds))*p))]
}

// The latency from a log chunk reaching the pages' backend to its line in
// the browser's DOM: the page stamps each line when a MutationObserver sees
// it, against the same clock the test stamped the chunk with.
func TestBenchLogChunkToDOM(t *testing.T) {
	benchOnly(t)
	f := newFake()
	f.appendLog("start\n", false)
	srv := serve(t, f, Config{})
	b := testkit.StartBrowser(t)
	browserSignIn(b, srv.URL)
	b.Do("job page", 30*time.Second, chromedp.Navigate(srv.URL+"/jobs/j1"), chromedp.WaitVisible(chromedp.CSS("#log .l")))
	testkit.Eval[bool](b, `(window.seen = {}, new MutationObserver(ms => { const now = performance.timeOrigin + performance.now();
		for (const m of ms) for (const n of m.addedNodes) { const k = n.textContent; if (k.startsWith("bench ")) window.seen[k.slice(6)] = now; } })
		.observe(document.getElementById("log"), {childList: true}), true)`)
	const n = 300
	sent := make([]float64, n)
	for i := range n {
		sent[i] = float64(time.Now().UnixNano()) / 1e6
		f.appendLog(fmt.Sprintf("bench %d\n", i), false)
		time.Sleep(20 * time.Millisecond)
	}
	b.Until("all lines", time.Minute, fmt.Sprintf(`Object.keys(window.seen).length === %d`, n))
	seen := testkit.Eval[map[string]float64](b, `window.seen`)
	var ds []time.Duration
	for i := range n {
		ds = append(ds, time.Duration((seen[fmt.Sprint(i)]-sent[i])*1e6))
	}
	t.Logf("log chunk → DOM over %d lines: p50 %v, p99 %v, max %v", n,
		percentile(ds, 0.5).Round(10*time.Microsecond), percentile(ds, 0.99).Round(10*time.Microsecond), percentile(ds, 1).Round(10*time.Microsecond))
}

// The pages' cost with many SSE followers of one live log: CPU and heap of
// this process (the pages and the fake backend; the clients' reading too).
func TestBenchSSEFollowers(t *testing.T) {
	benchOnly(t)
	for _, followers := range []int{100, 1000} {
		t.Run(fmt.Sprint(followers), func(t *testing.T) {
			f := newFake()
			f.appendLog("start\n", false)
			srv := serve(t, f, Config{})
			srv.Client().Transport.(*http.Transport).MaxIdleConnsPerHost = followers
			cookie := signIn(t, srv)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			const lines = 200
			var wg sync.WaitGroup
			for range followers {
				req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/jobs/j1/log/live?attempt=1&from=6", nil)
				req.Header.Set("Cookie", cookie)
				resp, err := srv.Client().Do(req)
				if err != nil {
					t.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer resp.Body.Close()
					r := bufio.NewReader(resp.Body)
					got := 0
					for got < lines {
						l, err := r.ReadString('\n')
						if err != nil {
							return
						}
						got += strings.Count(l, `class="l"`) // the lines in an event's data

					}
				}()
			}
			var before, after syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
			start := time.Now()
			for i := range lines {
				f.appendLog(fmt.Sprintf("line %d of the live log, as an agent writes it\n", i), false)
				time.Sleep(10 * time.Millisecond)
			}
			wg.Wait()
			wall := time.Since(start)
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
			var ms runtime.MemStats
			runtime.ReadMemStats(&ms)
			cpu := time.Duration(after.Utime.Nano()+after.Stime.Nano()-before.Utime.Nano()-before.Stime.Nano()) * time.Nanosecond
			t.Logf("%d followers, %d chunks in %v: CPU %v (%.0f%% of one core), heap in use %d MiB, goroutines %d",
				followers, lines, wall.Round(time.Millisecond), cpu.Round(time.Millisecond), 100*cpu.Seconds()/wall.Seconds(),
				ms.HeapInuse>>20, runtime.NumGoroutine())
			cancel()
		})
	}
}
