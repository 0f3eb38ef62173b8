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
	benchOnly(t)
	runners := benchEnv(t, "DROVER_BENCH_RUNNERS", 1000)
	burst := benchEnv(t, "DROVER_BENCH_JOBS", 2000)
	const serial = 200
	for _, engine := range []string{"sqlite", "postgres"} {
		t.Run(engine, func(t *testing.T) {
			var cfg Config
			if engine == "postgres" {
				cfg.Database = testkit.StartPostgres(t)
			}
			th := startHub(t, cfg)
			tokens := make([]string, runners)
			for i := range tokens {
				tokens[i] = th.registerRunner(fmt.Sprintf("b%04d", i))
			}
			fl := &benchFleet{offers: map[string]time.Time{}, done: map[string]time.Time{}}
			defer fl.close()

			heap0, rss0 := memNow()
			start := time.Now()
			hellos := fl.connect(t, th.srv.URL, tokens)
			connectWall := time.Since(start)
			heap1, rss1 := memNow()
			go fl.heartbeats(th.h.cfg.Heartbeat / 2)
			h := benchQuantiles(hellos)
			t.Logf("%s: %d runners connected in %v (hello → welcome p50 %v, p99 %v, 32 dialing at once)",
				engine, runners, connectWall.Round(time.Millisecond), h.p50, h.p99)
			t.Logf("%s: memory per connection (hub and fake runner, both in this process): heap %.1f KiB, RSS %.1f KiB",
				engine, float64(heap1-heap0)/float64(runners)/1024, float64(rss1-rss0)/float64(runners)/1024)

			// Latency: one job at a time, the next once the previous finished.
			var lat []time.Duration
			for range serial {
				at := time.Now()
				id := benchSubmit(t, th)
				fl.waitDone(t, id)
				lat = append(lat, fl.offerOf(id).Sub(at))
			}
			l := benchQuantiles(lat)
			t.Logf("%s: submit → offer, one job at a time (%d jobs): p50 %v, p99 %v, max %v", engine, serial, l.p50, l.p99, l.max)

			// Throughput: a burst from 8 submitters at once.
			starts := make([]time.Time, burst)
			ids := make([]string, burst)
			var next atomic.Int64
			var wg sync.WaitGroup
			begin := time.Now()
			for range 8 {
				wg.Go(func() {
					for i := int(next.Add(1) - 1); i < burst; i = int(next.Add(1) - 1) {
						starts[i] = time.Now()
						ids[i] = benchSubmit(t, th)
					}
				})
			}
			wg.Wait()
			submitted := time.Since(begin)
			for _, id := range ids {
				fl.waitDone(t, id)
			}
			wall := time.Since(begin)
			lat = lat[:0]
			for i, id := range ids {
				lat = append(lat, fl.offerOf(id).Sub(starts[i]))
			}
			b := benchQuantiles(lat)
			t.Logf("%s: burst of %d jobs: submitted in %v (%.0f/s), all completed after %v: %.0f jobs/s; submit → offer p50 %v, p99 %v",
				engine, burst, submitted.Round(time.Millisecond), float64(burst)/submitted.Seconds(), wall.Round(time.Millisecond),
				float64(burst)/wall.Seconds(), b.p50, b.p99)
			if lost := fl.lost.Load(); lost > 0 {
				t.Errorf("%d runner connections ended during the bench", lost)
			}
		})
	}
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

// benchSubmit submits a trivial job from any goroutine (th.submit may only
// fail the test from the test's own).
func benchSubmit(t *testing.T, th *testHub) string {
	body, _ := json.Marshal(protocol.SubmitRequest{Agent: "exec", Args: []string{"true"}})
	req, _ := http.NewRequest("POST", th.srv.URL+protocol.APIPrefix+"/jobs", bytes.NewReader(body))
	req.Header.Set("Authorization", "Bearer "+th.admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Errorf("submit: %v", err)
		return ""
	}
	defer resp.Body.Close()
	var v protocol.JobView
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
	lost   atomic.Int64
	closed atomic.Bool
}

// connect connects a runner per token, 32 at a time, and returns each one's
// hello → welcome time.
func (fl *benchFleet) connect(t *testing.T, base string, tokens []string) []time.Duration {
	out := make([]time.Duration, len(tokens))
	sem := make(chan struct{}, 32)
	var wg sync.WaitGroup
	for i, tok := range tokens {
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			at := time.Now()
			ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+protocol.APIPrefix+"/runner/connect",
				&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
			if err != nil {
				t.Errorf("dial: %v", err)
				return
			}
			ws.SetReadLimit(protocol.MaxFrame)
			if err := benchWrite(ws, protocol.TypeHello, "", protocol.Hello{Protocol: protocol.Version, Slots: 1}); err != nil {
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
			go fl.read(ws)
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

// read is one runner: accept each offer, finish it on the hub's ok.
func (fl *benchFleet) read(ws *websocket.Conn) {
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
			fl.mu.Lock()
			fl.offers[o.Job] = time.Now()
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

func (fl *benchFleet) offerOf(id string) time.Time {
	fl.mu.Lock()
	defer fl.mu.Unlock()
	return fl.offers[id]
}

func (fl *benchFleet) waitDone(t *testing.T, id string) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		fl.mu.Lock()
		_, ok := fl.done[id]
		fl.mu.Unlock()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s not finished within 2 minutes", id)
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
