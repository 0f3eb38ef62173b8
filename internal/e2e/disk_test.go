package e2e

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/client"
	"drover/internal/e2e/e2ekit"
	"drover/internal/job"
	"drover/internal/testkit"
	"drover/internal/testkit/disk"
)

// stream is a job that prints a deterministic multi-MB stream in batches,
// and want what it prints.
func stream(batches, lines int, pause string) (args []string, want string) {
	pad := strings.Repeat("x", 48)
	script := fmt.Sprintf(`for b in $(seq 0 %d); do seq $((b*%d+1)) $((b*%d+%d)) | sed 's/$/ %s/'; sleep %s; done`,
		batches-1, lines, lines, lines, pad, pause)
	var b strings.Builder
	for i := 1; i <= batches*lines; i++ {
		fmt.Fprintf(&b, "%d %s\n", i, pad)
	}
	return []string{"sh", "-c", script}, b.String()
}

func eventKinds(t *testing.T, c *client.Client, id string) map[string]int {
	t.Helper()
	evs, err := c.Events(context.Background(), id, 0)
	if err != nil {
		t.Fatal(err)
	}
	return testkit.EventKinds(evs.Events)
}

func TestHubDiskFullLosesNoLog(t *testing.T) {
	t.Parallel()
	mnt := disk.Tmpfs(t, 48<<20)
	hub := testkit.StartHubIn(t, bin, mnt+"/hub", "--lease", "2m")
	c := hub.Client()
	r := hub.StartRunner(t, "r1")
	args, want := stream(30, 2000, "0.2")
	j := e2ekit.Submit(t, c, args...)
	testkit.WaitJob(t, c, j.ID, time.Minute, func(v apitypes.JobView) bool {
		return len(v.Attempts) == 1 && v.Attempts[0].LogSize > 0
	})

	free := disk.Fill(t, mnt, 0)
	// Writes the hub cannot store are refused with 507 and say why.
	testkit.WaitFor(t, time.Minute, "a write refused with 507", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_, _, err := c.Submit(ctx, apitypes.SubmitRequest{Agent: "exec", Args: []string{"true"}})
		var ae *client.APIError
		if errors.As(err, &ae) && ae.Status == http.StatusInsufficientStorage {
			if !strings.Contains(err.Error(), "disk is full") {
				t.Fatalf("507 without a clear message: %v", err)
			}
			return true
		}
		return false
	})
	testkit.WaitFor(t, time.Minute, "the runner to hold its output", func() bool {
		return strings.Contains(r.Output(), "the hub's disk is full")
	})
	time.Sleep(2 * time.Second) // the stall lasts: the runner retries meanwhile
	free()

	v := testkit.WaitJob(t, c, j.ID, 3*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	if v.State != job.Completed || len(v.Attempts) != 1 {
		t.Fatalf("job after the full disk: %s (%s), %d attempts\nhub:\n%s\nrunner:\n%s", v.State, v.Reason, len(v.Attempts), hub.Output(), r.Output())
	}
	if got := testkit.Log(t, c, j.ID, 1); got != want {
		t.Fatalf("log after a full hub disk differs: %d bytes, want %d", len(got), len(want))
	}
	ev := eventKinds(t, c, j.ID)
	if ev["log_stalled"] != 1 || ev["log_resumed"] != 1 {
		t.Fatalf("stall events: %v", ev)
	}
	// The condition is logged once per interval, not per refused request.
	if n := strings.Count(hub.Output(), "the hub's disk is full: refusing"); n < 1 || n > 2 {
		t.Fatalf("the hub logged its full disk %d times:\n%s", n, hub.Output())
	}
}

func TestRunnerDiskFullFailsTheAttempt(t *testing.T) {
	t.Parallel()
	hub := testkit.StartHub(t, bin)
	c := hub.Client()
	mnt := disk.Tmpfs(t, 16<<20)
	r := hub.StartRunnerIn(t, "r1", mnt+"/runner", "--min-free", "1048576")
	free := disk.Fill(t, mnt, 3<<20)
	args, want := stream(1, 150000, "0") // 8 MB, more than the disk holds
	j := e2ekit.Submit(t, c, args...)
	v := testkit.WaitJob(t, c, j.ID, 2*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	if v.State != job.Failed || v.Reason != job.ReasonRunnerDiskFull || len(v.Attempts) != 1 || v.Attempts[0].State != job.AttemptFailed {
		t.Fatalf("job on a full runner: %s (%s), attempts %+v\nrunner:\n%s", v.State, v.Reason, v.Attempts, r.Output())
	}
	log := testkit.Log(t, c, j.ID, 1)
	kept, marker, ok := strings.Cut(log, "\n[drover: runner_disk_full]")
	if !ok || !strings.HasPrefix(want, kept) || len(kept) == 0 || len(kept) >= len(want) {
		t.Fatalf("log of a full runner: %d bytes, marker %v, a prefix of the stream %v", len(log), ok, strings.HasPrefix(want, kept))
	}
	if !strings.HasSuffix(marker, "\n") || strings.Count(marker, "\n") != 1 {
		t.Fatalf("marker line %q", marker)
	}

	// Space returns: the runner takes work again.
	free()
	ok2 := e2ekit.Submit(t, c, "echo", "again")
	testkit.WaitJob(t, c, ok2.ID, 2*time.Minute, testkit.InState(job.Completed))
	if got := testkit.Log(t, c, ok2.ID, 1); got != "again\n" {
		t.Fatalf("log after space returned: %q", got)
	}
}

func TestRunnerBelowFloorDeclinesUntilSpaceReturns(t *testing.T) {
	t.Parallel()
	hub := testkit.StartHub(t, bin)
	c := hub.Client()
	mnt := disk.Tmpfs(t, 16<<20)
	hub.StartRunnerIn(t, "r1", mnt+"/runner", "--min-free", "8388608")
	free := disk.Fill(t, mnt, 4<<20)
	testkit.WaitFor(t, time.Minute, "drover runners to show the runner not ready", func() bool {
		out, err := hub.CLI("runners")
		return err == nil && strings.Contains(out, "not ready: disk full") && strings.Contains(out, "below its floor of 8.0 MiB")
	})
	j := e2ekit.Submit(t, c, "echo", "hello")
	v := testkit.WaitJob(t, c, j.ID, time.Minute, func(v apitypes.JobView) bool {
		return v.State == job.Queued && strings.Contains(v.Waiting, "not ready") && strings.Contains(v.Waiting, "disk full")
	})
	if len(v.Attempts) != 0 {
		t.Fatalf("a runner below its floor was offered the job: %+v", v.Attempts)
	}
	if out, err := hub.CLI("show", j.ID); err != nil || !strings.Contains(out, "not ready") {
		t.Fatalf("show of a job waiting for a full runner: %v\n%s", err, out)
	}

	free()
	testkit.WaitJob(t, c, j.ID, time.Minute, testkit.InState(job.Completed))
	if out, err := hub.CLI("runners"); err != nil || strings.Contains(out, "not ready") {
		t.Fatalf("runners after space returned: %v\n%s", err, out)
	}
}

// A hub killed while its disk is full cannot store its recovery when it
// starts again: it waits for space, saying so, rather than exiting, and
// then goes on with the job it had, losing none of its log.
func TestHubStartsOnceItsFullDiskHasSpace(t *testing.T) {
	t.Parallel()
	mnt := disk.Tmpfs(t, 48<<20)
	hub := testkit.StartHubIn(t, bin, mnt+"/hub", "--lease", "2m")
	c := hub.Client()
	r := hub.StartRunner(t, "r1")
	args, want := stream(20, 200, "0.2")
	j := e2ekit.Submit(t, c, args...)
	testkit.WaitJob(t, c, j.ID, time.Minute, func(v apitypes.JobView) bool {
		return len(v.Attempts) == 1 && v.Attempts[0].LogSize > 0
	})
	hub.Kill()
	free := disk.Fill(t, mnt, 0)
	// The restarted hub meets the full disk first: space comes back once it
	// says it waits (a fixed wait lost that race on a busy machine). It
	// fails the test if the hub exits.
	hub.RestartWhen("it starts once space is freed", free)
	if !strings.Contains(hub.Output(), "it starts once space is freed") {
		t.Fatalf("the hub did not say it waits for space:\n%s", hub.Output())
	}
	v := testkit.WaitJob(t, c, j.ID, 3*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	if v.State != job.Completed || len(v.Attempts) != 1 {
		t.Fatalf("job after the hub's restart on a full disk: %s (%s), %d attempts\nhub:\n%s\nrunner:\n%s", v.State, v.Reason, len(v.Attempts), hub.Output(), r.Output())
	}
	if got := testkit.Log(t, c, j.ID, 1); got != want {
		t.Fatalf("log differs: %d bytes, want %d", len(got), len(want))
	}
}
