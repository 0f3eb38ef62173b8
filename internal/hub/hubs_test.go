package hub

import (
	"context"
	"database/sql"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/buildinfo"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/store"
	"drover/internal/testkit"
)

// hubsConfig has short hub heartbeats (a term lasts 3s, renewed every
// second: room for a loaded machine), and a lease and sweep timer long
// enough that only what a test does expires anything.
func hubsConfig() Config {
	return Config{HubTTL: 3 * time.Second, Lease: time.Hour, Sweep: time.Hour}
}

// openHubOn starts one more hub on the database url with a data directory
// of its own, behind a server of its own; admin is the admin token the
// first hub wrote. The hub is closed when the test ends unless crashed.
func openHubOn(t *testing.T, url, admin string, cfg Config) *testHub {
	t.Helper()
	cfg.DataDir, cfg.Database = t.TempDir(), url
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	h, err := Open(t.Context(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	return serveTestHub(t, h, cfg, admin)
}

// pgHubs starts n hubs on one new Postgres database, the first first (it
// leads: it takes the term before the others start).
func pgHubs(t *testing.T, n int, cfg Config) (string, []*testHub) {
	t.Helper()
	url := testkit.StartPostgres(t)
	ths := []*testHub{openHubOn(t, url, "", cfg)}
	for range n - 1 {
		ths = append(ths, openHubOn(t, url, ths[0].admin, cfg))
	}
	return url, ths
}

// crash stops a hub as a killed process would: its heartbeats and sweeps
// end, its connections drop, and it leaves its row and term behind.
func (th *testHub) crash() {
	th.srv.CloseClientConnections()
	th.srv.Close()
	th.h.cancel()
	th.h.store.Close() // first: nothing it does from now on is kept
	th.h.detachAll("crash")
	th.h.bg.Wait()
	th.h = nil
}

// leaders are the hubs of ths that lead now (crashed ones skipped).
func leaders(ths []*testHub) []*testHub {
	var out []*testHub
	for _, th := range ths {
		if th.h != nil && th.h.leading() {
			out = append(out, th)
		}
	}
	return out
}

// waitLeader waits until exactly one of ths leads, failing if two ever do.
func waitLeader(t *testing.T, ths []*testHub) *testHub {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		switch ls := leaders(ths); len(ls) {
		case 1:
			return ls[0]
		case 0:
		default:
			t.Fatalf("%d hubs lead at once", len(ls))
		}
		if time.Now().After(deadline) {
			t.Fatal("no hub leads")
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (th *testHub) leaderTerm() store.Leader {
	th.t.Helper()
	var l store.Leader
	if err := th.h.store.Read(context.Background(), func(tx store.Tx) (err error) { l, err = tx.Leader(); return err }); err != nil {
		th.t.Fatal(err)
	}
	return l
}

func (th *testHub) hubs() apitypes.HubList {
	th.t.Helper()
	var l apitypes.HubList
	if code, e := th.call(th.admin, "GET", "/hubs", nil, &l); code != http.StatusOK {
		th.t.Fatalf("list hubs: %d %v", code, e)
	}
	return l
}

func TestHubsOnOneDatabaseElectOneLeader(t *testing.T) {
	_, ths := pgHubs(t, 3, hubsConfig())
	lead := waitLeader(t, ths)
	if lead != ths[0] {
		t.Errorf("the first hub to start does not lead")
	}
	// Over several terms' renewals, never two leaders.
	for end := time.Now().Add(3 * ths[0].cfg.HubTTL); time.Now().Before(end); time.Sleep(5 * time.Millisecond) {
		if ls := leaders(ths); len(ls) > 1 {
			t.Fatalf("%d hubs lead at once", len(ls))
		}
	}
	follower := ths[2]
	l := follower.hubs()
	if len(l.Hubs) != 3 {
		t.Fatalf("hubs: %+v", l.Hubs)
	}
	for i, hv := range l.Hubs {
		if hv.ID != ths[i].h.id || hv.Leader != (ths[i] == lead) || hv.Self != (ths[i] == follower) ||
			hv.Version != buildinfo.Version() || hv.Conns != 0 {
			t.Errorf("hub %d listed as %+v", i, hv)
		}
	}
	// A user who is not an admin sees them too (counts, no names).
	bob := follower.addUser("bob")
	if code, e := follower.call(bob, "GET", "/hubs", nil, &l); code != http.StatusOK || len(l.Hubs) != 3 {
		t.Fatalf("hubs as bob: %d %v %+v", code, e, l)
	}
	if code, _ := follower.call("", "GET", "/hubs", nil, nil); code != http.StatusUnauthorized {
		t.Fatalf("hubs without a token: %d", code)
	}
}

// A leader that dies is replaced within one lease period of its last
// renewal; one that closes hands over at once.
func TestLeaderTakesOverWhenTheLeaderDies(t *testing.T) {
	cfg := hubsConfig()
	cfg.Lease = 10 * time.Second
	_, ths := pgHubs(t, 3, cfg)
	old := waitLeader(t, ths)
	old.crash()
	was := alive(ths).leaderTerm() // as the dead leader left it
	next := waitLeader(t, ths)
	now := next.leaderTerm()
	if now.Holder != next.h.id || now.Term <= was.Term {
		t.Fatalf("term after the leader died: %+v, before %+v", now, was)
	}
	lastRenewal := was.Expires.Add(-cfg.HubTTL)
	if took := now.Since.Sub(lastRenewal); took > cfg.Lease {
		t.Errorf("the new leader took over %v after the old one's last renewal; at most one lease (%v)", took, cfg.Lease)
	}
	if l := next.hubs(); len(l.Hubs) != 2 {
		t.Errorf("the dead hub is still listed: %+v", l.Hubs)
	}

	next.h.Close()
	next.h = nil
	last := waitLeader(t, ths)
	if l := last.leaderTerm(); l.Holder != last.h.id || !l.Since.Before(now.Expires) {
		t.Errorf("after a clean close the term %+v was not taken before the closed one's would have expired (%v)", l, now.Expires)
	}
}

// startRunning connects a scripted runner to th and takes one job through
// accept: the running job's id.
func (th *testHub) startRunning(name string) (*scriptRunner, string) {
	th.t.Helper()
	sr, _ := th.dial(th.registerRunner(name), protocol.Hello{})
	j := th.submit("sleep", "100")
	o := sr.offer()
	if o.Job != j.ID {
		th.t.Fatalf("offer of %s, want %s", o.Job, j.ID)
	}
	wantOK(th.t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	return sr, j.ID
}

func (th *testHub) attemptOf(jobID string) store.Attempt {
	th.t.Helper()
	var a store.Attempt
	if err := th.h.store.Read(context.Background(), func(tx store.Tx) error {
		j, err := tx.Job(jobID)
		if err != nil {
			return err
		}
		a, err = tx.Attempt(j.AttemptID)
		return err
	}); err != nil {
		th.t.Fatal(err)
	}
	return a
}

// sweepNow sweeps once, as the leader if th leads (waiting for its trust
// should a slow renewal have let it lapse) or else as a follower.
func (th *testHub) sweepNow() {
	th.t.Helper()
	th.waitLeadIfLeader()
	if _, err := th.h.sweep(context.Background(), th.h.leading()); err != nil {
		th.t.Fatal(err)
	}
}

// leaderAndFollower starts two hubs on one Postgres database, the first
// leading.
func leaderAndFollower(t *testing.T) (string, []*testHub) {
	t.Helper()
	url, ths := pgHubs(t, 2, hubsConfig())
	if waitLeader(t, ths) != ths[0] {
		t.Fatal("the first hub does not lead")
	}
	return url, ths
}

// The leader expires the lease of a runner no live hub holds, never of one
// another hub holds, however late its lease; a follower expires neither.
// The hints are lost (else the leader, hearing the runner leave B, could
// expire it before the follower's sweep is looked at), so the leader
// sweeps only when the test says.
func TestLeaderExpiresOnlyRunnersNoLiveHubHolds(t *testing.T) {
	a, b := leaderAndFollowerHinted(t, true)
	sr, jobID := b.startRunning("r1")
	// Its lease ran out (as if hub B's writes lagged), but B holds it.
	at := b.attemptOf(jobID)
	at.LeaseUntil = time.Now().Add(-time.Minute)
	if err := a.h.store.Write(context.Background(), func(tx store.Tx) error { return tx.UpdateAttempt(at) }); err != nil {
		t.Fatal(err)
	}
	a.sweepNow()
	if v := a.job(jobID); v.State != job.Running {
		t.Fatalf("leader expired a runner another live hub holds: %+v", v)
	}
	var rl apitypes.RunnerList
	if code, e := a.call(a.admin, "GET", "/runners", nil, &rl); code != http.StatusOK || len(rl.Runners) != 1 ||
		!rl.Runners[0].Connected || rl.Runners[0].Hub != b.h.id {
		t.Fatalf("runners on hub A: %d %v %+v", code, e, rl)
	}
	// B's row counts its connection from its next heartbeat on.
	waitFor(t, "B's heartbeat counts its runner", func() bool { return a.hubs().Hubs[1].Conns == 1 })

	sr.ws.CloseNow()
	waitFor(t, "B releases the runner", func() bool { return a.holder(at.RunnerID) == "" })
	b.sweepNow() // a follower: not its duty
	if v := a.job(jobID); v.State != job.Running {
		t.Fatalf("a follower expired a lease: %+v", v)
	}
	a.sweepNow()
	if v := a.job(jobID); v.State != job.Unknown || v.Reason != job.ReasonRunnerLost {
		t.Fatalf("leader did not expire the offline runner's lease: %+v", v)
	}
}

// A hub that starts while others live extends no lease; a hub that takes
// the term after the leader died restarts those of runners no live hub
// holds (the dead leader's among them), not those another hub holds.
func TestOnlyANewLeaderAfterAGapExtendsLeases(t *testing.T) {
	url, ths := leaderAndFollower(t)
	a, b := ths[0], ths[1]
	_, onA := a.startRunning("r-a")
	onB := func() string { _, id := b.startRunning("r-b"); return id }()
	gone, offline := a.startRunning("r-gone")
	gone.ws.CloseNow()
	waitFor(t, "r-gone is released", func() bool { return a.holder(a.attemptOf(offline).RunnerID) == "" })
	lease := func(id string) time.Time { return b.attemptOf(id).LeaseUntil }
	before := map[string]time.Time{onA: lease(onA), onB: lease(onB), offline: lease(offline)}

	c := openHubOn(t, url, a.admin, hubsConfig())
	ths = append(ths, c)
	for id, l := range before {
		if got := lease(id); !got.Equal(l) {
			t.Errorf("a hub starting beside live ones moved lease %v to %v", l, got)
		}
	}

	a.crash()
	next := waitLeader(t, ths)
	term := next.leaderTerm()
	for _, id := range []string{onA, offline} {
		if got := lease(id); got.Before(term.Since.Add(hubsConfig().Lease)) {
			t.Errorf("lease of a runner no live hub holds is %v, want from %v on", got, term.Since.Add(hubsConfig().Lease))
		}
	}
	if got := lease(onB); !got.Equal(before[onB]) {
		t.Errorf("the new leader moved the lease of a runner hub B holds: %v to %v", before[onB], got)
	}
}

// waitLeadIfLeader waits, when th holds the leader term, until it trusts
// it (a renewal slowed by a loaded machine lets the trust lapse a moment).
func (th *testHub) waitLeadIfLeader() {
	th.t.Helper()
	if th.leaderTerm().Holder == th.h.id {
		waitFor(th.t, "the leader trusts its term", th.h.leading)
	}
}

// holder is the hub holding the runner's connection, dead or alive.
func (th *testHub) holder(runnerID string) string {
	th.t.Helper()
	var holder string
	if err := th.h.store.Read(context.Background(), func(tx store.Tx) (err error) {
		holder, err = tx.RunnerHolder(runnerID, time.Time{})
		return err
	}); err != nil {
		th.t.Fatal(err)
	}
	return holder
}

// alive is a hub of ths that was not crashed or closed.
func alive(ths []*testHub) *testHub {
	for _, th := range ths {
		if th.h != nil {
			return th
		}
	}
	panic("no hub alive")
}

// startSQLiteHub is startHub on SQLite, whatever DROVER_HUB_TEST_STORE
// says: the store as it is, not wrapped.
func startSQLiteHub(t *testing.T, cfg Config) *testHub {
	t.Helper()
	return startHubOn(t, cfg, func(s store.Store) store.Store { return s })
}

func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not reached", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// A SQLite hub restarted after a crash leads at once: the term and row its
// dead predecessor left are known to be dead (SQLite has one hub).
func TestSQLiteHubLeadsAtOnceAfterACrash(t *testing.T) {
	th := startSQLiteHub(t, Config{})
	if !th.h.leading() {
		t.Fatal("a SQLite hub does not lead")
	}
	cfg := th.cfg
	dead := th.h.id
	th.crash()
	h, err := Open(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	th.h, th.srv = h, httptest.NewServer(h.Handler())
	if !h.leading() {
		t.Fatal("the restarted hub does not lead at once")
	}
	l := th.hubs()
	if len(l.Hubs) != 1 || l.Hubs[0].ID == dead || !l.Hubs[0].Leader || !l.Hubs[0].Self {
		t.Fatalf("hubs after the restart: %+v", l.Hubs)
	}
}

func TestHealthAndReadiness(t *testing.T) {
	t.Parallel()
	probe := func(th *testHub, path string) (int, string) {
		t.Helper()
		code, b := th.send("", "GET", path, nil)
		return code, string(b)
	}
	th := startSQLiteHub(t, Config{}) // it edits the database file
	for _, tc := range []struct{ path, body string }{{"/healthz", "ok\n"}, {"/readyz", "ready\n"}} {
		if code, body := probe(th, tc.path); code != http.StatusOK || body != tc.body {
			t.Errorf("%s: %d %q", tc.path, code, body)
		}
	}

	// A database another, newer drover migrated further.
	db, err := sql.Open("sqlite", "file:"+filepath.Join(th.cfg.DataDir, "drover.db")+"?_pragma=busy_timeout(10000)") // the hub heartbeats meanwhile
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO schema_migrations (version, applied_at) VALUES (999, 0)`); err != nil {
		t.Fatal(err)
	}
	if code, body := probe(th, "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(body, "schema") {
		t.Errorf("readyz on a newer schema: %d %q", code, body)
	}
	if _, err := db.Exec(`DELETE FROM schema_migrations WHERE version = 999`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if code, _ := probe(th, "/readyz"); code != http.StatusOK {
		t.Errorf("readyz with the schema back: %d", code)
	}

	// The database gone: alive, not ready, and no detail of the database.
	th.h.store.Close()
	code, body := probe(th, "/readyz")
	if code != http.StatusServiceUnavailable || body != "not ready: the database cannot be read\n" {
		t.Errorf("readyz without a database: %d %q", code, body)
	}
	if code, _ := probe(th, "/healthz"); code != http.StatusOK {
		t.Errorf("healthz without a database: %d", code)
	}

	th2 := startHub(t, Config{})
	th2.h.Close()
	if code, body := probe(th2, "/readyz"); code != http.StatusServiceUnavailable || body != "not ready: shutting down\n" {
		t.Errorf("readyz while shutting down: %d %q", code, body)
	}
}

// leaderAndFollowerHinted is leaderAndFollower by startHubs: the hubs
// hear each other's hints (none if dropped), and nothing else (no sweeps).
func leaderAndFollowerHinted(t *testing.T, dropped bool) (leader, follower *testHub) {
	t.Helper()
	cfg := hubsConfig()
	cfg.CrossSweep = noSweep
	ths := startHubs(t, 2, cfg, dropped)
	if a := waitLeader(t, ths); a != ths[0] {
		return a, ths[0]
	}
	return ths[0], ths[1]
}

// A question expires under the leader only, even one asked through a
// follower (whose own expiry kick finds nothing to do there). The hints
// are lost, so the leader sweeps only when the test says.
func TestQuestionsExpireOnlyUnderTheLeader(t *testing.T) {
	a, b := leaderAndFollowerHinted(t, true)
	j := b.waitOnExpiringQuestion(200 * time.Millisecond)
	waitFor(t, "the question's expiry", func() bool { return time.Now().After(*j.Questions[0].ExpiresAt) })
	var pruned time.Time
	b.h.sweepPass(context.Background(), &pruned)
	if v := a.job(j.ID); v.State != job.Waiting {
		t.Fatalf("a follower expired a question: %+v", v)
	}
	a.waitLeadIfLeader()
	a.h.sweepPass(context.Background(), &pruned)
	if v := a.job(j.ID); v.State != job.Failed || v.Reason != job.ReasonQuestionExpired {
		t.Fatalf("the leader did not expire the question: %+v", v)
	}
}

// A question asked through a follower expires when it is due, though the
// leader's own sweep is an hour away: the follower's expiry kick reaches
// the leader as a hint.
func TestQuestionAskedThroughAFollowerExpiresWhenDue(t *testing.T) {
	a, b := leaderAndFollowerHinted(t, false)
	j := b.waitOnExpiringQuestion(300 * time.Millisecond)
	v := a.waitJob(j.ID, func(v apitypes.JobView) bool { return v.State != job.Waiting })
	if v.State != job.Failed || v.Reason != job.ReasonQuestionExpired {
		t.Fatalf("the job after its question's expiry: %+v", v)
	}
	if k := eventKinds(a, j.ID); k[len(k)-1] != "question_expired" || slices.Index(k, "question_expired") != len(k)-1 {
		t.Fatalf("events %v; want one question_expired, last", k)
	}
}
