package cli

import (
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/job"
)

// TestQueuedJobsSayWhy: `drover jobs` and `drover show` print the hub's
// reason a queued job waits.
func TestQueuedJobsSayWhy(t *testing.T) {
	h := newFakeHub(t)
	why := "no connected runner you may use has the labels gpu=a100"
	h.mu.Lock()
	h.jobs = []apitypes.JobView{{ID: "j-1", State: job.Queued, Agent: "exec", Requester: "admin",
		Args: []string{"true"}, CreatedAt: time.Now(), Waiting: why}}
	h.mu.Unlock()
	env := map[string]string{"DROVER_HUB": h.URL, "DROVER_TOKEN": h.token}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"jobs"}, "waiting: " + why},
		{[]string{"show", "j-1"}, why},
	} {
		r := runCLI(t, env, "", tt.args...)
		if r.code != 0 || !strings.Contains(r.stdout, tt.want) {
			t.Errorf("%q: code %d, want %q in\n%s%s", tt.args, r.code, tt.want, r.stdout, r.stderr)
		}
	}
}
