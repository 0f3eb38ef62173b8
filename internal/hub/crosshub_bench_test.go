package hub

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"path"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"drover/internal/testkit"
)

// TestBenchThreeHubs: 1,000 runners spread over three hubs on one Postgres
// (issue 14's benchmark, docs/benchmarks.md), and one SQLite hub with as
// many runners in the same run: submit → offer of a job submitted on a hub
// other than its runner's, one at a time; a burst of trivial jobs
// submitted over every hub; heap per idle connection; and on Postgres the
// transactions, rows and statements (pg_stat_statements) per job.
func TestBenchThreeHubs(t *testing.T) {
	runners, burst, serial := benchSizes(t, 1000)
	var one, three benchHubsResult
	t.Run("sqlite-1-hub", func(t *testing.T) {
		one = benchOverHubs(t, []*testHub{startHub(t, Config{})}, runners, serial, burst, nil)
	})
	t.Run("postgres-3-hubs", func(t *testing.T) {
		pg := statsPostgres(t)
		three = benchOverHubs(t, startHubs(t, 3, Config{Database: pg.url}, false), runners, serial, burst, pg)
	})
	if one.burst.jobs > 0 && three.burst.jobs > 0 {
		t.Logf("three Postgres hubs ÷ one SQLite hub: heap per idle connection %.2f×, burst jobs/s %.2f×, serial submit → offer p50 %.2f×, p99 %.2f×",
			three.heap/one.heap, three.burst.perSecond()/one.burst.perSecond(),
			float64(three.serial.p50)/float64(one.serial.p50), float64(three.serial.p99)/float64(one.serial.p99))
	}
}

// benchHubsResult is what benchOverHubs measured.
type benchHubsResult struct {
	heap   float64    // KiB in use per idle connection, both ends
	serial benchStats // submit → offer, on a hub other than the runner's (with one hub, its own)
	burst  benchBurst
}

// benchIdle is how long the Postgres counters are read with the runners
// idle, to take the background's share (heartbeats, sweeps) out of the
// burst's.
const benchIdle = 10 * time.Second

// benchOverHubs connects runners spread over hubs (runner i on hub i mod
// len(hubs), each with a label of its own) and measures them; pg, when
// set, is the hubs' database, whose counters it reads around the burst.
func benchOverHubs(t *testing.T, hubs []*testHub, runners, serial, burst int, pg *pgStats) (r benchHubsResult) {
	what, n := path.Base(t.Name()), len(hubs)
	fl := newBenchFleet()
	defer fl.close()
	r.heap = benchJoinHubs(t, fl, hubs, runners)

	// Job k goes to the one runner with label k·37 mod runners (so every
	// hub's runners take some), submitted on the hub after that runner's.
	pin := benchPin
	runnerOf := func(k int) int { return k * 37 % runners }
	notifies0 := benchNotifies(hubs)
	start := time.Now()
	r.serial = benchQuantiles(fl.serial(t, serial, func(k int) string {
		i := runnerOf(k)
		return benchSubmit(t, hubs[(i+1)%n], pin(i))
	}))
	took := time.Since(start)
	where := "on a hub other than the runner's"
	if n == 1 {
		where = "on the runner's (only) hub"
	}
	notifies := benchNotifies(hubs) - notifies0
	t.Logf("%s: submit → offer, one job at a time %s (%d jobs): p50 %v, p99 %v, max %v; %d NOTIFYs (%.2f per job) in %v",
		what, where, serial, r.serial.p50, r.serial.p99, r.serial.max, notifies, float64(notifies)/float64(serial), took.Round(time.Millisecond))
	if n > 1 {
		same := benchQuantiles(fl.serial(t, serial, func(k int) string {
			i := runnerOf(k)
			return benchSubmit(t, hubs[i%n], pin(i))
		}))
		t.Logf("%s: the same on the runner's own hub (the baseline without a hint between hubs): p50 %v, p99 %v, max %v",
			what, same.p50, same.p99, same.max)
	}

	var idle, before pgCounts
	if pg != nil {
		before = pg.counts(t)
		time.Sleep(benchIdle)
		idle = pg.counts(t).minus(before, 1)
		before = pg.counts(t)
		t.Logf("%s: idle, per second: %s; the most called:%s", what, idle.per(idle.took.Seconds()), idle.top(5, idle.took.Seconds()))
	}
	notifies0 = benchNotifies(hubs)
	r.burst = fl.burst(t, burst, func(i int) string { return benchSubmit(t, hubs[i%n], nil) })
	notifies = benchNotifies(hubs) - notifies0
	t.Logf("%s: %v, submitted round robin over %d hub(s); %d NOTIFYs (%.2f per job)", what, r.burst, n, notifies, float64(notifies)/float64(burst))
	if pg != nil {
		d := pg.counts(t).minus(before, 1)
		t.Logf("%s: burst, per job: %s", what, d.per(float64(burst)))
		net := d.minus(idle, d.took.Seconds()/idle.took.Seconds())
		t.Logf("%s: burst less the idle rate over its %v, per job: %s; the most called:%s", what, d.took.Round(time.Millisecond),
			net.per(float64(burst)), net.top(15, float64(burst)))
	}
	if lost := fl.lost.Load(); lost > 0 {
		t.Errorf("%d runner connections ended during the bench", lost)
	}
	return r
}

// benchPin is the label of its own bench runner i says.
func benchPin(i int) map[string]string { return map[string]string{"bench": fmt.Sprintf("b%04d", i)} }

// benchJoinHubs connects runners to fl, runner i on hub i mod len(hubs)
// with the label benchPin(i), and returns the heap per connection.
func benchJoinHubs(t *testing.T, fl *benchFleet, hubs []*testHub, runners int) float64 {
	rs := make([]benchRunner, runners)
	for i := range rs {
		rs[i] = benchRunner{url: hubs[i%len(hubs)].srv.URL, token: hubs[0].registerRunner(fmt.Sprintf("b%04d", i)), labels: benchPin(i)}
	}
	return fl.join(t, path.Base(t.Name()), rs, hubs[0].h.cfg.Heartbeat/2)
}

// TestBenchIdleHubs: the statements three idle hubs on one Postgres run
// per second with DROVER_BENCH_RUNNERS (1,000) runners spread over them,
// over benchIdleSweeps cross sweeps (docs/benchmarks.md).
func TestBenchIdleHubs(t *testing.T) {
	runners, _, _ := benchSizes(t, 0)
	pg := statsPostgres(t)
	hubs := startHubs(t, 3, Config{Database: pg.url}, false)
	fl := newBenchFleet()
	defer fl.close()
	benchJoinHubs(t, fl, hubs, runners)
	time.Sleep(hubs[0].h.cfg.CrossSweep) // past the connects' own work
	before := pg.counts(t)
	time.Sleep(benchIdleSweeps * hubs[0].h.cfg.CrossSweep)
	idle := pg.counts(t).minus(before, 1)
	s := idle.took.Seconds()
	t.Logf("3 hubs, %d runners, idle for %v, per second: %s; the most called:%s", runners, idle.took.Round(time.Millisecond), idle.per(s), idle.top(8, s))
	if lost := fl.lost.Load(); lost > 0 {
		t.Errorf("%d runner connections ended during the bench", lost)
	}
}

// benchIdleSweeps is how many cross sweeps TestBenchIdleHubs counts over.
const benchIdleSweeps = 6

// benchNotifies is the NOTIFYs hubs sent so far (0 for a hub without
// other hubs).
func benchNotifies(hubs []*testHub) int64 {
	var n int64
	for _, th := range hubs {
		if w, ok := th.cfg.Hints.(*heardHints); ok {
			n += w.NotifiesSent()
		}
	}
	return n
}

// pgStats reads a database's statement counters (pg_stat_statements:
// pg_stat_database's lag up to 10 s behind idle backends).
type pgStats struct {
	url  string
	conn *pgx.Conn
}

// statsPostgres starts a Postgres cluster of the test's own (testkit's
// settings) with pg_stat_statements preloaded.
func statsPostgres(t *testing.T) *pgStats {
	t.Helper()
	p := testkit.StartPostgresCluster(t)
	ctx := context.Background()
	ps := &pgStats{url: p.URL}
	connect := func() {
		var err error
		if ps.conn, err = pgx.Connect(ctx, p.URL); err != nil {
			t.Fatalf("connect to read statistics: %v", err)
		}
	}
	connect()
	var ok bool
	if err := ps.conn.QueryRow(ctx, `SELECT EXISTS (SELECT 1 FROM pg_available_extensions WHERE name = 'pg_stat_statements')`).Scan(&ok); err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatal("pg_stat_statements is not installed (Debian's postgresql package carries it)")
	}
	if _, err := ps.conn.Exec(ctx, `ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'`); err != nil {
		t.Fatal(err)
	}
	ps.conn.Close(ctx)
	p.Restart(t, 0)
	connect()
	t.Cleanup(func() { ps.conn.Close(ctx) })
	if _, err := ps.conn.Exec(ctx, `CREATE EXTENSION pg_stat_statements`); err != nil {
		t.Fatal(err)
	}
	var settings string
	if err := ps.conn.QueryRow(ctx, `SELECT version() || ': ' || string_agg(name || '=' || current_setting(name), ', ' ORDER BY name)
		FROM pg_settings WHERE name IN ('fsync', 'synchronous_commit', 'wal_sync_method', 'shared_buffers', 'max_connections',
		'default_transaction_isolation', 'shared_preload_libraries', 'wal_level', 'max_wal_size', 'work_mem')`).Scan(&settings); err != nil {
		t.Fatal(err)
	}
	t.Logf("Postgres: %s", settings)
	return ps
}

// pgCounts are the database's statements at one time, or their change
// over took: calls and rows by normalised statement.
type pgCounts struct {
	at   time.Time
	took time.Duration
	by   map[string]pgStmt
}

type pgStmt struct{ calls, rows float64 }

func (ps *pgStats) counts(t *testing.T) pgCounts {
	t.Helper()
	ctx := context.Background()
	c := pgCounts{at: time.Now(), by: map[string]pgStmt{}}
	rows, err := ps.conn.Query(ctx, `SELECT query, sum(calls)::float8, sum(rows)::float8 FROM pg_stat_statements
		WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) GROUP BY query`)
	if err != nil {
		t.Fatalf("read pg_stat_statements: %v", err)
	}
	for rows.Next() {
		var q string
		var s pgStmt
		if err := rows.Scan(&q, &s.calls, &s.rows); err != nil {
			t.Fatal(err)
		}
		c.by[strings.Join(strings.Fields(q), " ")] = s
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("read pg_stat_statements: %v", err)
	}
	return c
}

// minus is c less o (o scaled by f): counts since o, or less a background rate.
func (c pgCounts) minus(o pgCounts, f float64) pgCounts {
	d := pgCounts{took: c.at.Sub(o.at), by: map[string]pgStmt{}}
	for q, s := range c.by {
		d.by[q] = pgStmt{s.calls - f*o.by[q].calls, s.rows - f*o.by[q].rows}
	}
	return d
}

// per sums up the counts per n (jobs, or seconds).
func (c pgCounts) per(n float64) string {
	var all, begin, beginRO, commit, rollback float64
	rows := map[string]float64{}
	for q, s := range c.by {
		all += s.calls
		verb := strings.ToUpper(strings.SplitN(q, " ", 2)[0])
		switch {
		case verb == "BEGIN" && strings.Contains(strings.ToUpper(q), "READ ONLY"):
			beginRO += s.calls
		case verb == "BEGIN":
			begin += s.calls
		case verb == "COMMIT":
			commit += s.calls
		case verb == "ROLLBACK":
			rollback += s.calls
		case verb == "INSERT" || verb == "UPDATE" || verb == "DELETE":
			rows[verb] += s.rows
		}
	}
	return fmt.Sprintf("%.1f statements (%.1f without BEGIN/COMMIT/ROLLBACK); transactions begun: %.1f writes, %.1f reads; %.1f COMMIT, %.2f ROLLBACK; rows %.1f inserted, %.1f updated, %.1f deleted",
		all/n, (all-begin-beginRO-commit-rollback)/n, begin/n, beginRO/n, commit/n, rollback/n, rows["INSERT"]/n, rows["UPDATE"]/n, rows["DELETE"]/n)
}

// top is the most called statements, per n.
func (c pgCounts) top(k int, n float64) string {
	qs := slices.Collect(maps.Keys(c.by))
	slices.SortFunc(qs, func(a, b string) int { return cmp.Compare(c.by[b].calls, c.by[a].calls) })
	var b strings.Builder
	for _, q := range qs[:min(k, len(qs))] {
		fmt.Fprintf(&b, "\n\t%6.2f  %.100s", c.by[q].calls/n, q)
	}
	return b.String()
}
