package hub

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"drover/internal/testkit"
	"drover/internal/webhook"
)

// TestDispatchStatementsOnPostgres pins the statements of one job
// dispatched to an idle runner on Postgres, one job at a time: submit,
// the dispatch pass's read, the offer, the accept and the finish. On
// Postgres every statement is a round trip to the server, and the path
// from a submit to the runner's start paid one for each (issue 30: the
// dispatch p99 among 10,000 runners was over its 25 ms there); a change
// that adds one fails here, and the failure lists the statements by text.
// It pins the round trips too: each statement's, and each transaction's
// BEGIN and COMMIT.
func TestDispatchStatementsOnPostgres(t *testing.T) {
	// 37.1 per job before the queue's heads and a job's update with its
	// outbox note went as one statement each, and before a pass counted
	// the requesters' active jobs with one requester queued; 30.2-30.4
	// then, and 23.8-24.4 (the webhook outbox's reads vary) since the offer
	// reads the runner with its shares and writes the attempt with the job,
	// an accept or a finish reads the attempt with its job, and an accept
	// writes both, in one statement each.
	// 20.1 since the offer and the accept write their event in the
	// statement that writes the attempt and the job, a pass reads the
	// queue's heads with their requesters, and the offer's claim reads the
	// runner with its shares (main 9676b01: 23.6-24.0).
	const most = 21.0
	// Round trips, with each transaction's BEGIN and COMMIT: 42.8-44.0 a
	// job on main 9676b01, 35.1-36.3 since those and since a pass reads
	// without a transaction (the webhook sender's outbox reads, three
	// each, varied by about ±2), 29.4 since the outbox's and a call's
	// token reads do too (store.ReadEach: one round trip a statement).
	const mostTrips = 32.0
	// The hub's periodic work (its row and leader term, the sweeps, the
	// webhook sender's recheck) is put an hour apart: on a busy machine
	// the counted jobs take long enough for it to land in their count
	// (36.9 a job at load 33).
	th := startHub(t, Config{Database: testkit.StartPostgres(t), HubTTL: time.Hour, CrossSweep: time.Hour,
		Sweep: time.Hour, Webhooks: webhook.Config{Recheck: time.Hour}})
	st, ok := th.h.store.(statementsByText)
	if !ok {
		t.Fatalf("the Postgres store (%T) does not count its statements by text", th.h.store)
	}
	rt, ok := th.h.store.(interface{ RoundTrips() int64 })
	if !ok {
		t.Fatalf("the Postgres store (%T) does not count its round trips", th.h.store)
	}
	rs := make([]benchRunner, 3)
	for i := range rs {
		rs[i] = benchRunner{url: th.srv.URL, token: th.registerRunner(fmt.Sprintf("p%02d", i))}
	}
	fl := newBenchFleet()
	defer fl.close()
	fl.join(t, "3 runners", rs, th.h.cfg.Heartbeat/2)
	if t.Failed() {
		t.FailNow()
	}
	const jobs = 10
	fl.serial(t, 1, func(int) string { return benchSubmit(t, th, nil) }) // the statements' first runs
	quiet(t, st)
	st.CountStatementsByText()
	before, tripsBefore := st.Statements(), rt.RoundTrips()
	fl.serial(t, jobs, func(int) string { return benchSubmit(t, th, nil) })
	quiet(t, st)
	per, trips := float64(st.Statements()-before)/jobs, float64(rt.RoundTrips()-tripsBefore)/jobs
	by := st.StatementsByText()
	texts := slices.SortedFunc(maps.Keys(by), func(a, b string) int { return cmp.Or(cmp.Compare(by[b], by[a]), strings.Compare(a, b)) })
	var sb strings.Builder
	for _, q := range texts {
		fmt.Fprintf(&sb, "\n%6.2f  %.160s", float64(by[q])/jobs, strings.Join(strings.Fields(q), " "))
	}
	t.Logf("%.1f statements, %.1f round trips per job:%s", per, trips, sb.String())
	if per > most {
		t.Errorf("a job dispatched alone ran %.1f statements on Postgres; want at most %.0f", per, most)
	}
	if trips > mostTrips {
		t.Errorf("a job dispatched alone took %.1f round trips to Postgres; want at most %.0f", trips, mostTrips)
	}
}
