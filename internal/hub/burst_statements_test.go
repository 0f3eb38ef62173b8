package hub

import (
	"cmp"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"
)

// statementsByText is a store that counts its statements by their text
// (the SQLite store).
type statementsByText interface {
	Statements() int64
	CountStatementsByText()
	StatementsByText() map[string]int64
}

// TestBurstStatementsPerJob pins what a burst of trivial jobs costs the
// store: submit, offer, accept, finish, every read and write the hub makes
// for them, per job. The statements were the burst rate's limit (issue
// 30); a change that adds one to the hot path for every job fails here,
// and the failure lists the statements that ran, most run first.
func TestBurstStatementsPerJob(t *testing.T) {
	// 44 per job before session 18 cut the submit's view, the finish's
	// read of an empty log, its question and publication, and the
	// webhook sender's read of due deliveries at every change; 32-34
	// since (the dispatch passes' reads vary with how many jobs a pass
	// finds).
	const most = 36.0
	// Larger with DROVER_BENCH_RUNNERS and DROVER_BENCH_JOBS, to profile
	// the hub in a burst (go test -cpuprofile).
	runners, jobs := benchEnv(t, "DROVER_BENCH_RUNNERS", 10), benchEnv(t, "DROVER_BENCH_JOBS", 200)
	th := startHub(t, Config{})
	st, ok := th.h.store.(statementsByText)
	if !ok {
		t.Skipf("the store (%T) does not count its statements by text", th.h.store)
	}
	rs := make([]benchRunner, runners)
	for i := range rs {
		rs[i] = benchRunner{url: th.srv.URL, token: th.registerRunner(fmt.Sprintf("b%02d", i))}
	}
	fl := newBenchFleet()
	defer fl.close()
	fl.join(t, fmt.Sprintf("%d runners", runners), rs, th.h.cfg.Heartbeat/2)
	if t.Failed() {
		t.FailNow()
	}
	// What the hub does after connecting the fleet is not the burst's.
	quiet(t, st)
	st.CountStatementsByText()
	before := st.Statements()
	b := fl.burst(t, jobs, func(int) string { return benchSubmit(t, th, nil) })
	quiet(t, st)
	per := float64(st.Statements()-before) / float64(jobs)
	t.Logf("%v; %.1f statements per job", b, per)
	if per > most {
		by := st.StatementsByText()
		texts := slices.SortedFunc(maps.Keys(by), func(a, b string) int { return cmp.Or(cmp.Compare(by[b], by[a]), strings.Compare(a, b)) })
		var sb strings.Builder
		for _, q := range texts {
			fmt.Fprintf(&sb, "\n%6.2f  %.160s", float64(by[q])/float64(jobs), strings.Join(strings.Fields(q), " "))
		}
		t.Errorf("a burst of %d jobs ran %.1f statements per job; want at most %.0f. Per job:%s", jobs, per, most, sb.String())
	}
}

// quiet waits until the store has run no statement for a while: the
// writes a finish sets off (its publication, the queue's next pass) are
// the burst's too.
func quiet(t *testing.T, st statementsByText) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	last := st.Statements()
	for time.Now().Before(deadline) {
		time.Sleep(300 * time.Millisecond)
		n := st.Statements()
		if n == last {
			return
		}
		last = n
	}
	t.Fatalf("the store still ran statements after a minute")
}
