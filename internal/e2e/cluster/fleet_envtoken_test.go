package cluster

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/job"
	"drover/internal/testkit"
)

// TestFleetRunnerRegistersFromItsEnvironmentAndDropsTheToken: a runner
// given its registration token in $DROVER_REGISTRATION_TOKEN (the
// docker/podman target's --env-file) registers with it, and no job it runs
// sees the token.
func TestFleetRunnerRegistersFromItsEnvironmentAndDropsTheToken(t *testing.T) {
	t.Parallel()
	hub := testkit.StartHub(t, bin)
	c := hub.Client()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	pool := map[string]string{"pool": "envtok"}
	resp, err := c.Launch(ctx, apitypes.LaunchRequest{Target: "docker", Count: 1, Slots: 1, Labels: pool})
	if err != nil {
		t.Fatal(err)
	}
	tok := resp.Registrations[0].Token
	r := hub.StartRegisteringRunner(t, filepath.Join(t.TempDir(), "home"), tok, "--labels", "pool=envtok")
	v, _, err := c.Submit(ctx, apitypes.SubmitRequest{Agent: "exec", Labels: pool, Args: []string{"sh", "-c", "env; echo env-done"}})
	if err != nil {
		t.Fatal(err)
	}
	testkit.WaitFor(t, time.Minute, "the job completes", func() bool {
		j, err := c.Job(ctx, v.ID)
		if err != nil || (j.State.Terminal() && j.State != job.Completed) {
			t.Fatalf("job %+v %v\n%s", j, err, r.Output())
		}
		return j.State == job.Completed
	})
	out, err := hub.CLI("logs", v.ID)
	if err != nil || !strings.Contains(out, "env-done") {
		t.Fatalf("logs: %v\n%s", err, out)
	}
	if strings.Contains(out, "DROVER_REGISTRATION_TOKEN") || strings.Contains(out, tok) {
		t.Fatalf("the job saw the registration token:\n%s", out)
	}
	if err := r.Terminate(30 * time.Second); err != nil {
		t.Fatalf("runner exit: %v\n%s", err, r.Output())
	}
}
