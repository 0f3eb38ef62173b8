package runner

import (
	"strings"
	"testing"

	"drover/internal/agent"
	"drover/internal/job"
)

// TestStartStoppedByShutdownReleasesTheJob: a runner SIGTERMed while the
// sandbox was starting (its probe killed with the attempt's context)
// failed the job for good with spawn_failed ("bubblewrap cannot make a
// sandbox here: signal: killed"); found by the fault campaign (drover chaos
// --seed 3). The job goes back to the queue, as a running one would.
func TestStartStoppedByShutdownReleasesTheJob(t *testing.T) {
	spawn := agent.Result{ExitCode: -1, Reason: job.ReasonSpawnFailed, Message: "sandbox: bubblewrap cannot make a sandbox here: signal: killed"}
	for _, tc := range []struct {
		name   string
		cause  error
		state  job.AttemptState
		reason job.Reason
	}{
		{"while stopping", errShutdown, job.AttemptReleased, job.ReasonRunnerShutdown},
		{"while cancelled", errCancelled, job.AttemptCancelled, job.ReasonCancelled},
		{"on its own", nil, job.AttemptFailed, job.ReasonSpawnFailed},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := outcomeOf(spawn, nil, tc.cause)
			if o.State != tc.state || o.Reason != tc.reason {
				t.Fatalf("outcome %s/%s, want %s/%s", o.State, o.Reason, tc.state, tc.reason)
			}
			if !strings.Contains(o.Message, "bubblewrap cannot make a sandbox here") {
				t.Fatalf("the spawn error is not in the message: %q", o.Message)
			}
		})
	}
	if o := startFailed(failedToStart(errShutdown), errShutdown); o.State != job.AttemptReleased {
		t.Fatalf("a tool server killed by the stop: %s", o.State)
	}
}
