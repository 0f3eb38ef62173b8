package hub

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

	"drover/internal/apitypes"
	"drover/internal/protocol"
	"drover/internal/testkit"
)

// benchOnly skips a measurement unless DROVER_BENCH=1.
func benchOnly(t *testing.T) {
	t.Helper()
	if os.Getenv("DROVER_BENCH") != "1" {
		t.Skip("a measurement: run with DROVER_BENCH=1 (docs/benchmarks.md)")
	}
}

// liveAttempt is a hub with a scripted runner running one job's attempt.
func liveAttempt(t *testing.T) (*testHub, *scriptRunner, apitypes.JobView, protocol.Offer) {
	t.Helper()
	th := startHub(t, Config{})
	sr, _ := th.dial(th.registerRunner("r1"), protocol.Hello{})
	j := th.submit("true")
	o := sr.offer()
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	return th, sr, j, o
}

// The hub's cost with many browsers following one live log over SSE: CPU
// of this process (the hub, its SQLite reads, and the followers' reading)
// and the hub's heap while they follow (docs/benchmarks.md).
func TestBenchSSEFollowersOfOneJob(t *testing.T) {
	benchOnly(t)
	for _, followers := range []int{100, 1000} {
		t.Run(fmt.Sprint(followers), func(t *testing.T) {
			th, sr, j, o := liveAttempt(t)
			cookie := th.browser().signIn(th.admin)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			tr := &http.Transport{MaxConnsPerHost: 0, MaxIdleConnsPerHost: followers}
			defer tr.CloseIdleConnections()
			const lines = 200
			var wg sync.WaitGroup
			for range followers {
				req, _ := http.NewRequestWithContext(ctx, "GET", th.srv.URL+"/jobs/"+j.ID+"/log/live?attempt=1&from=0", nil)
				req.Header.Set("Cookie", cookie.Name+"="+cookie.Value)
				resp, err := tr.RoundTrip(req)
				if err != nil {
					t.Fatal(err)
				}
				wg.Add(1)
				go func() {
					defer wg.Done()
					defer resp.Body.Close()
					r := bufio.NewReader(resp.Body)
					for got := 0; got < lines; {
						l, err := r.ReadString('\n')
						if err != nil {
							return
						}
						got += strings.Count(l, `class="l"`)
					}
				}()
			}
			runtime.GC()
			var before, after syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &before)
			start := time.Now()
			var off int64
			var peak uint64
			for i := range lines {
				data := []byte(fmt.Sprintf("line %d of the live log, as an agent writes it\n", i))
				wantOK(t, sr.request(protocol.TypeLog, protocol.Log{AttemptRef: o.AttemptRef, Offset: off, Data: data}))
				off += int64(len(data))
				if i%50 == 0 {
					var ms runtime.MemStats
					runtime.ReadMemStats(&ms)
					peak = max(peak, ms.HeapInuse)
				}
				time.Sleep(10 * time.Millisecond)
			}
			wg.Wait()
			wall := time.Since(start)
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &after)
			cpu := time.Duration(after.Utime.Nano() + after.Stime.Nano() - before.Utime.Nano() - before.Stime.Nano())
			t.Logf("%d followers, %d chunks in %v: CPU %v (%.0f%% of one core), heap in use up to %d MiB",
				followers, lines, wall.Round(time.Millisecond), cpu.Round(time.Millisecond), 100*cpu.Seconds()/wall.Seconds(), peak>>20)
		})
	}
}

// The latency from a runner's log chunk reaching the hub to its line in a
// browser's DOM: the test stamps each chunk as it sends it, the page stamps
// each line when a MutationObserver sees it (one clock, one machine).
func TestBenchLogChunkToDOM(t *testing.T) {
	benchOnly(t)
	th, sr, j, o := liveAttempt(t)
	first := []byte("start\n")
	wantOK(t, sr.request(protocol.TypeLog, protocol.Log{AttemptRef: o.AttemptRef, Data: first}))
	off := int64(len(first))

	b := testkit.StartBrowser(t)
	th.browserSignIn(b, th.admin)
	b.Do("job page", time.Minute, chromedp.Navigate(th.srv.URL+"/jobs/"+j.ID), chromedp.WaitVisible(chromedp.CSS("#log .l")))
	testkit.Eval[bool](b, `(window.seen = {}, new MutationObserver(ms => { const now = performance.timeOrigin + performance.now();
		for (const m of ms) for (const n of m.addedNodes) { const k = n.textContent; if (k.startsWith("bench ")) window.seen[k.slice(6)] = now; } })
		.observe(document.getElementById("log"), {childList: true}), true)`)
	time.Sleep(time.Second) // the stream is open
	const n = 300
	sent := make([]float64, n)
	for i := range n {
		data := []byte(fmt.Sprintf("bench %d\n", i))
		sent[i] = float64(time.Now().UnixNano()) / 1e6
		wantOK(t, sr.request(protocol.TypeLog, protocol.Log{AttemptRef: o.AttemptRef, Offset: off, Data: data}))
		off += int64(len(data))
		time.Sleep(20 * time.Millisecond)
	}
	b.Until("all lines", time.Minute, fmt.Sprintf(`Object.keys(window.seen).length === %d`, n))
	seen := testkit.Eval[map[string]float64](b, `window.seen`)
	ds := make([]time.Duration, n)
	for i := range n {
		ds[i] = time.Duration((seen[fmt.Sprint(i)] - sent[i]) * 1e6)
	}
	slices.Sort(ds)
	t.Logf("runner log chunk → browser DOM over %d lines: p50 %v, p99 %v, max %v", n,
		ds[n/2].Round(10*time.Microsecond), ds[n*99/100].Round(10*time.Microsecond), ds[n-1].Round(10*time.Microsecond))
}
