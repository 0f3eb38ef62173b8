package hub

import (
	"cmp"

	"drover/internal/hub/call"
	"drover/internal/store"
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
	t.Parallel()
	// 44 per job before session 18 cut the submit's view, the finish's
	// read of an empty log, its question and publication, the webhook
	// sender's read of due deliveries at every change, and the ledger's
	// read before each accept and finish; 30-32 since (the dispatch
	// passes' reads vary with how many jobs a pass finds).
	const most = 34.0
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

// A request id applied once is not applied again: ledgered runs fn before
// it reads the ledger (a first request costs no read), so a resent id's
// fn runs and its writes must be undone, its reply the stored one; a
// refusal of a resent id is the stored reply too, and a refusal of a new
// one is the refusal.
func TestLedgerUndoesAResentRequest(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	th.registerRunner("r1")
	j := th.submit("true")
	var runnerID string
	if err := th.h.store.Read(t.Context(), func(tx store.Tx) error {
		rn, err := tx.RunnerByName("r1")
		runnerID = rn.ID
		return err
	}); err != nil {
		t.Fatal(err)
	}
	calls := 0
	apply := func(reqID string, refuse bool) (int, bool, error) {
		return ledgered(t.Context(), th.h, runnerID, reqID, func(tx store.Tx) (int, error) {
			calls++
			if refuse {
				return 0, call.Conflict("refused")
			}
			return calls, th.h.event(tx, j.ID, "ledger-test", "", "applied %d", calls)
		})
	}
	for i, step := range []struct {
		id             string
		refuse         bool
		want           int
		replay, refusd bool
	}{
		{id: "q-1", want: 1},
		{id: "q-1", want: 1, replay: true},
		{id: "q-1", refuse: true, want: 1, replay: true},
		{id: "q-2", refuse: true, refusd: true},
		{id: "q-2", want: 5},
	} {
		got, replay, err := apply(step.id, step.refuse)
		if (err != nil) != step.refusd || got != step.want || replay != step.replay {
			t.Fatalf("step %d (%s): got %d, replay %v, err %v; want %d, replay %v, refused %v", i, step.id, got, replay, err, step.want, step.replay, step.refusd)
		}
	}
	if n := th.countEvents(j.ID, "ledger-test"); n != 2 {
		t.Errorf("%d events written; want 2 (q-1 once, q-2 once)", n)
	}
}
