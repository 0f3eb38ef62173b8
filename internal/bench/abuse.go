package bench

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"drover/internal/apitypes"
)

// abuseCalls is how many API calls each phase of Abuse times.
const abuseCalls = 200

// Abuse is the hub's API under hostile clients (Options.Abuse), with the
// idle fleet connected: the latency of `GET /api/v1/jobs` quiet, then
// while one runner opens and drops its connection in a loop, then while
// Slow clients each hold a connection that sends a request's headers a
// byte at a time and never finishes them; and the hub's open descriptors
// after each phase, beside its soft limit.
type Abuse struct {
	Slow    int
	Calls   int   // timed API calls per phase
	Failed  int   // timed calls that failed, in all phases
	Churned int64 // connections the churning runner opened and dropped
	// Quiet, Churn and Slowed are the API's latency in each phase.
	Quiet, Churn, Slowed Stage
	FDs                  [3]int // the hub's open descriptors at the end of each phase
	MaxFDs               int64  // the hub's soft RLIMIT_NOFILE (-1: unknown)
}

// measureAbuse runs the three phases against the hub at hp.
func measureAbuse(ctx context.Context, o Options, hp *hubProc, api *apiClient) (Abuse, error) {
	ab := Abuse{Slow: o.Abuse, Calls: abuseCalls, MaxFDs: -1}
	if n, err := readNoFile(hp.pid); err == nil {
		ab.MaxFDs = n
	}
	toks, err := approveRunners(ctx, api, []string{"bench-churn"})
	if err != nil {
		return ab, err
	}
	// during runs beside a phase's calls, which begin once it is ready.
	phase := func(i int, during func(ctx context.Context, ready func())) (Stage, error) {
		pctx, stop := context.WithCancel(ctx)
		var wg sync.WaitGroup
		if during != nil {
			began := make(chan struct{})
			var once sync.Once
			ready := func() { once.Do(func() { close(began) }) }
			wg.Go(func() { defer ready(); during(pctx, ready) })
			t := time.NewTimer(30 * time.Second) // clients that cannot all connect: time the calls anyway
			select {
			case <-began:
			case <-t.C:
			}
			t.Stop()
		}
		st, failed, err := timeAPI(ctx, api)
		ab.Failed += failed
		if fds, ferr := countFDs(hp.pid); ferr == nil {
			ab.FDs[i] = fds
		}
		stop()
		wg.Wait()
		if err == nil {
			err = hp.alive()
		}
		return st, err
	}
	progress(o, "the API quiet: %d calls of GET /api/v1/jobs", abuseCalls)
	if ab.Quiet, err = phase(0, nil); err != nil {
		return ab, err
	}
	progress(o, "the API while a runner opens and drops its connection in a loop")
	if ab.Churn, err = phase(1, func(ctx context.Context, ready func()) {
		for ctx.Err() == nil {
			if ws, _, err := dialRunner(ctx, hp.url, toks[0], "", map[string]string{"bench": "churn"}); err == nil {
				ws.CloseNow()
			}
			ab.Churned++
			ready()
		}
	}); err != nil {
		return ab, err
	}
	progress(o, "the API while %d slow clients hold connections with headers never finished", o.Abuse)
	ab.Slowed, err = phase(2, func(ctx context.Context, ready func()) { slowClients(ctx, hp.url, o.Abuse, ready) })
	return ab, err
}

// timeAPI times abuseCalls calls of GET /api/v1/jobs, one at a time.
func timeAPI(ctx context.Context, api *apiClient) (Stage, int, error) {
	var ds []time.Duration
	var last error
	failed := 0
	for range abuseCalls {
		var list apitypes.JobList
		t0 := time.Now()
		err := api.call(ctx, "GET", "/jobs?limit=100", nil, &list)
		if ctx.Err() != nil {
			return Stage{}, failed, fmt.Errorf("bench interrupted: %w", ctx.Err())
		}
		if err != nil {
			failed, last = failed+1, err
			continue
		}
		ds = append(ds, time.Since(t0))
	}
	if len(ds) == 0 {
		return Stage{}, failed, fmt.Errorf("every call of GET /api/v1/jobs failed: %w", last)
	}
	slices.Sort(ds)
	return stageOf(ds), failed, nil
}

// slowClients keeps n connections to the hub, each sending a request's
// headers a byte a second and never ending them (the hub closes each when
// its header timeout passes; it is opened again), until ctx ends. ready
// is called once all n have sent their first bytes.
func slowClients(ctx context.Context, hubURL string, n int, ready func()) {
	u, err := url.Parse(hubURL)
	if err != nil {
		return
	}
	var wg sync.WaitGroup
	var started atomic.Int64
	for range n {
		wg.Go(func() {
			first := true
			for ctx.Err() == nil {
				slowClient(ctx, u.Host, func() {
					if first && started.Add(1) == int64(n) {
						ready()
					}
					first = false
				})
			}
		})
	}
	wg.Wait()
}

func slowClient(ctx context.Context, addr string, sent func()) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		sleep(ctx, 100*time.Millisecond)
		return
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	if _, err := c.Write([]byte("GET " + apitypes.APIPrefix + "/jobs HTTP/1.1\r\nHost: bench\r\nX-Slow: ")); err != nil {
		return
	}
	sent()
	for ctx.Err() == nil {
		if sleep(ctx, time.Second) != nil {
			return
		}
		if _, err := c.Write([]byte("a")); err != nil {
			return
		}
	}
}

// countFDs is how many descriptors process pid has open.
func countFDs(pid int) (int, error) {
	es, err := os.ReadDir("/proc/" + strconv.Itoa(pid) + "/fd")
	return len(es), err
}

func (ab Abuse) writeMarkdown(p func(format string, args ...any)) {
	p("### The API under hostile clients")
	p("")
	p("`GET /api/v1/jobs?limit=100`, %d calls one at a time in each phase, with the idle fleet connected; the hub's open", ab.Calls)
	p("descriptors (`/proc/PID/fd`) at the end of each phase, its soft limit %s.", limitText(ab.MaxFDs))
	p("")
	p("| phase | p50 | p99 | p99 ÷ quiet p99 | hub open descriptors |")
	p("|---|---:|---:|---:|---:|")
	rows := []struct {
		name string
		st   Stage
	}{
		{"quiet", ab.Quiet},
		{fmt.Sprintf("a runner opening and dropping its connection in a loop (%d connections)", ab.Churned), ab.Churn},
		{fmt.Sprintf("%d slow clients holding unfinished request headers", ab.Slow), ab.Slowed},
	}
	for i, r := range rows {
		p("| %s | %s | %s | %s | %d |", r.name, ms(r.st.P50), ms(r.st.P99), ratio(float64(r.st.P99), float64(ab.Quiet.P99), 1), ab.FDs[i])
	}
	p("")
	if ab.Failed > 0 {
		p("%d of the timed calls failed.", ab.Failed)
		p("")
	}
}

func limitText(n int64) string {
	if n < 0 {
		return "unknown"
	}
	return strconv.FormatInt(n, 10)
}

// readNoFile is process pid's soft limit of open files.
func readNoFile(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/limits")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "Max open files"); ok {
			if f := strings.Fields(rest); len(f) > 0 {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, fmt.Errorf("no open files limit in /proc/%d/limits", pid)
}
