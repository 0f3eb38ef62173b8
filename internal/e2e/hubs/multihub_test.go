package hubs

import (
	"bytes"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/client"
	"drover/internal/e2e/e2ekit"
	"drover/internal/job"
	"drover/internal/sandbox/sandboxtest"
	"drover/internal/testkit"
)

// countdown is a job that prints n numbered lines, one every 100 ms: long
// enough to kill something under it, and a log whose every byte is known.
func countdown(n int) (argv []string, log string) {
	var b strings.Builder
	for i := 1; i <= n; i++ {
		fmt.Fprintf(&b, "line %d\n", i)
	}
	return []string{"sh", "-c", fmt.Sprintf(`for i in $(seq 1 %d); do echo "line $i"; sleep 0.1; done`, n)}, b.String()
}

// waitConnections waits until the runner connected n times and returns
// the hubs it connected to.
func waitConnections(t *testing.T, r *testkit.Runner, n int) []string {
	t.Helper()
	sandboxtest.WaitFor(t, fmt.Sprintf("connection %d of runner %s", n, r.Name), func() bool { return len(e2ekit.Connections(r)) >= n })
	return e2ekit.Connections(r)
}

// waitLog waits until the job's first attempt logged want.
func waitLog(t *testing.T, c *client.Client, id, want string) {
	t.Helper()
	sandboxtest.WaitFor(t, "log of "+id+" with "+want, func() bool {
		var b bytes.Buffer
		_, err := c.ReadLog(t.Context(), id, client.LogRequest{Attempt: 1}, &b)
		return err == nil && strings.Contains(b.String(), want) // no attempt yet: not found
	})
}

// wantOnce checks that the job has one attempt, claimed once, offered,
// started and finished once, its events in order; it returns the log.
func wantOnce(t *testing.T, c *client.Client, r *testkit.Runner, v apitypes.JobView) string {
	t.Helper()
	if len(v.Attempts) != 1 {
		t.Errorf("job %s has %d attempts; want 1: %+v", v.ID, len(v.Attempts), v.Attempts)
	}
	if n := e2ekit.ClaimsOf(r)[v.ID]; n != 1 {
		t.Errorf("runner claimed job %s %d times; want once", v.ID, n)
	}
	ev, err := c.Events(t.Context(), v.ID, 0)
	if err != nil {
		t.Fatal(err)
	}
	kinds := map[string]int{}
	for i, e := range ev.Events {
		kinds[e.Kind]++
		if i > 0 && e.Seq <= ev.Events[i-1].Seq {
			t.Errorf("event %d has seq %d after %d", i, e.Seq, ev.Events[i-1].Seq)
		}
	}
	for _, k := range []string{"offered", "started", "finished"} {
		if kinds[k] != 1 {
			t.Errorf("job %s has %d %s events; want 1 (all: %v)", v.ID, kinds[k], k, kinds)
		}
	}
	return testkit.Log(t, c, v.ID, 1)
}

// twoHubs starts two hub processes on one new Postgres database, the
// second sharing the first's data directory if shareData, and a runner
// given both; on is the hub it connected to.
func twoHubs(t *testing.T, shareData bool) (on, other *testkit.Hub, r *testkit.Runner) {
	t.Helper()
	a := testkit.StartHub(t, bin, "--db", testkit.StartPostgres(t))
	data := ""
	if shareData {
		data = a.Data
	}
	b := a.StartPeer(t, data)
	r = a.LoginRunner(t, "r1", a.URL)
	r.URL = a.URL + "," + b.URL
	r.Start()
	if waitConnections(t, r, 1)[0] == a.URL {
		return a, b, r
	}
	return b, a, r
}

// TestRunnerFailsOverWhenItsHubDies: two hub processes on one Postgres; a
// runner given both; SIGKILL the hub it is on while its job runs. The
// runner reconnects to the other hub, the job completes there once with
// its log byte-exact, and the killed hub, back, sees the same.
func TestRunnerFailsOverWhenItsHubDies(t *testing.T) {
	t.Parallel()
	on, other, r := twoHubs(t, false)
	argv, want := countdown(40)
	// Submitted on the runner's hub: offers to a runner held by another hub
	// are another part of the multi-hub work.
	j := e2ekit.Submit(t, on.Client(), argv...)
	waitLog(t, on.Client(), j.ID, "line 5\n")
	on.Kill()
	if got := waitConnections(t, r, 2)[1]; got != other.URL {
		t.Fatalf("after its hub %s died the runner connected to %s; want %s", on.URL, got, other.URL)
	}
	v := testkit.WaitJob(t, other.Client(), j.ID, 2*time.Minute, testkit.InState(job.Completed))
	if got := wantOnce(t, other.Client(), r, v); got != want {
		t.Fatalf("log = %q\nwant %q", got, want)
	}

	on.Restart()
	if got := testkit.Log(t, on.Client(), j.ID, 1); got != want {
		t.Fatalf("the restarted hub reads the log %q; want %q", got, want)
	}
}

// TestJobSurvivesAPostgresRestart: three hubs on one Postgres; a job
// submitted on hub A runs on a runner of hub B when Postgres restarts
// (every session of every hub cut). The hubs and the runner carry on: the
// job completes once (one claim, one attempt) with its log byte-exact,
// every hub is ready again and lists three hubs and one leader, and a job
// submitted on hub C after it runs too.
func TestJobSurvivesAPostgresRestart(t *testing.T) {
	t.Parallel()
	pg := testkit.StartPostgresCluster(t)
	hs := threeHubsOn(t, pg.URL)
	a, b, c := hs[0], hs[1], hs[2]
	r := a.LoginRunner(t, "r1", b.URL)
	r.Start()
	argv, want := countdown(40)
	j := e2ekit.Submit(t, a.Client(), argv...)
	waitRunningOn(t, a, j.ID, "r1")
	waitLog(t, a.Client(), j.ID, "line 5\n")
	pg.Restart(t, time.Second)
	v := testkit.WaitJob(t, c.Client(), j.ID, 2*time.Minute, testkit.InState(job.Completed))
	if got := wantOnce(t, a.Client(), r, v); got != want {
		t.Fatalf("log = %q\nwant %q", got, want)
	}
	for _, h := range hs {
		sandboxtest.WaitFor(t, "readyz and three hubs, one leader, on "+h.URL, func() bool {
			code, _, err := h.Probe("/readyz")
			if err != nil || code != http.StatusOK {
				return false
			}
			leader, _, n := leaderOf(t, h)
			return leader != "" && n == 3
		})
	}
	// And they go on taking jobs.
	j2 := e2ekit.Submit(t, c.Client(), "sh", "-c", "echo after")
	testkit.WaitJob(t, a.Client(), j2.ID, time.Minute, testkit.InState(job.Completed))
	if got := testkit.Log(t, b.Client(), j2.ID, 1); got != "after\n" {
		t.Fatalf("log of a job after the restart = %q", got)
	}
}

// TestRepoJobPublishesAfterItsHubDies: as above with a job of a hosted
// repository, its hubs sharing one data directory: the hosted
// repositories live there, not in the database, and with a directory of
// its own the other hub has no repository to publish into (it answers
// 500, the attempt fails with workspace_error). The result is published
// through the other hub, once, and is exactly the job's change.
func TestRepoJobPublishesAfterItsHubDies(t *testing.T) {
	t.Parallel()
	on, other, r := twoHubs(t, true)
	src := e2ekit.SourceCheckout(t)
	base := e2ekit.Git(t, src, "rev-parse", "HEAD")
	argv, want := countdown(40)
	v := e2ekit.RunRepo(t, on, "--repo", src, "--agent", "exec", "--", "sh", "-c", argv[2]+"; echo changed > a.txt")
	waitLog(t, on.Client(), v.ID, "line 5\n")
	on.Kill()
	end := testkit.WaitJob(t, other.Client(), v.ID, 2*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	if end.State != job.Completed {
		t.Fatalf("job ended %s:\n%s", end.State, testkit.Log(t, other.Client(), v.ID, 1))
	}
	got := wantOnce(t, other.Client(), r, end)
	if prep, rest, _ := strings.Cut(got, "\n"); !strings.HasPrefix(prep, "drover: worktree of demo") || !strings.HasPrefix(rest, want+"drover: published ") {
		t.Fatalf("log = %q\nwant the worktree, the job's lines, then its publication", got)
	}
	if got := e2ekit.ResultChanges(t, other, src, base, v.ID); got != "M\ta.txt" {
		t.Fatalf("result changes:\n%s", got)
	}
}
