package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"drover/internal/apitypes"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/testkit"
)

// The hub with 1,000 runners connected, on SQLite and on Postgres: connect
// time, memory per connection, and submit → offer latency and throughput
// of trivial jobs (docs/benchmarks.md). The runners are real WebSocket
// connections in this process speaking the real protocol: an offer is
// accepted at once and, on the hub's ok, finished (completed, empty log).
func TestBenchThousandRunners(t *testing.T) {
	runners, burst, serial := benchSizes(t, 2000)
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			var cfg Config
			if engine == "postgres" {
				cfg.Database = testkit.StartPostgres(t)
			}
			th := startHub(t, cfg)
			rs := make([]benchRunner, runners)
			for i := range rs {
				rs[i] = benchRunner{url: th.srv.URL, token: th.registerRunner(fmt.Sprintf("b%04d", i))}
			}
			fl := newBenchFleet()
			defer fl.close()
			fl.join(t, engine, rs, th.h.cfg.Heartbeat/2)

			submit := func(int) string { return benchSubmit(t, th, nil) }
			l := benchQuantiles(fl.serial(t, serial, submit))
			t.Logf("%s: submit → offer, one job at a time (%d jobs): p50 %v, p99 %v, max %v", engine, serial, l.p50, l.p99, l.max)
			b := fl.burst(t, burst, submit)
			t.Logf("%s: %v", engine, b)
			if lost := fl.lost.Load(); lost > 0 {
				t.Errorf("%d runner connections ended during the bench", lost)
			}
		})
	}
}

// benchSizes skips the test unless DROVER_BENCH=1, and is a fleet bench's
// DROVER_BENCH_RUNNERS (1,000) runners, burst of DROVER_BENCH_JOBS (jobs
// by default) and 200 jobs one at a time.
func benchSizes(t *testing.T, jobs int) (runners, burst, serial int) {
	benchOnly(t)
	return benchEnv(t, "DROVER_BENCH_RUNNERS", 1000), benchEnv(t, "DROVER_BENCH_JOBS", jobs), 200
}

func benchEnv(t *testing.T, name string, def int) int {
	v := os.Getenv(name)
	if v == "" {
		return def
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		t.Fatalf("%s=%q: want a positive count", name, v)
	}
	return n
}

type benchStats struct{ p50, p99, max time.Duration }

func benchQuantiles(ds []time.Duration) benchStats {
	s := slices.Clone(ds)
	slices.Sort(s)
	at := func(p int) time.Duration { return s[min(len(s)-1, (len(s)*p+99)/100-1)].Round(10 * time.Microsecond) }
	return benchStats{at(50), at(99), s[len(s)-1].Round(10 * time.Microsecond)}
}

// memNow is the heap in use after a GC and the process's VmRSS.
func memNow() (heap, rss int64) {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b, _ := os.ReadFile("/proc/self/status")
	for l := range strings.Lines(string(b)) {
		if rest, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			rss = kb << 10
		}
	}
	return int64(ms.HeapInuse), rss
}

// benchSubmit submits a trivial job needing labels on th, from any
// goroutine (th.submit may only fail the test from the test's own).
func benchSubmit(t *testing.T, th *testHub, labels map[string]string) string {
	body, _ := json.Marshal(apitypes.SubmitRequest{Agent: "exec", Args: []string{"true"}, Labels: labels})
	req, _ := http.NewRequest("POST", th.srv.URL+apitypes.APIPrefix+"/jobs", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+th.admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("submit: %v", err)
		return ""
	}
	defer resp.Body.Close()
	var v apitypes.JobView
	if resp.StatusCode != http.StatusCreated || json.NewDecoder(resp.Body).Decode(&v) != nil {
		t.Errorf("submit: %s", resp.Status)
	}
	return v.ID
}

// benchFleet is the bench's runners: one reader goroutine each, one
// heartbeat goroutine for all.
type benchFleet struct {
	mu     sync.Mutex
	conns  []*websocket.Conn
	offers map[string]time.Time // job → when its offer arrived
	done   map[string]time.Time // job → when the hub acknowledged its finish
	count  map[string]int       // job → offers of it received
	astray atomic.Int64         // offers of a job whose labels the runner lacks
	lost   atomic.Int64
	closed atomic.Bool
}

func newBenchFleet() *benchFleet {
	return &benchFleet{offers: map[string]time.Time{}, done: map[string]time.Time{}, count: map[string]int{}}
}

// benchRunner is one runner of the fleet: the hub it dials, its token and
// the labels it says in hello.
type benchRunner struct {
	url, token string
	labels     map[string]string
}

// join connects rs, logs how long that took and the memory per
// connection, and heartbeats for them every beat; it returns the heap in
// use per connection in KiB.
func (fl *benchFleet) join(t testing.TB, what string, rs []benchRunner, beat time.Duration) float64 {
	heap0, rss0 := memNow()
	start := time.Now()
	hellos := fl.connect(t, rs)
	wall := time.Since(start)
	heap1, rss1 := memNow()
	go fl.heartbeats(beat)
	h := benchQuantiles(hellos)
	t.Logf("%s: %d runners connected in %v (hello → welcome p50 %v, p99 %v, 32 dialing at once)",
		what, len(rs), wall.Round(time.Millisecond), h.p50, h.p99)
	heap := float64(heap1-heap0) / float64(len(rs)) / 1024
	t.Logf("%s: memory per connection (hub and fake runner, both in this process): heap %.1f KiB, RSS %.1f KiB",
		what, heap, float64(rss1-rss0)/float64(len(rs))/1024)
	return heap
}

// connect connects each runner, 32 at a time, and returns each one's
// hello → welcome time.
func (fl *benchFleet) connect(t testing.TB, rs []benchRunner) []time.Duration {
	out := make([]time.Duration, len(rs))
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i, r := range rs {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			at := time.Now()
			ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(r.url, "http")+apitypes.APIPrefix+"/runner/connect",
				&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + r.token}}})
			if err != nil {
				t.Errorf("dial: %v", err)
				return
			}
			ws.SetReadLimit(protocol.MaxFrame)
			if err := benchWrite(ws, protocol.TypeHello, "", protocol.Hello{Protocol: protocol.Version, Slots: 1, Labels: r.labels}); err != nil {
				t.Error(err)
				return
			}
			if _, b, err := ws.Read(ctx); err != nil || !bytes.Contains(b, []byte(`"`+protocol.TypeWelcome+`"`)) {
				t.Errorf("welcome: %v %.100s", err, b)
				return
			}
			out[i] = time.Since(at)
			fl.mu.Lock()
			fl.conns = append(fl.conns, ws)
			fl.mu.Unlock()
			go fl.read(ws, r.labels)
		})
	}
	wg.Wait()
	return out
}

func benchWrite(ws *websocket.Conn, typ, id string, body any) error {
	f, err := protocol.NewFrame(typ, id, body)
	if err != nil {
		return err
	}
	b, _ := json.Marshal(f)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	return ws.Write(ctx, websocket.MessageText, b)
}

// read is one runner with labels: accept each offer, finish it on the
// hub's ok.
func (fl *benchFleet) read(ws *websocket.Conn, labels map[string]string) {
	held := map[string]protocol.AttemptRef{} // request id → its attempt
	empty := sum(nil)
	for {
		_, b, err := ws.Read(context.Background())
		if err != nil {
			if !fl.closed.Load() {
				fl.lost.Add(1)
			}
			return
		}
		var f protocol.Frame
		if json.Unmarshal(b, &f) != nil {
			continue
		}
		switch f.Type {
		case protocol.TypeOffer:
			var o protocol.Offer
			if f.Decode(&o) != nil {
				continue
			}
			if !labelsMatch(o.Spec.Labels, labels) {
				fl.astray.Add(1)
			}
			fl.mu.Lock()
			fl.offers[o.Job] = time.Now()
			fl.count[o.Job]++
			fl.mu.Unlock()
			held["a-"+o.Attempt] = o.AttemptRef
			_ = benchWrite(ws, protocol.TypeAccept, "a-"+o.Attempt, protocol.Accept{AttemptRef: o.AttemptRef})
		case protocol.TypeReply:
			ref, ok := held[f.ReplyTo]
			delete(held, f.ReplyTo)
			var r protocol.Reply
			if !ok || f.Decode(&r) != nil || !r.OK {
				continue
			}
			if strings.HasPrefix(f.ReplyTo, "a-") {
				held["f-"+ref.Attempt] = ref
				_ = benchWrite(ws, protocol.TypeFinish, "f-"+ref.Attempt, protocol.Finish{AttemptRef: ref,
					Outcome: job.Outcome{State: job.AttemptCompleted, Reason: job.ReasonExited, ExitCode: exit(0)}, LogSHA256: empty})
				continue
			}
			fl.mu.Lock()
			fl.done[ref.Job] = time.Now()
			fl.mu.Unlock()
		}
	}
}

func (fl *benchFleet) heartbeats(every time.Duration) {
	for !fl.closed.Load() {
		time.Sleep(every)
		fl.mu.Lock()
		conns := slices.Clone(fl.conns)
		fl.mu.Unlock()
		for _, ws := range conns {
			_ = benchWrite(ws, protocol.TypeHeartbeat, "", nil)
		}
	}
}

// serial submits n jobs one at a time, the next once the previous
// finished, and returns each one's submit → offer.
func (fl *benchFleet) serial(t *testing.T, n int, submit func(i int) string) []time.Duration {
	var lat []time.Duration
	for i := range n {
		at := time.Now()
		id := submit(i)
		fl.waitDone(t, id)
		lat = append(lat, fl.offerOf(id).Sub(at))
	}
	return lat
}

// benchBurst is how a burst of jobs went.
type benchBurst struct {
	jobs            int
	submitted, wall time.Duration // first submit → last submit returned, → last finish acknowledged
	offer           benchStats    // submit → offer: mostly time in the queue
}

func (b benchBurst) String() string {
	return fmt.Sprintf("burst of %d jobs: submitted in %v (%.0f/s), all completed after %v: %.0f jobs/s; submit → offer p50 %v, p99 %v",
		b.jobs, b.submitted.Round(time.Millisecond), float64(b.jobs)/b.submitted.Seconds(), b.wall.Round(time.Millisecond),
		b.perSecond(), b.offer.p50, b.offer.p99)
}

func (b benchBurst) perSecond() float64 { return float64(b.jobs) / b.wall.Seconds() }

// burst submits n jobs from 8 clients at once and waits until all are
// finished.
func (fl *benchFleet) burst(t *testing.T, n int, submit func(i int) string) benchBurst {
	starts := make([]time.Time, n)
	ids := make([]string, n)
	var next atomic.Int64
	var wg sync.WaitGroup
	begin := time.Now()
	for range 8 {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				starts[i] = time.Now()
				ids[i] = submit(i)
			}
		})
	}
	wg.Wait()
	b := benchBurst{jobs: n, submitted: time.Since(begin)}
	for _, id := range ids {
		fl.waitDone(t, id)
	}
	b.wall = time.Since(begin)
	lat := make([]time.Duration, n)
	for i, id := range ids {
		lat[i] = fl.offerOf(id).Sub(starts[i])
	}
	b.offer = benchQuantiles(lat)
	return b
}

func (fl *benchFleet) offerOf(id string) time.Time {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.offers[id]
}

// waitDone waits until the job id is finished, failing the test once no
// job of the fleet has finished for 2 minutes: a loaded machine (or tests
// beside this one) slows a whole burst, a lost job stops only itself.
func (fl *benchFleet) waitDone(t testing.TB, id string) {
	t.Helper()
	seen, deadline := -1, time.Time{}
	for {
		fl.mu.Lock()
		_, ok := fl.done[id]
		done := len(fl.done)
		fl.mu.Unlock()
		if ok {
			return
		}
		if done != seen {
			seen, deadline = done, time.Now().Add(2*time.Minute)
		}
		if time.Now().After(deadline) {
			fl.mu.Lock()
			offered := len(fl.offers)
			_, got := fl.offers[id]
			fl.mu.Unlock()
			t.Fatalf("job %s (offered: %v) not finished, and no job of the fleet finished for 2 minutes; the fleet has had %d jobs offered, %d finished", id, got, offered, done)
		}
		time.Sleep(time.Millisecond)
	}
}

func (fl *benchFleet) close() {
	fl.closed.Store(true)
	fl.mu.Lock()
	defer fl.mu.Unlock()
	for _, ws := range fl.conns {
		ws.CloseNow()
	}
}
