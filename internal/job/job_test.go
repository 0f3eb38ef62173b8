package job

import "testing"

func TestToolOutcome(t *testing.T) {
	zero, one := new(0), new(1)
	for _, c := range []struct {
		name             string
		in               Outcome
		asked, delivered bool
		state            AttemptState
		why              Reason
	}{
		{"delivered", Outcome{State: AttemptCompleted, Reason: ReasonExited, ExitCode: zero}, false, true, AttemptCompleted, ReasonExited},
		{"delivered then exit 1", Outcome{State: AttemptFailed, Reason: ReasonExited, ExitCode: one}, false, true, AttemptFailed, ReasonExited},
		{"asked", Outcome{State: AttemptCompleted, Reason: ReasonExited, ExitCode: zero}, true, false, AttemptAsked, ""},
		{"asked then failed", Outcome{State: AttemptFailed, Reason: ReasonExited, ExitCode: one}, true, false, AttemptAsked, ""},
		{"asked, reported asked", Outcome{State: AttemptAsked, ExitCode: zero}, true, false, AttemptAsked, ""},
		{"reported asked without a question", Outcome{State: AttemptAsked, ExitCode: zero}, false, false, AttemptFailed, ReasonAgentError},
		{"exit 0 without deliver", Outcome{State: AttemptCompleted, Reason: ReasonExited, ExitCode: zero}, false, false, AttemptFailed, ReasonNotDelivered},
		{"exit 1 without deliver", Outcome{State: AttemptFailed, Reason: ReasonExited, ExitCode: one}, false, false, AttemptFailed, ReasonNotDelivered},
		{"timeout", Outcome{State: AttemptFailed, Reason: ReasonTimeout}, false, false, AttemptFailed, ReasonTimeout},
		{"cancelled after ask", Outcome{State: AttemptCancelled, Reason: ReasonCancelled}, true, false, AttemptCancelled, ReasonCancelled},
		{"released", Outcome{State: AttemptReleased, Reason: ReasonRunnerShutdown}, false, false, AttemptReleased, ReasonRunnerShutdown},
		{"released after ask", Outcome{State: AttemptReleased, Reason: ReasonRunnerShutdown}, true, false, AttemptAsked, ""},
		{"limited", Outcome{State: AttemptReleased, Reason: ReasonLimited, ExitCode: one}, false, false, AttemptReleased, ReasonLimited},
		// Requeueing a delivered job would run it twice.
		{"limited after deliver", Outcome{State: AttemptReleased, Reason: ReasonLimited, ExitCode: one}, false, true, AttemptFailed, ReasonExited},
		{"limited after ask", Outcome{State: AttemptReleased, Reason: ReasonLimited, ExitCode: one}, true, false, AttemptAsked, ""},
	} {
		got := ToolOutcome(c.in, c.asked, c.delivered)
		if got.State != c.state || got.Reason != c.why {
			t.Errorf("%s: got %s/%s, want %s/%s", c.name, got.State, got.Reason, c.state, c.why)
		}
		if err := got.Validate(); err != nil {
			t.Errorf("%s: %v", c.name, err)
		}
	}
}
