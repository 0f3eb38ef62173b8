package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/e2e/e2ekit"
	"drover/internal/job"
	"drover/internal/testkit"
	"drover/internal/testkit/fakemodel"
)

// An ephemeral runner (--max-jobs 1) with three jobs queued and two slots
// runs exactly one, exits 0, and leaves no offer behind: the other two are
// queued again and run once each by the next runner, which reports its
// version to `drover runners`.
func TestEphemeralRunnerRunsOneJobThenExits(t *testing.T) {
	t.Parallel()
	hub := testkit.StartHub(t, bin)
	c := hub.Client()
	var jobs []apitypes.JobView
	for range 3 {
		jobs = append(jobs, e2ekit.Submit(t, c, "sh", "-c", "sleep 0.5; echo done"))
	}
	r1 := hub.StartRunner(t, "ephemeral", "--max-jobs", "1", "--slots", "2")
	if err := r1.Wait(2 * time.Minute); err != nil {
		t.Fatalf("ephemeral runner: %v\n%s", err, r1.Output())
	}
	if n := len(r1.Claims()); n != 1 {
		t.Fatalf("ephemeral runner claimed %d attempts, want 1", n)
	}
	done, queued := 0, 0
	for _, j := range jobs {
		v := testkit.WaitJob(t, c, j.ID, time.Minute, func(v apitypes.JobView) bool {
			return v.State == job.Completed || v.State == job.Queued
		})
		switch v.State {
		case job.Completed:
			done++
		case job.Queued:
			queued++
		}
	}
	if done != 1 || queued != 2 {
		t.Fatalf("after the ephemeral runner: %d completed, %d queued; want 1 and 2", done, queued)
	}

	r2 := hub.StartRunner(t, "steady")
	for _, j := range jobs {
		testkit.WaitJob(t, c, j.ID, 2*time.Minute, testkit.InState(job.Completed))
	}
	claims := e2ekit.ClaimsOf(r1, r2)
	for _, j := range jobs {
		if claims[j.ID] != 1 {
			t.Fatalf("job %s claimed %d times", j.ID, claims[j.ID])
		}
	}
	want, err := exec.Command(bin, "version").Output()
	if err != nil {
		t.Fatal(err)
	}
	version := strings.TrimPrefix(strings.TrimSpace(string(want)), "drover ")
	out, err := hub.CLI("runners")
	if err != nil {
		t.Fatalf("runners: %v\n%s", err, out)
	}
	found := false
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, "steady ") {
			found = strings.Contains(line, " "+version+" ")
		}
	}
	if !found || !strings.Contains(out, "VERSION") {
		t.Fatalf("runners output lacks the steady runner's version %q:\n%s", version, out)
	}
}

// A runner's --max-turns stops a native agent that goes on past it: the
// job fails limit_turns, and what the agent wrote in its allowed turns is
// published (drover fetch has it), what it would have written after is not.
func TestTurnLimitStopsTheAgentAndPublishesItsWork(t *testing.T) {
	t.Parallel()
	h := testkit.StartHub(t, bin)
	r := h.LoginRunner(t, "r-turns", h.URL)
	fake := fakemodel.NewFakeAnthropic(t, []fakemodel.Turn{
		fakemodel.CallTool("write_file", map[string]any{"path": "first.txt", "content": "turn one\n"}),
		fakemodel.CallTool("write_file", map[string]any{"path": "second.txt", "content": "turn two\n"}),
		fakemodel.CallTool("write_file", map[string]any{"path": "third.txt", "content": "turn three\n"}),
		fakemodel.CallTool("deliver", map[string]any{"summary": "three files"}),
		fakemodel.Text("Done."),
	}, fakemodel.RequireKey(e2ekit.RealKey))
	e2ekit.AddNativeAccount(t, r, "anthropic", fake.URL)
	r.Start("--max-turns", "2")
	src := e2ekit.SourceCheckout(t)
	v := e2ekit.RunRepo(t, h, "--repo", src, "--agent", "native", "--", "Write three files, then deliver.")
	c := h.Client()
	v = testkit.WaitJob(t, c, v.ID, 3*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	log := testkit.Log(t, c, v.ID, 0)
	if v.State != job.Failed || v.Reason != job.ReasonLimitTurns {
		t.Fatalf("job %s: %s/%s, want failed limit_turns\nlog:\n%s", v.ID, v.State, v.Reason, log)
	}
	got := e2ekit.Fetched(t, h, src, v.ID, "first.txt", "second.txt", "third.txt")
	if got["first.txt"] != "turn one" || got["second.txt"] != "turn two" {
		t.Fatalf("published %v, want the files of the two allowed turns\nlog:\n%s", got, log)
	}
	// The third turn's call was answered "stopped", never run.
	if got["third.txt"] != "" {
		t.Fatalf("the turn past the limit wrote third.txt: %v", got)
	}
}
