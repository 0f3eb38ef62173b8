package e2e

import (
	"os/exec"
	"strings"
	"testing"
	"time"

	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/testkit"
)

// An ephemeral runner (--max-jobs 1) with three jobs queued and two slots
// runs exactly one, exits 0, and leaves no offer behind: the other two are
// queued again and run once each by the next runner, which reports its
// version to `drover runners`.
func TestEphemeralRunnerRunsOneJobThenExits(t *testing.T) {
	t.Parallel()
	hub := testkit.StartHub(t, bin)
	c := hub.Client()
	var jobs []protocol.JobView
	for range 3 {
		jobs = append(jobs, submit(t, c, "sh", "-c", "sleep 0.5; echo done"))
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
		v := testkit.WaitJob(t, c, j.ID, time.Minute, func(v protocol.JobView) bool {
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
		testkit.WaitJob(t, c, j.ID, 2*time.Minute, state(job.Completed))
	}
	claims := claimsOf(r1, r2)
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
