package cluster

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/fleet"
	"drover/internal/job"
	"drover/internal/runner"
	"drover/internal/testkit"
)

// TestFleetAutoscaleLocalScalesUpAndBackToZero queues 20 jobs for an
// autoscaler with --max 3: it keeps three ephemeral runners (each takes
// one attempt and exits, and another is launched), every job runs once
// (the runners' own journals), and once the queue is empty the runners are
// stopped and no process of them is left.
func TestFleetAutoscaleLocalScalesUpAndBackToZero(t *testing.T) {
	t.Parallel()
	hub := testkit.StartHub(t, bin)
	c := hub.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	pool := map[string]string{"pool": "auto"}
	var ids []string
	for i := range 20 {
		v, _, err := c.Submit(ctx, apitypes.SubmitRequest{Agent: "exec", Labels: pool,
			Args: []string{"sh", "-c", fmt.Sprintf("sleep 0.5; echo job %d", i)}})
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, v.ID)
	}
	scaler := hub.StartCLI(t, "fleet", "autoscale", "--on", "local", "--min", "0", "--max", "3", "--labels", "pool=auto", "--idle", "2s")

	launched := func() (connected int) {
		rs, err := c.Runners(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range rs.Runners {
			if strings.HasPrefix(r.Name, "l-") && r.Connected {
				connected++
			}
		}
		return connected
	}
	peak := 0
	for _, id := range ids {
		for {
			peak = max(peak, launched())
			v, err := c.Job(ctx, id)
			if err != nil {
				t.Fatal(err)
			}
			if v.State == job.Completed {
				break
			}
			if v.State.Terminal() {
				t.Fatalf("job %s ended %s", id, v.State)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	// The scaler's own record says how many launches it held at once
	// (sampling connections would miss short-lived runners on a busy
	// machine); the connections sampled never exceed the maximum.
	if held := launchesHeld(scaler.Output()); held != 3 || peak > 3 {
		t.Fatalf("held at most %d launches (%d runners connected at once) with 20 queued and --max 3\n%s", held, peak, scaler.Output())
	}

	// Back to zero: every launched runner stopped, no process left.
	deadline := time.Now().Add(time.Minute)
	for {
		alive := 0
		for _, pid := range hub.FleetPIDs("local") {
			if fleet.GroupAlive(pid) {
				alive++
			}
		}
		if alive == 0 && launched() == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d runner processes left after the queue emptied\n%s", alive, scaler.Output())
		}
		time.Sleep(100 * time.Millisecond)
	}

	claims := map[string]int{}
	homes, err := filepath.Glob(filepath.Join(hub.FleetDir("local"), "*", "*", "home"))
	if err != nil {
		t.Fatal(err)
	}
	for _, h := range homes {
		cs, err := runner.Claims(h)
		if err != nil {
			t.Fatal(err)
		}
		// Ephemeral (--max-jobs 1): no runner took a second attempt.
		if len(cs) > 1 {
			t.Errorf("runner %s took %d attempts, want at most 1", filepath.Base(filepath.Dir(h)), len(cs))
		}
		for _, cl := range cs {
			claims[cl.Job]++
		}
	}
	for _, id := range ids {
		if claims[id] != 1 {
			t.Errorf("job %s claimed %d times", id, claims[id])
		}
	}
	if len(homes) < len(ids) {
		t.Errorf("%d ephemeral runners launched for %d jobs", len(homes), len(ids))
	}
	if err := scaler.Terminate(30 * time.Second); err != nil {
		t.Fatalf("autoscale exit: %v\n%s", err, scaler.Output())
	}
}

// launchesHeld is the most launches an autoscaler's log shows running at
// once: each "launched" adds one, each "stopped" takes one away.
func launchesHeld(log string) (most int) {
	n := 0
	for line := range strings.Lines(log) {
		switch {
		case strings.Contains(line, `msg="autoscale: launched"`):
			n++
		case strings.Contains(line, `msg="autoscale: stopped `):
			n--
		}
		most = max(most, n)
	}
	return most
}
