package hub

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"drover/internal/apitypes"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/sandbox/sandboxtest"
	"drover/internal/store"
	"drover/internal/store/postgres"
	"drover/internal/testkit"
)

// Several hubs on one Postgres database, as a load balancer spreads them:
// the first made the admin, whose token every hub's testHub carries.

// heardHints passes a store's hints through and says when the first batch
// arrived, so a test starts once the hubs hear each other.
type heardHints struct {
	*postgres.Store
	once  sync.Once
	heard chan struct{}
}

func (w *heardHints) Listen(ctx context.Context, fn func([]string)) error {
	return w.Store.Listen(ctx, func(keys []string) {
		w.once.Do(func() { close(w.heard) })
		fn(keys)
	})
}

// droppedHints loses every hint, as a cut notification channel does: only
// the cross sweep carries changes between hubs.
type droppedHints struct{}

func (droppedHints) Publish(...string) {}
func (droppedHints) Listen(ctx context.Context, _ func([]string)) error {
	<-ctx.Done()
	return nil
}

// startHubs starts n hubs on one Postgres database, cfg.Database or else a
// new one; with dropped set they hear nothing of each other but what their
// cross sweeps read.
func startHubs(t *testing.T, n int, cfg Config, dropped bool) []*testHub {
	t.Helper()
	if cfg.Database == "" {
		cfg.Database = testkit.StartPostgres(t)
	}
	var hubs []*testHub
	var heard []*heardHints
	for range n {
		th, w := startHubBeside(t, cfg, dropped, hubs)
		hubs = append(hubs, th)
		heard = append(heard, w)
	}
	if dropped {
		return hubs
	}
	// Each hub's listener holds LISTEN once it hears a probe of another.
	for i, w := range heard {
		from := heard[(i+1)%n].Store
		sandboxtest.WaitFor(t, fmt.Sprintf("hub %d to hear the others", i), func() bool {
			from.Publish("probe")
			select {
			case <-w.heard:
				return true
			case <-time.After(20 * time.Millisecond):
				return false
			}
		})
	}
	return hubs
}

// startHubBeside starts one more hub on cfg.Database, beside others (whose
// first made the admin).
func startHubBeside(t *testing.T, cfg Config, dropped bool, others []*testHub) (*testHub, *heardHints) {
	t.Helper()
	cfg.DataDir = t.TempDir()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	st, err := postgres.Open(t.Context(), cfg.Database)
	if err != nil {
		t.Fatal(err)
	}
	w := &heardHints{Store: st, heard: make(chan struct{})}
	cfg.Hints = w
	if dropped {
		cfg.Hints = droppedHints{}
	}
	h, err := New(context.Background(), cfg, st)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	admin := ""
	if len(others) > 0 {
		admin = others[0].admin
	}
	return serveTestHub(t, h, cfg, admin), w
}

// noSweep keeps the cross sweep out of a test that shows what hints do.
const noSweep = time.Hour

// TestCrossHubOfferIsHinted: a job submitted on hub A is offered at once
// to a runner held by hub B, by the hint; with the hints lost and the
// cross sweep off the same job would wait (the baseline).
func TestCrossHubOfferIsHinted(t *testing.T) {
	t.Parallel()
	latency := func(dropped bool, wait time.Duration) (time.Duration, bool) {
		hs := startHubs(t, 2, Config{CrossSweep: noSweep}, dropped)
		a, b := hs[0], hs[1]
		sr, _ := b.dial(a.registerRunner(fmt.Sprintf("r-%v", dropped)), protocol.Hello{})
		// B's own pass (the connect's) is done once it offered its own job.
		runToEnd(t, sr, sr.offer2(b, "true"), "", 0)
		waitDispatchIdle(t, b) // the finish's own pass is over (the baseline shows it offers nothing)
		start := time.Now()
		j := a.submit("true")
		f, err := sr.tryRead(wait)
		for err == nil && f.Type != protocol.TypeOffer {
			f, err = sr.tryRead(wait)
		}
		if err != nil {
			return 0, false
		}
		var o protocol.Offer
		if err := f.Decode(&o); err != nil || o.Job != j.ID {
			t.Fatalf("offer %+v (%v), want job %s", o, err, j.ID)
		}
		return time.Since(start), true
	}
	hinted, ok := latency(false, 10*time.Second)
	if !ok {
		t.Fatal("the job submitted on A never reached the runner on B")
	}
	wait := max(time.Second, 20*hinted)
	if _, ok := latency(true, wait); ok {
		t.Fatal("with hints lost and no cross sweep the runner on B was offered the job anyway: the test shows nothing")
	}
	t.Logf("offer across hubs by hint in %v; without hints none in %v", hinted, wait)
}

// waitDispatchIdle waits until th's dispatcher has no pass pending or
// running: no kick waiting, no pass ended over two windows.
func waitDispatchIdle(t *testing.T, th *testHub) {
	t.Helper()
	gen := func() uint64 { _, g := th.h.fleet.watch(); return g }
	stable := 0
	sandboxtest.WaitFor(t, "the dispatcher to idle", func() bool {
		g := gen()
		time.Sleep(150 * time.Millisecond)
		if g == gen() && len(th.h.wake) == 0 {
			stable++
		} else {
			stable = 0
		}
		return stable >= 2
	})
}

// offer2 submits a job on hub th and returns its offer to sr.
func (sr *scriptRunner) offer2(th *testHub, args ...string) protocol.Offer {
	sr.t.Helper()
	j := th.submit(args...)
	o := sr.offer()
	if o.Job != j.ID {
		sr.t.Fatalf("offer for %s, want %s", o.Job, j.ID)
	}
	return o
}

// TestCrossHubLostHintsStillComplete: with every hint lost, the cross
// sweep still brings a job submitted on A to a runner on B, and its end
// back to A's followers.
func TestCrossHubLostHintsStillComplete(t *testing.T) {
	t.Parallel()
	hs := startHubs(t, 2, Config{CrossSweep: 200 * time.Millisecond}, true)
	a, b := hs[0], hs[1]
	sr, _ := b.dial(a.registerRunner("r1"), protocol.Hello{})
	j := a.submit("echo", "hi")
	got := a.follow(a.srv.URL, j.ID, "20000", func(_ int, body, complete string) string { return body + "|" + complete })
	o := sr.offer()
	if o.Job != j.ID {
		t.Fatalf("offer for %s", o.Job)
	}
	runToEnd(t, sr, o, "hi\n", 0)
	if s := <-got; s != "hi\n|false" && s != "hi\n|true" {
		t.Fatalf("A's follower got %q", s)
	}
	a.waitJob(j.ID, func(v apitypes.JobView) bool { return v.State == job.Completed })

	// A cancel on A reaches the runner on B all the same, and so does a
	// revoke.
	k := a.submit("sleep", "100")
	o = sr.offer()
	if o.Job != k.ID {
		t.Fatalf("offer for %s, want %s", o.Job, k.ID)
	}
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	if code, e := a.call(a.admin, "POST", "/jobs/"+k.ID+"/cancel", nil, nil); code != 200 {
		t.Fatalf("cancel on A: %d %v", code, e)
	}
	var co protocol.CancelOrder
	if err := sr.expect(protocol.TypeCancel).Decode(&co); err != nil || co.Attempt != o.Attempt {
		t.Fatalf("cancel order on B: %+v %v", co, err)
	}
	if code, e := a.call(a.admin, "POST", "/runners/r1/revoke", nil, nil); code != 200 {
		t.Fatalf("revoke on A: %d %v", code, e)
	}
	if err := sr.closed(); websocket.CloseStatus(err) != protocol.CloseRevoked {
		t.Fatalf("B's connection of the revoked runner: %v", err)
	}
}

// TestCrossHubCancelAndFollow: on hub A a user follows the log of a job
// whose runner streams to hub B, then cancels it: the cancel reaches the
// runner through B; a cancelled offer is dropped the same way.
func TestCrossHubCancelAndFollow(t *testing.T) {
	t.Parallel()
	hs := startHubs(t, 2, Config{CrossSweep: noSweep}, false)
	a, b := hs[0], hs[1]
	sr, _ := b.dial(a.registerRunner("r1"), protocol.Hello{Slots: 2})
	j := a.submit("sleep", "100")
	o := sr.offer()
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	got := a.follow(a.srv.URL, j.ID, "10000", func(_ int, body, complete string) string { return body })
	a.waitFollowing(t, j.ID)
	wantOK(t, sr.request(protocol.TypeLog, protocol.Log{AttemptRef: o.AttemptRef, Data: []byte("hello")}))
	if s := <-got; s != "hello" {
		t.Fatalf("A's follower got %q", s)
	}
	if code, e := a.call(a.admin, "POST", "/jobs/"+j.ID+"/cancel", nil, nil); code != 200 {
		t.Fatalf("cancel on A: %d %v", code, e)
	}
	var co protocol.CancelOrder
	if err := sr.expect(protocol.TypeCancel).Decode(&co); err != nil || co.Attempt != o.Attempt {
		t.Fatalf("cancel order on B: %+v %v", co, err)
	}
	wantOK(t, sr.request(protocol.TypeFinish, protocol.Finish{AttemptRef: o.AttemptRef,
		Outcome: job.Outcome{State: job.AttemptCancelled, Reason: job.ReasonCancelled, ExitCode: exit(143)},
		LogSize: 5, LogSHA256: sum([]byte("hello"))}))
	a.waitJob(j.ID, func(v apitypes.JobView) bool { return v.State == job.Cancelled })

	// An offer not yet accepted, cancelled on A: B drops it.
	q := a.submit("true")
	o2 := sr.offer()
	if code, e := a.call(a.admin, "POST", "/jobs/"+q.ID+"/cancel", nil, nil); code != 200 {
		t.Fatalf("cancel on A: %d %v", code, e)
	}
	var d protocol.DropOrder
	if err := sr.expect(protocol.TypeDrop).Decode(&d); err != nil || d.Attempt != o2.Attempt {
		t.Fatalf("drop order on B: %+v %v", d, err)
	}
	// Its slot is free again on B: the next job is offered there.
	r := a.submit("true")
	if o3 := sr.offer(); o3.Job != r.ID {
		t.Fatalf("offer for %s, want %s", o3.Job, r.ID)
	}
}

// closed reads past every frame to the connection's end, and returns it.
func (sr *scriptRunner) closed() error {
	for {
		if _, err := sr.tryRead(10 * time.Second); err != nil {
			return err
		}
	}
}

// TestCrossHubRevoke: a runner revoked on hub A is disconnected by hub B.
func TestCrossHubRevoke(t *testing.T) {
	t.Parallel()
	hs := startHubs(t, 2, Config{CrossSweep: noSweep}, false)
	a, b := hs[0], hs[1]
	sr, _ := b.dial(a.registerRunner("box"), protocol.Hello{})
	if code, e := a.call(a.admin, "POST", "/runners/box/revoke", nil, nil); code != 200 {
		t.Fatalf("revoke on A: %d %v", code, e)
	}
	if err := sr.closed(); websocket.CloseStatus(err) != protocol.CloseRevoked {
		t.Fatalf("B's connection of the revoked runner: %v", err)
	}
}

// TestCrossHubReconnectResumes: a runner that held a running attempt on
// hub A reconnects to hub B: B takes its slots and attempts from the
// database, and the log resumes at the offset A stored.
func TestCrossHubReconnectResumes(t *testing.T) {
	t.Parallel()
	hs := startHubs(t, 2, Config{CrossSweep: noSweep}, false)
	a, b := hs[0], hs[1]
	tok := a.registerRunner("r1")
	sr, w := a.dial(tok, protocol.Hello{})
	gone := func(th *testHub) { // until th has let the runner's connection go
		sandboxtest.WaitFor(t, "the runner's old connection to go", func() bool { return !th.h.connected(w.RunnerID) })
	}
	j := a.submit("true")
	o := sr.offer()
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	wantOK(t, sr.requestID(protocol.TypeLog, "log-1", protocol.Log{AttemptRef: o.AttemptRef, Data: []byte("one ")}))
	sr.ws.CloseNow()
	gone(a)
	sr2, w2 := b.dial(tok, protocol.Hello{Attempts: []protocol.Held{{AttemptRef: o.AttemptRef, Phase: protocol.PhaseRunning}}})
	if len(w2.Drop) != 0 {
		t.Fatalf("B dropped the held attempt: %+v", w2.Drop)
	}
	// The request A applied is answered from the shared ledger, not applied again.
	wantOK(t, sr2.requestID(protocol.TypeLog, "log-1", protocol.Log{AttemptRef: o.AttemptRef, Data: []byte("one ")}))
	// The slot is held on B: another job is not offered to this runner.
	other := a.submit("true")
	if f, err := sr2.tryRead(500 * time.Millisecond); err == nil && f.Type == protocol.TypeOffer {
		t.Fatalf("offer %s to a runner whose one slot is taken", other.ID)
	}
	wantOK(t, sr2.request(protocol.TypeLog, protocol.Log{AttemptRef: o.AttemptRef, Offset: 4, Data: []byte("two")}))
	wantOK(t, sr2.request(protocol.TypeFinish, protocol.Finish{AttemptRef: o.AttemptRef,
		Outcome: job.Outcome{State: job.AttemptCompleted, Reason: job.ReasonExited, ExitCode: exit(0)},
		LogSize: 7, LogSHA256: sum([]byte("one two"))}))
	if v := a.waitJob(j.ID, func(v apitypes.JobView) bool { return v.State == job.Completed }); v.Attempts[0].LogSize != 7 {
		t.Fatalf("log size %d, want 7", v.Attempts[0].LogSize)
	}
	o2 := sr2.offer()
	if o2.Job != other.ID {
		t.Fatalf("offer for %s, want %s", o2.Job, other.ID)
	}

	// A hub started while that attempt ran remembers it as holding the
	// runner's slot; it ends on B, and the runner comes to the new hub
	// with nothing: its slot is free there, as the database says.
	wantOK(t, sr2.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o2.AttemptRef}))
	c, _ := startHubBeside(t, a.cfg, false, hs)
	runToEnd(t, sr2, o2, "", 0) // the accept above is applied once
	sr2.ws.CloseNow()
	gone(b)
	a.waitJob(other.ID, func(v apitypes.JobView) bool { return v.State == job.Completed })
	last := a.submit("true")
	sr3, _ := c.dial(tok, protocol.Hello{})
	if o3 := sr3.offer(); o3.Job != last.ID {
		t.Fatalf("offer for %s, want %s", o3.Job, last.ID)
	}
}

// autoRunner takes every offer through accept, log and finish without
// waiting on any one reply, so offers arriving meanwhile are never
// skipped; it counts the offers of each job.
func autoRunner(t *testing.T, sr *scriptRunner, mu *sync.Mutex, offers map[string]int) {
	seq := 0
	next := map[string]func(){} // reply id → the step after it
	send := func(typ string, body any, then func()) {
		seq++
		id := fmt.Sprintf("auto-%d", seq)
		f, _ := protocol.NewFrame(typ, id, body)
		b, _ := json.Marshal(f)
		if err := sr.ws.Write(context.Background(), websocket.MessageText, b); err != nil {
			return // the test is ending
		}
		next[id] = then
	}
	for {
		f, err := sr.tryRead(time.Minute)
		if err != nil {
			return
		}
		switch f.Type {
		case protocol.TypeOffer:
			var o protocol.Offer
			if f.Decode(&o) != nil {
				t.Error("malformed offer")
				return
			}
			mu.Lock()
			offers[o.Job]++
			mu.Unlock()
			ref := o.AttemptRef
			send(protocol.TypeAccept, protocol.Accept{AttemptRef: ref}, func() {
				send(protocol.TypeFinish, protocol.Finish{AttemptRef: ref,
					Outcome: job.Outcome{State: job.AttemptCompleted, Reason: job.ReasonExited, ExitCode: exit(0)}, LogSHA256: sum(nil)}, nil)
			})
		case protocol.TypeReply:
			var r protocol.Reply
			if f.Decode(&r) != nil || !r.OK {
				t.Errorf("runner request %s refused: %+v", f.ReplyTo, r.Error)
			}
			if then := next[f.ReplyTo]; then != nil {
				then()
			}
			delete(next, f.ReplyTo)
		}
	}
}

// TestCrossHubDispatchRaceOffersOnce: three hubs dispatch a burst of jobs
// submitted on all of them to runners spread over them; their passes race
// on the same queued jobs, and still no job is ever offered twice.
func TestCrossHubDispatchRaceOffersOnce(t *testing.T) {
	t.Parallel()
	hs := startHubs(t, 3, Config{CrossSweep: 500 * time.Millisecond}, false)
	var mu sync.Mutex
	offers := map[string]int{}
	var wg sync.WaitGroup
	for i, th := range hs {
		for k := range 3 {
			sr, _ := th.dial(hs[0].registerRunner(fmt.Sprintf("r-%d-%d", i, k)), protocol.Hello{Slots: 2})
			wg.Add(1)
			go func() { defer wg.Done(); autoRunner(t, sr, &mu, offers) }()
			t.Cleanup(func() { sr.ws.CloseNow() })
		}
	}
	const jobs = 90
	var ids []string
	for n := range jobs {
		ids = append(ids, hs[n%len(hs)].submit("true").ID)
	}
	for _, id := range ids {
		hs[0].waitJob(id, func(v apitypes.JobView) bool { return v.State == job.Completed })
	}
	mu.Lock()
	defer mu.Unlock()
	for _, id := range ids {
		if offers[id] != 1 {
			t.Errorf("job %s offered %d times", id, offers[id])
		}
	}
	if len(offers) != jobs {
		t.Errorf("%d jobs offered, want %d", len(offers), jobs)
	}
	var notifies int64
	for _, th := range hs {
		notifies += th.cfg.Hints.(*heardHints).NotifiesSent()
	}
	t.Logf("%d jobs (about %d commits) took %d NOTIFYs over 3 hubs", jobs, 4*jobs, notifies)
}

// TestCrossHubShareReachesTheHoldingHub: bob shares his runner, held by
// hub B, on hub A; B offers it alice's waiting job at once, and no longer
// once he unshares it.
func TestCrossHubShareReachesTheHoldingHub(t *testing.T) {
	t.Parallel()
	hs := startHubs(t, 2, Config{CrossSweep: noSweep}, false)
	a, b := hs[0], hs[1]
	alice, bob := a.addUser("alice"), a.addUser("bob")
	box, _ := b.dial(a.registerRunnerOf(bob, "b-box"), protocol.Hello{Slots: 2})
	j := a.submitAs(alice, apitypes.SubmitRequest{})
	b.waitQueued(j.ID, waitNotYours)
	a.share(bob, "b-box", true, apitypes.ShareRequest{User: "alice"})
	// Pending until alice accepts, here on b: then b's runner gets the job.
	if v := b.runnersOf(alice)["b-box"]; !slices.Equal(v.Offered, []apitypes.Share{{User: "alice", Pending: true}}) {
		t.Fatalf("alice sees on b %+v", v)
	}
	b.waitQueued(j.ID, waitNotYours)
	b.accept(alice, "b-box", "")
	runToEnd(t, box, box.offerFor(j.ID), "one\n", 0)
	a.share(bob, "b-box", false, apitypes.ShareRequest{User: "alice"})
	j2 := a.submitAs(alice, apitypes.SubmitRequest{})
	b.waitQueued(j2.ID, waitNotYours)
}

// TestOfferChecksStoredAccess: a share withdrawn in the database (by
// another hub, whose hint has not arrived) holds for the offer, whatever
// access this hub still remembers for the runner.
func TestOfferChecksStoredAccess(t *testing.T) {
	t.Parallel()
	th, alice, bob := startTenants(t)
	box, _ := th.dial(th.registerRunnerOf(bob, "b-box", "alice"), protocol.Hello{})
	var aliceID string
	if err := th.h.store.Write(t.Context(), func(tx store.Tx) error {
		u, err := tx.UserByName("alice")
		if err != nil {
			return err
		}
		rn, err := tx.RunnerByName("b-box")
		if err != nil {
			return err
		}
		aliceID = u.ID
		return tx.DeleteShare(store.Share{RunnerID: rn.ID, Kind: store.ShareUser, Subject: u.ID})
	}); err != nil {
		t.Fatal(err)
	}
	j := th.submitAs(alice, apitypes.SubmitRequest{})
	waitDispatchIdle(t, th)
	box.noOfferYet()
	if v := th.job(j.ID); v.State != job.Queued {
		t.Fatalf("job of %s is %s on %q after the share was withdrawn", aliceID, v.State, v.Runner)
	}
}

// TestCrossSweepReadsTokensNotRows: the sweep of every connection a hub
// holds (every few seconds with several hubs) checks each against its
// runner's token, which it reads alone: not each runner's row with its
// holding and attempts (a third of an idle hub's CPU on Postgres with
// 10,000 runners).
func TestCrossSweepReadsTokensNotRows(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	st, ok := th.h.store.(statementsByText)
	if !ok {
		t.Skipf("the store (%T) does not count its statements by text", th.h.store)
	}
	for i := range 3 {
		th.dial(th.registerRunner(fmt.Sprintf("swept%d", i)), protocol.Hello{Slots: 1})
	}
	st.CountStatementsByText()
	if err := th.h.syncHeld(t.Context(), true); err != nil {
		t.Fatal(err)
	}
	for q := range st.StatementsByText() {
		if strings.Contains(q, "FROM runners LEFT JOIN runner_hubs") {
			t.Errorf("the sweep read whole runner rows: %.160s", strings.Join(strings.Fields(q), " "))
		}
	}
	if got := th.h.reg.count(); got != 3 {
		t.Errorf("%d runners connected after the sweep, want 3 (none revoked)", got)
	}
}
