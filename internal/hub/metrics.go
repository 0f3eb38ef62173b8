package hub

import (
	"bufio"
	"context"
	"crypto/subtle"
	"errors"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"drover/internal/auth"
	"drover/internal/hub/call"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/rules"
	"drover/internal/store"
)

// metrics are the hub's Prometheus metrics, on a registry of its own (two
// hubs in one process, as in tests, keep theirs apart). Gauges of what the
// store and the connections hold are read at each scrape (hubCollector);
// counters and the latency histogram are counted as things happen.
type metrics struct {
	reg             *prometheus.Registry
	dispatchLatency prometheus.Histogram
	attempts        *prometheus.CounterVec
	logBytes        prometheus.Counter
	publishBytes    prometheus.Counter
	egressDenials   *prometheus.CounterVec
	requestErrors   *prometheus.CounterVec
	accessLoads     prometheus.Counter
}

func newMetrics(h *Hub) *metrics {
	m := &metrics{
		reg: prometheus.NewRegistry(),
		dispatchLatency: prometheus.NewHistogram(prometheus.HistogramOpts{
			Name:    "drover_dispatch_latency_seconds",
			Help:    "Time from a job being queued to its offer to a runner.",
			Buckets: prometheus.ExponentialBuckets(0.005, 4, 10), // 5ms to ~22min
		}),
		attempts: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "drover_attempts_finished_total",
			Help: "Attempts that ended, by outcome (the attempt's final state).",
		}, []string{"outcome"}),
		logBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "drover_log_bytes_total",
			Help: "Bytes of job logs the hub stored.",
		}),
		publishBytes: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "drover_publication_bytes_total",
			Help: "Bytes of publication bundles (results and checkpoints) the hub accepted.",
		}),
		egressDenials: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "drover_egress_denials_total",
			Help: "Connections the runners' egress proxies refused, as finished attempts report them, by phase (setup or agent).",
		}, []string{"phase"}),
		requestErrors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "drover_http_request_errors_total",
			Help: "HTTP requests answered with a 4xx or 5xx status, by route pattern and status.",
		}, []string{"route", "code"}),
		accessLoads: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "drover_runner_access_loads_total",
			Help: "Runners' access (owner, shares) the hub read from the store for the runners it holds: at changes, hints and cross sweeps.",
		}),
	}
	m.reg.MustRegister(m.dispatchLatency, m.attempts, m.logBytes, m.publishBytes, m.egressDenials, m.requestErrors, m.accessLoads, hubCollector{h},
		collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if sc, ok := h.store.(statementCounter); ok {
		m.reg.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name: "drover_store_statements_total",
			Help: "SQL statements the hub's store ran (commits and rollbacks not counted).",
		}, func() float64 { return float64(sc.Statements()) }))
	}
	return m
}

// statementCounter is a store that counts its statements (the SQL stores).
type statementCounter interface{ Statements() int64 }

var (
	descJobs   = prometheus.NewDesc("drover_jobs", "Jobs by state.", []string{"state"}, nil)
	descQueue  = prometheus.NewDesc("drover_queue_depth", "Jobs waiting for a runner (state queued).", nil, nil)
	descOldest = prometheus.NewDesc("drover_queue_oldest_age_seconds",
		"How long the oldest queued job has been queued (0 with an empty queue).", nil, nil)
	descRunners = prometheus.NewDesc("drover_runners_connected", "Runners connected now.", nil, nil)
	descDrain   = prometheus.NewDesc("drover_runners_draining", "Connected runners that are draining: stopping, they take no offers.", nil, nil)
	descLimited = prometheus.NewDesc("drover_accounts_limited", "Accounts of connected runners that are rate-limited now.", nil, nil)
	descUp      = prometheus.NewDesc("drover_store_up", "1 when the last scrape could read the store.", nil, nil)
	descLeader  = prometheus.NewDesc("drover_hub_leader", "1 while this hub holds the leader term (runs the hub-wide sweeps).", nil, nil)
)

// hubCollector reads the gauges at scrape time.
type hubCollector struct{ h *Hub }

func (c hubCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descJobs, descQueue, descOldest, descRunners, descDrain, descLimited, descUp, descLeader} {
		ch <- d
	}
}

func (c hubCollector) Collect(ch chan<- prometheus.Metric) {
	h := c.h
	h.reg.mu.Lock()
	runners, draining, limited := len(h.reg.conns), 0, 0
	for _, cn := range h.reg.conns {
		if cn.draining() {
			draining++
		}
		for _, a := range cn.accounts {
			if a.State == protocol.AccountLimited {
				limited++
			}
		}
	}
	h.reg.mu.Unlock()
	ch <- prometheus.MustNewConstMetric(descRunners, prometheus.GaugeValue, float64(runners))
	ch <- prometheus.MustNewConstMetric(descDrain, prometheus.GaugeValue, float64(draining))
	ch <- prometheus.MustNewConstMetric(descLimited, prometheus.GaugeValue, float64(limited))
	leader := 0.0
	if h.leading() {
		leader = 1
	}
	ch <- prometheus.MustNewConstMetric(descLeader, prometheus.GaugeValue, leader)

	// Collect has no context: a scrape's store read is bounded here.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var counts map[job.State]int64
	var oldest []store.Job
	err := h.store.Read(ctx, func(tx store.Tx) error {
		var err error
		if counts, err = tx.JobCounts(); err != nil {
			return err
		}
		oldest, err = tx.QueuedJobs(1)
		return err
	})
	if err != nil {
		h.log.Warn("metrics: read the store", "err", err)
		ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 0)
		return
	}
	ch <- prometheus.MustNewConstMetric(descUp, prometheus.GaugeValue, 1)
	for _, s := range job.States {
		ch <- prometheus.MustNewConstMetric(descJobs, prometheus.GaugeValue, float64(counts[s]), string(s))
	}
	ch <- prometheus.MustNewConstMetric(descQueue, prometheus.GaugeValue, float64(counts[job.Queued]))
	age := 0.0
	if len(oldest) > 0 {
		age = max(0, h.now().Sub(oldest[0].UpdatedAt).Seconds())
	}
	ch <- prometheus.MustNewConstMetric(descOldest, prometheus.GaugeValue, age)
}

// MetricsHandler serves the metrics in Prometheus' text format, to anyone
// who reaches it: for an address of its own (the operator's choice).
func (h *Hub) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(h.metrics.reg, promhttp.HandlerOpts{})
}

// serveMetrics is GET /metrics on the hub's own address: only with the
// operator's metrics token.
func (h *Hub) serveMetrics(w http.ResponseWriter, r *http.Request) error {
	if h.cfg.MetricsToken == "" {
		return call.NotFound("metrics are not served here: the operator can set a metrics token or a metrics address (docs/operator.md)")
	}
	tok, err := auth.BearerToken(r.Header.Get("Authorization"))
	if err != nil || subtle.ConstantTimeCompare([]byte(tok), []byte(h.cfg.MetricsToken)) != 1 {
		return call.Errf(http.StatusUnauthorized, rules.ErrUnauthorized, "GET /metrics needs the metrics token")
	}
	h.MetricsHandler().ServeHTTP(w, r)
	return nil
}

// countErrors counts the requests answered with an error status by route
// (the ServeMux pattern that matched, set on r once next served it).
func (m *metrics) countErrors(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		sw := &statusWriter{ResponseWriter: w}
		next.ServeHTTP(sw, r)
		if sw.status >= 400 {
			route := r.Pattern
			if route == "" {
				route = "unmatched"
			}
			m.requestErrors.WithLabelValues(route, strconv.Itoa(sw.status)).Inc()
		}
	})
}

// statusWriter remembers the status a handler answered with; it hijacks
// (runner WebSockets) and flushes (streams) through to the connection.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() { _ = http.NewResponseController(w.ResponseWriter).Flush() }

func (w *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	hj, ok := w.ResponseWriter.(http.Hijacker)
	if !ok {
		return nil, nil, errors.New("the connection cannot be hijacked")
	}
	if w.status == 0 {
		w.status = http.StatusSwitchingProtocols
	}
	return hj.Hijack()
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
