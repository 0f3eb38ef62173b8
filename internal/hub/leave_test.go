package hub

import (
	"testing"
	"time"

	"drover/internal/job"
)

// A runner leaving a follower hub wakes the leader's sweep by a hint: the
// leader expires its lease when the lease ends, not at its slow safety
// sweep (an hour here, so only the hint can make it in time).
func TestLeaderHearsARunnerLeaveAFollower(t *testing.T) {
	t.Parallel()
	cfg := hubsConfig()
	cfg.Lease = 2 * time.Second // what the leader must keep, once the runner is gone
	ths := startHubs(t, 2, cfg, false)
	a, b := ths[0], ths[1]
	if waitLeader(t, ths) != a {
		t.Fatal("the first hub does not lead")
	}
	sr, jobID := b.startRunning("r1")
	sr.ws.CloseNow()
	waitFor(t, "the leader expires the lease of the runner that left hub B", func() bool {
		return a.job(jobID).State == job.Unknown
	})
	if v := a.job(jobID); v.Reason != job.ReasonRunnerLost {
		t.Fatalf("job after its runner left: %+v", v)
	}
}
