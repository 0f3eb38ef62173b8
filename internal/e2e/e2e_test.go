// Package e2e runs drover as users do: a hub and runners as separate OS
// processes of the real binary, talking over loopback sockets, with real
// SQLite and real agent processes. This package holds the fault tests
// (killed runners, restarted hubs, cut connections), logins, lifecycle,
// Postgres, full disks and the sandbox; its subpackages (agents, native, eval,
// hubs, pipeline, repo, cluster) hold the rest by theme, so that they run in
// parallel, and share their helpers through internal/e2e/e2ekit.
package e2e

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/e2e/e2ekit"
	"drover/internal/job"
	"drover/internal/testkit"
)

// bin is the drover binary built once for this package by TestMain.
var bin string

func TestMain(m *testing.M) { testkit.MainWithBinary(m, &bin, testkit.RaceBinary) }

// sleepFirst runs `sleep` only in the first attempt, so a retried or
// requeued job ends quickly.
func sleepFirst(secs int) []string {
	return []string{"sh", "-c", fmt.Sprintf(`echo "attempt $DROVER_EPOCH started"; if [ "$DROVER_EPOCH" = 1 ]; then sleep %d; fi; echo done`, secs)}
}

func TestRunnerKilledMidJobIsUnknownAndNeverRerun(t *testing.T) {
	t.Parallel()
	hub := testkit.StartHub(t, bin, "--lease", "2s", "--heartbeat", "200ms")
	c := hub.Client()
	r1 := hub.StartRunner(t, "r1")
	j := e2ekit.Submit(t, c, sleepFirst(120)...)
	testkit.WaitJob(t, c, j.ID, time.Minute, func(v apitypes.JobView) bool {
		return v.State == job.Running && len(v.Attempts) == 1 && v.Attempts[0].LogSize > 0
	})
	r1.Kill()
	v := testkit.WaitJob(t, c, j.ID, time.Minute, testkit.InState(job.Unknown))
	if v.Reason != job.ReasonRunnerLost || v.Attempts[0].State != job.AttemptUnknown {
		t.Fatalf("lost job: reason %s, attempt %s", v.Reason, v.Attempts[0].State)
	}

	// Another runner takes new work but never the unknown job.
	r2 := hub.StartRunner(t, "r2")
	other := e2ekit.Submit(t, c, "echo", "other")
	testkit.WaitJob(t, c, other.ID, time.Minute, testkit.InState(job.Completed))
	// The killed runner comes back: it finds its claim without a receipt,
	// reports it interrupted, and does not launch it again.
	r1.Start()
	time.Sleep(2 * time.Second) // give a wrong re-run every chance to happen
	v = testkit.WaitJob(t, c, j.ID, time.Minute, testkit.InState(job.Unknown))
	if len(v.Attempts) != 1 {
		t.Fatalf("unknown job got %d attempts", len(v.Attempts))
	}
	if n := e2ekit.ClaimsOf(r1, r2)[j.ID]; n != 1 {
		t.Fatalf("job claimed %d times by the runners", n)
	}

	// retry is the explicit way to run it again.
	if out, err := hub.CLI("retry", j.ID); err != nil {
		t.Fatalf("retry: %v\n%s", err, out)
	}
	v = testkit.WaitJob(t, c, j.ID, time.Minute, testkit.InState(job.Completed))
	if len(v.Attempts) != 2 || v.Attempts[0].State != job.AttemptUnknown {
		t.Fatalf("after retry: %+v", v.Attempts)
	}
	if log := testkit.Log(t, c, j.ID, 2); log != "attempt 2 started\ndone\n" {
		t.Fatalf("retry log %q", log)
	}
}

func TestHubRestartMidJobLosesNothing(t *testing.T) {
	t.Parallel()
	hub := testkit.StartHub(t, bin)
	c := hub.Client()
	r := hub.StartRunner(t, "r1")
	const lines = 60
	j := e2ekit.Submit(t, c, "sh", "-c", fmt.Sprintf(`for i in $(seq 1 %d); do echo "line $i"; sleep 0.1; done`, lines))
	testkit.WaitJob(t, c, j.ID, time.Minute, func(v apitypes.JobView) bool {
		return len(v.Attempts) == 1 && v.Attempts[0].LogSize > 20
	})
	hub.Kill()
	time.Sleep(time.Second)
	hub.Restart()
	v := testkit.WaitJob(t, c, j.ID, 2*time.Minute, testkit.InState(job.Completed))
	if len(v.Attempts) != 1 {
		t.Fatalf("%d attempts", len(v.Attempts))
	}
	var want strings.Builder
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&want, "line %d\n", i)
	}
	if got := testkit.Log(t, c, j.ID, 1); got != want.String() {
		t.Fatalf("log after hub restart differs:\n got %q\nwant %q", got, want.String())
	}
	if n := e2ekit.ClaimsOf(r)[j.ID]; n != 1 {
		t.Fatalf("claimed %d times", n)
	}
}

func TestCutConnectionsResendRequestsAppliedOnce(t *testing.T) {
	t.Parallel()
	hub := testkit.StartHub(t, bin)
	c := hub.Client()
	proxy := testkit.NewProxy(t, strings.TrimPrefix(hub.URL, "http://"))
	r := hub.LoginRunner(t, "r1", hub.URL)
	r.URL = proxy.URL
	r.Start("--slots", "2")
	stop := proxy.CutEvery(400 * time.Millisecond)
	const jobs, lines = 4, 150
	var ids []string
	for range jobs {
		ids = append(ids, e2ekit.Submit(t, c, "sh", "-c", fmt.Sprintf(`for i in $(seq 1 %d); do echo "out $i"; sleep 0.02; done`, lines)).ID)
	}
	for _, id := range ids {
		testkit.WaitJob(t, c, id, 3*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	}
	stop()
	if proxy.Cuts() < 3 {
		t.Fatalf("the proxy cut live connections only %d times; the test proved nothing", proxy.Cuts())
	}
	var want strings.Builder
	for i := 1; i <= lines; i++ {
		fmt.Fprintf(&want, "out %d\n", i)
	}
	claims := e2ekit.ClaimsOf(r)
	for _, id := range ids {
		v := testkit.WaitJob(t, c, id, time.Minute, testkit.InState(job.Completed))
		// An offer whose connection was cut before the accept arrived goes
		// back to the queue (it never started); exactly one attempt ran.
		last := v.Attempts[len(v.Attempts)-1]
		for _, a := range v.Attempts[:len(v.Attempts)-1] {
			if a.State != job.AttemptExpired || a.StartedAt != nil || a.LogSize != 0 {
				t.Errorf("job %s: an earlier attempt did more than expire: %+v", id, a)
			}
		}
		if got := testkit.Log(t, c, id, last.Number); got != want.String() {
			t.Errorf("job %s: log differs after cuts (%d bytes, want %d)", id, len(got), want.Len())
		}
		if claims[id] != 1 {
			t.Errorf("job %s claimed %d times", id, claims[id])
		}
		evs, err := c.Events(context.Background(), id, 0)
		if err != nil {
			t.Fatal(err)
		}
		finished := 0
		for _, e := range evs.Events {
			if e.Kind == "finished" {
				finished++
			}
		}
		if finished != 1 {
			t.Errorf("job %s: finish applied %d times", id, finished)
		}
	}
}

func TestThreeRunnersThreeHundredJobsEachRunOnce(t *testing.T) {
	t.Parallel()
	hub := testkit.StartHub(t, bin)
	c := hub.Client()
	var rs []*testkit.Runner
	for i := range 3 {
		rs = append(rs, hub.StartRunner(t, fmt.Sprintf("r%d", i+1), "--slots", "2"))
	}
	const n = 300
	ids := make([]string, n)
	var wg sync.WaitGroup
	sem := make(chan struct{}, 8)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			sem <- struct{}{}
			defer func() { <-sem }()
			ids[i] = e2ekit.Submit(t, c, "echo", fmt.Sprintf("job-%d", i)).ID
		}()
	}
	wg.Wait()
	for _, id := range ids {
		testkit.WaitJob(t, c, id, 10*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	}
	claims := e2ekit.ClaimsOf(rs...)
	if len(claims) != n {
		t.Fatalf("runners claimed %d distinct jobs, want %d", len(claims), n)
	}
	perRunner := make([]int, len(rs))
	for i, r := range rs {
		perRunner[i] = len(r.Claims())
	}
	for i, id := range ids {
		if claims[id] != 1 {
			t.Errorf("job %s claimed %d times", id, claims[id])
		}
		v, err := c.Job(context.Background(), id)
		if err != nil || v.State != job.Completed || len(v.Attempts) != 1 {
			t.Errorf("job %s: %s with %d attempts (%v)", id, v.State, len(v.Attempts), err)
			continue
		}
		if i%25 == 0 { // spot-check logs
			if got := testkit.Log(t, c, id, 1); got != fmt.Sprintf("job-%d\n", i) {
				t.Errorf("job %s log %q", id, got)
			}
		}
	}
	t.Logf("claims per runner: %v", perRunner)
}

func TestSIGTERMedRunnerHandsItsJobsToAnother(t *testing.T) {
	t.Parallel()
	hub := testkit.StartHub(t, bin)
	c := hub.Client()
	r1 := hub.StartRunner(t, "r1", "--slots", "2")
	a := e2ekit.Submit(t, c, sleepFirst(120)...)
	b := e2ekit.Submit(t, c, sleepFirst(120)...)
	for _, id := range []string{a.ID, b.ID} {
		testkit.WaitJob(t, c, id, time.Minute, func(v apitypes.JobView) bool {
			return v.State == job.Running && v.Attempts[0].LogSize > 0
		})
	}
	r2 := hub.StartRunner(t, "r2", "--slots", "2")
	if err := r1.Terminate(time.Minute); err != nil {
		t.Fatalf("runner did not stop cleanly on SIGTERM: %v", err)
	}
	for _, id := range []string{a.ID, b.ID} {
		v := testkit.WaitJob(t, c, id, 2*time.Minute, testkit.InState(job.Completed))
		if len(v.Attempts) != 2 || v.Attempts[0].State != job.AttemptReleased || v.Attempts[1].Runner != "r2" {
			t.Fatalf("job %s attempts: %+v", id, v.Attempts)
		}
	}
	if e2ekit.ClaimsOf(r1, r2)[a.ID] != 2 {
		t.Fatalf("want one claim on each runner")
	}
}

func TestRevokedRunnerIsDisconnectedAndCannotReconnect(t *testing.T) {
	t.Parallel()
	hub := testkit.StartHub(t, bin)
	r := hub.StartRunner(t, "r1")
	c := hub.Client()
	testkit.WaitJob(t, c, e2ekit.Submit(t, c, "true").ID, time.Minute, testkit.InState(job.Completed))
	if out, err := hub.CLI("runners", "revoke", "r1"); err != nil {
		t.Fatalf("revoke: %v\n%s", err, out)
	}
	if err := r.Wait(2 * time.Minute); err == nil {
		t.Fatalf("revoked runner exited 0")
	}
	if !strings.Contains(r.Output(), "revoked") {
		t.Fatalf("runner did not say it was revoked:\n%s", r.Output())
	}
	r.Start()
	if err := r.Wait(2 * time.Minute); err == nil || !strings.Contains(r.Output(), "login") {
		t.Fatalf("revoked runner restarted: err %v\n%s", err, r.Output())
	}
}

// TestStoppedHubKeepsItsRunners: a hub stopped (SIGSTOP) for longer than
// its runners' liveness window took every runner for dead the moment it
// went on, its liveness timers firing before it read the heartbeats
// waiting in the sockets ("no heartbeat", 4004), and past the lease their
// running jobs would have become unknown; found by drover chaos with the
// hub-pause fault. The runner stays connected and its job completes once.
func TestStoppedHubKeepsItsRunners(t *testing.T) {
	t.Parallel()
	hub := testkit.StartHub(t, bin, "--heartbeat", "1s", "--lease", "4s")
	c := hub.Client()
	r := hub.StartRunner(t, "r1")
	r.WaitConnected(time.Minute)
	j := e2ekit.Submit(t, c, "sh", "-c", `for i in $(seq 1 30); do echo "line $i"; sleep 0.2; done`)
	testkit.WaitJob(t, c, j.ID, time.Minute, testkit.InState(job.Running))
	hub.Pause(6 * time.Second) // past the 3 s liveness window and the 4 s lease
	v := testkit.WaitJob(t, c, j.ID, time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	if v.State != job.Completed || len(v.Attempts) != 1 {
		t.Fatalf("job %s with %d attempts after the hub's pause; want completed, once", v.State, len(v.Attempts))
	}
	if out := hub.Output(); strings.Contains(out, "no heartbeat") {
		t.Fatalf("the hub dropped its runner for silence after its own pause:\n%s", out)
	}
}
