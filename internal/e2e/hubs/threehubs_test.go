package hubs

import (
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/e2e/e2ekit"
	"drover/internal/job"
	"drover/internal/sandbox/sandboxtest"
	"drover/internal/testkit"
)

// threeHubLease is the runner lease of the three-hub tests: short, so a
// killed runner's attempt expires within the test, and several hub TTLs
// (the leader term) long, so a new leader comes within one lease.
const threeHubLease = 6 * time.Second

// threeHubs starts three hub processes on one new Postgres database,
// sharing one data directory (the hosted repositories live there).
func threeHubs(t *testing.T) [3]*testkit.Hub {
	t.Helper()
	return threeHubsOn(t, testkit.StartPostgres(t))
}

// threeHubsOn is threeHubs on the database url.
func threeHubsOn(t *testing.T, url string) [3]*testkit.Hub {
	t.Helper()
	a := testkit.StartHub(t, bin, "--db", url,
		"--lease", threeHubLease.String(), "--heartbeat", "1s", "--hub-ttl", "2s")
	return [3]*testkit.Hub{a, a.StartPeer(t, a.Data), a.StartPeer(t, a.Data)}
}

// hubsOn is `drover hubs --json` asked of h.
func hubsOn(t *testing.T, h *testkit.Hub) apitypes.HubList {
	t.Helper()
	out, err := h.CLI("hubs", "--json")
	if err != nil {
		t.Fatalf("drover hubs on %s: %v\n%s", h.URL, err, out)
	}
	var l apitypes.HubList
	if err := json.Unmarshal([]byte(out), &l); err != nil {
		t.Fatalf("drover hubs --json: %v\n%s", err, out)
	}
	return l
}

// leaderOf is the id of the leader h lists ("" if none leads), h's own
// id, and how many hubs it lists.
func leaderOf(t *testing.T, h *testkit.Hub) (leader, self string, hubs int) {
	t.Helper()
	l := hubsOn(t, h)
	for _, v := range l.Hubs {
		if v.Leader {
			if leader != "" {
				t.Fatalf("two leaders listed by %s: %+v", h.URL, l.Hubs)
			}
			leader = v.ID
		}
		if v.Self {
			self = v.ID
		}
	}
	return leader, self, len(l.Hubs)
}

// showJSON is `drover show JOB --json` asked of h: the job with its events.
func showJSON(t *testing.T, h *testkit.Hub, id string) apitypes.JobView {
	t.Helper()
	out, err := h.CLI("show", id, "--json")
	if err != nil {
		t.Fatalf("drover show %s on %s: %v\n%s", id, h.URL, err, out)
	}
	var v apitypes.JobView
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("drover show --json: %v\n%s", err, out)
	}
	return v
}

// kindsOf counts events by kind.
// wantShownOnce checks, with `drover show --json` on h, that the job has
// one attempt in state want, offered and started once.
func wantShownOnce(t *testing.T, h *testkit.Hub, id string, want job.AttemptState) apitypes.JobView {
	t.Helper()
	v := showJSON(t, h, id)
	if len(v.Attempts) != 1 || v.Attempts[0].State != want {
		t.Errorf("job %s (%s) has attempts %+v; want one %s", id, v.State, v.Attempts, want)
	}
	if k := testkit.EventKinds(v.Events); k["offered"] != 1 || k["started"] != 1 {
		t.Errorf("job %s events %v; want one offered and one started", id, k)
	}
	return v
}

// TestThreeHubs: three hub processes on one Postgres. A job submitted on
// hub A runs on a runner that knows only hub B, `drover logs -f` on hub C
// follows it to its end byte-exact, every hub lists three hubs and one
// leader, and a cancel asked of hub A stops an attempt on hub B's runner.
func TestThreeHubs(t *testing.T) {
	t.Parallel()
	hs := threeHubs(t)
	a, b, c := hs[0], hs[1], hs[2]
	r := a.LoginRunner(t, "rb", b.URL)
	r.Start()
	if got := waitConnections(t, r, 1)[0]; got != b.URL {
		t.Fatalf("runner connected to %s; want %s", got, b.URL)
	}

	for _, h := range hs {
		sandboxtest.WaitFor(t, "three hubs and a leader on "+h.URL, func() bool {
			leader, _, n := leaderOf(t, h)
			return leader != "" && n == 3
		})
	}

	t.Run("submitted on A, run on B, followed on C", func(t *testing.T) {
		argv, want := countdown(30)
		j := e2ekit.Submit(t, a.Client(), argv...)
		out, errs, err := c.CLIOut("logs", "-f", j.ID)
		if err != nil {
			t.Fatalf("drover logs -f on C: %v\n%s%s", err, out, errs)
		}
		if out != want {
			t.Fatalf("drover logs -f on C = %q\nwant %q", out, want)
		}
		testkit.WaitJob(t, c.Client(), j.ID, time.Minute, testkit.InState(job.Completed))
		v := wantShownOnce(t, a, j.ID, job.AttemptCompleted)
		if k := testkit.EventKinds(v.Events); k["finished"] != 1 {
			t.Errorf("events %v; want one finished", k)
		}
		if n := e2ekit.ClaimsOf(r)[j.ID]; n != 1 {
			t.Errorf("runner claimed %s %d times; want once", j.ID, n)
		}
	})

	t.Run("cancel on A reaches the runner on B", func(t *testing.T) {
		j := e2ekit.Submit(t, a.Client(), "sh", "-c", "echo started; sleep 120; echo never")
		waitLog(t, a.Client(), j.ID, "started\n")
		if out, err := a.CLI("cancel", j.ID); err != nil {
			t.Fatalf("drover cancel on A: %v\n%s", err, out)
		}
		testkit.WaitJob(t, b.Client(), j.ID, time.Minute, testkit.InState(job.Cancelled))
		wantShownOnce(t, c, j.ID, job.AttemptCancelled)
		if log := testkit.Log(t, b.Client(), j.ID, 1); log != "started\n" {
			t.Errorf("cancelled job's log = %q", log)
		}
	})
}

// TestThreeHubsLeaderDies: three hubs; runner rl (given all three hubs) on
// the leader, rs on another hub and rk on the third, each running a job;
// rk's agent of a second job has asked, through its follower hub, a
// question that expires a few seconds on. SIGKILL the leader and rk: a new
// leader comes, rl moves to another hub and its job completes once, rs's
// job completes untouched, rk's attempt is expired to unknown by the new
// leader, once, and so is the question: its job fails question_expired,
// and a late answer is refused.
func TestThreeHubsLeaderDies(t *testing.T) {
	t.Parallel()
	hs := threeHubs(t)
	var leader *testkit.Hub
	var leaderID string
	sandboxtest.WaitFor(t, "a leader", func() bool {
		leaderID, _, _ = leaderOf(t, hs[0])
		return leaderID != ""
	})
	ids := map[*testkit.Hub]string{} // asked while all live
	for _, h := range hs {
		_, ids[h], _ = leaderOf(t, h)
		if ids[h] == leaderID {
			leader = h
		}
	}
	var others []*testkit.Hub
	for _, h := range hs {
		if h != leader {
			others = append(others, h)
		}
	}

	// rl starts at a random hub of its list: start it until it is on the
	// leader.
	rl := leader.LoginRunner(t, "rl", leader.URL)
	rs := leader.LoginRunner(t, "rs", others[0].URL)
	rk := leader.LoginRunner(t, "rk", others[1].URL)
	rl.URL = hs[0].URL + "," + hs[1].URL + "," + hs[2].URL
	for {
		rl.Start() // its output starts anew
		if waitConnections(t, rl, 1)[0] == leader.URL {
			break
		}
		if err := rl.Terminate(10 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	// One slot each, started one after the other: each job goes to the
	// runner started before it (the first jobs last past the third's start).
	argv, want := countdown(120)
	sub := others[0]
	jl := e2ekit.Submit(t, sub.Client(), argv...)
	waitRunningOn(t, sub, jl.ID, "rl")
	rs.Start()
	js := e2ekit.Submit(t, sub.Client(), argv...)
	waitRunningOn(t, sub, js.ID, "rs")
	rk.Start("--slots", "2")
	jk := e2ekit.Submit(t, sub.Client(), "sh", "-c", "echo started; sleep 120")
	waitRunningOn(t, sub, jk.ID, "rk")
	waitLog(t, sub.Client(), jk.ID, "started\n")
	// Its expiry outlasts the wait for the job to wait (a waiting job
	// holds no slot of rk) and ends after the kill: the old leader, alive
	// until then, must not be the one to expire it.
	jq := e2ekit.SubmitReq(t, sub.Client(), apitypes.SubmitRequest{Agent: "exec", Tools: true,
		Args: []string{"sh", "-c", `drover tool ask "Still there?" --expires-in ` + questionExpiry.String()}})
	wq := testkit.WaitJob(t, sub.Client(), jq.ID, time.Minute, func(v apitypes.JobView) bool { return v.State == job.Waiting || v.State.Terminal() })
	if wq.State != job.Waiting || len(wq.Questions) != 1 || wq.Questions[0].ExpiresAt == nil || wq.Attempts[0].Runner != "rk" {
		t.Fatalf("the asking job: %+v\n%s", wq, testkit.Log(t, sub.Client(), jq.ID, 1))
	}

	killed := time.Now()
	leader.Kill()
	rk.Kill()
	var next string
	sandboxtest.WaitFor(t, "a new leader", func() bool {
		next, _, _ = leaderOf(t, others[0])
		return next != "" && next != leaderID
	})
	took := time.Since(killed)
	t.Logf("a new leader %s %.1fs after the kill (%.2f leases)", next, took.Seconds(), took.Seconds()/threeHubLease.Seconds())
	if _, _, n := leaderOf(t, others[1]); n != 2 {
		t.Errorf("hubs listed after the leader's death: %d; want 2", n)
	}

	if got := waitConnections(t, rl, 2)[1]; got == leader.URL {
		t.Fatalf("rl reconnected to the dead leader")
	}
	for _, id := range []string{jl.ID, js.ID} {
		testkit.WaitJob(t, others[1].Client(), id, 2*time.Minute, testkit.InState(job.Completed))
		v := wantShownOnce(t, others[1], id, job.AttemptCompleted)
		if k := testkit.EventKinds(v.Events); k["finished"] != 1 {
			t.Errorf("job %s events %v; want one finished", id, k)
		}
		if got := testkit.Log(t, others[0].Client(), id, 1); got != want {
			t.Errorf("job %s log = %q\nwant %q", id, got, want)
		}
	}
	if n := e2ekit.ClaimsOf(rl, rs, rk); n[jl.ID] != 1 || n[js.ID] != 1 || n[jk.ID] != 1 {
		t.Errorf("claims %v; want each job once", n)
	}

	v := testkit.WaitJob(t, others[0].Client(), jk.ID, 2*time.Minute, testkit.InState(job.Unknown))
	if v.Reason != job.ReasonRunnerLost {
		t.Errorf("killed runner's job: reason %s; want %s", v.Reason, job.ReasonRunnerLost)
	}
	wantShownOnce(t, others[1], jk.ID, job.AttemptUnknown)
	if by := loggedBy(ids, `msg="attempt expired" job=`+regexp.QuoteMeta(jk.ID)+`\b`); len(by) != 1 || by[0] != next+" ×1" {
		t.Errorf("the killed runner's attempt expired by %v; want once, by the new leader %s", by, next)
	}

	// waiting → question_expired → failed (docs/states.md), once, under the
	// new leader; its one attempt stays asked, nothing runs again, and the
	// answer that comes too late changes nothing.
	if killed.After(*wq.Questions[0].ExpiresAt) {
		t.Fatalf("the question expired before the leader's kill (asked %s, killed %s): raise questionExpiry", wq.Questions[0].AskedAt, killed)
	}
	vq := testkit.WaitJob(t, others[1].Client(), jq.ID, time.Minute, func(v apitypes.JobView) bool { return v.State != job.Waiting })
	if vq.State != job.Failed || vq.Reason != job.ReasonQuestionExpired {
		t.Errorf("the asking job after its question's expiry: %s (%s); want failed (%s)", vq.State, vq.Reason, job.ReasonQuestionExpired)
	}
	if out, err := others[0].CLI("answer", jq.ID, "yes"); err == nil || !strings.Contains(out, "conflict") && !strings.Contains(out, "failed") {
		t.Errorf("drover answer after the expiry: %v\n%s; want it refused", err, out)
	}
	sq := showJSON(t, others[0], jq.ID)
	if k := testkit.EventKinds(sq.Events); k["question_expired"] != 1 || k["offered"] != 1 || k["asked"] != 1 || k["answered"] != 0 {
		t.Errorf("asking job's events %v; want one offered, asked and question_expired, none answered", k)
	}
	if len(sq.Attempts) != 1 || sq.Attempts[0].State != job.AttemptAsked || sq.State != job.Failed {
		t.Errorf("asking job %s, attempts %+v; want failed with one asked attempt", sq.State, sq.Attempts)
	}
	if n := e2ekit.ClaimsOf(rl, rs, rk)[jq.ID]; n != 1 {
		t.Errorf("the asking job was claimed %d times; want once", n)
	}
	if by := loggedBy(ids, `msg="question expired" job=`+regexp.QuoteMeta(jq.ID)+`\b`); len(by) != 1 || by[0] != next+" ×1" {
		t.Errorf("the question expired by %v; want once, by the new leader %s", by, next)
	}
}

// loggedBy lists the hubs (by id) whose log, the dead ones' included,
// matches the pattern, each with how many times.
func loggedBy(ids map[*testkit.Hub]string, pattern string) []string {
	re := regexp.MustCompile(pattern)
	var by []string
	for h, id := range ids {
		if n := len(re.FindAllString(h.Output(), -1)); n > 0 {
			by = append(by, fmt.Sprintf("%s ×%d", id, n))
		}
	}
	slices.Sort(by)
	return by
}

// questionExpiry is how long the question asked before the leader's kill
// waits: longer than reaching the kill takes, shorter than the test's wait
// for the new leader's lease expiry after it.
const questionExpiry = 5 * time.Second

// waitRunningOn waits until job id runs on the named runner.
func waitRunningOn(t *testing.T, h *testkit.Hub, id, runner string) {
	t.Helper()
	v := testkit.WaitJob(t, h.Client(), id, time.Minute, func(v apitypes.JobView) bool {
		return v.State == job.Running && len(v.Attempts) == 1
	})
	if got := v.Attempts[0].Runner; got != runner {
		t.Fatalf("job %s runs on %s; want %s", id, got, runner)
	}
}
