package job

import (
	"fmt"
	"slices"
	"strings"
)

var stateDoc = map[State]string{
	Queued:    "waiting for a runner with a free slot and matching labels",
	Offered:   "offered to one runner; not yet accepted",
	Running:   "accepted by a runner, which may have launched the agent",
	Waiting:   "the agent asked a question; no runner slot is held until an approved answer or a restart queues it again",
	Completed: "the agent succeeded (terminal)",
	Failed:    "the agent failed or could not start (terminal; `drover retry`)",
	Cancelled: "stopped on request (terminal; `drover retry`)",
	Unknown:   "the runner was lost while the attempt may have run; never re-run without `drover retry`",
}

var attemptDoc = map[AttemptState]string{
	AttemptOffered:   "sent to the runner, not accepted; holds a slot",
	AttemptRunning:   "accepted; holds a slot and a lease",
	AttemptCompleted: "the runner reported exit 0",
	AttemptFailed:    "the runner reported failure (see reason and exit code)",
	AttemptCancelled: "stopped on request, or cancelled before it started",
	AttemptUnknown:   "its runner's lease ran out, or the runner reported it interrupted",
	AttemptExpired:   "the offer was declined or not accepted in time; the job went back to the queue",
	AttemptReleased:  "the runner stopped it on shutdown, or its account hit a usage limit, before it ended; the job went back to the queue",
	AttemptAsked:     "the agent asked a question and ended its turn; the job waits for an answer",
}

// StatesMarkdown renders docs/states.md from the transition table, so the
// document cannot drift from the code.
func StatesMarkdown() string {
	var b strings.Builder
	b.WriteString("# Job and attempt states\n\n")
	b.WriteString("Generated from `internal/job` by `go test ./internal/job -run TestStatesDoc -update`; a test fails when it is out of date.\n\n")
	b.WriteString("## Job states\n\n| state | meaning |\n|---|---|\n")
	for _, s := range States {
		fmt.Fprintf(&b, "| `%s` | %s |\n", s, stateDoc[s])
	}
	b.WriteString("\n## Job transitions\n\nAn event not listed for a state is refused with an error and changes nothing.\n\n| from | event | to |\n|---|---|---|\n")
	for _, s := range States {
		row := Transitions[s]
		evs := make([]string, 0, len(row))
		for e := range row {
			evs = append(evs, string(e))
		}
		slices.Sort(evs)
		if len(evs) == 0 {
			fmt.Fprintf(&b, "| `%s` | (none) | |\n", s)
		}
		for _, e := range evs {
			fmt.Fprintf(&b, "| `%s` | %s | `%s` |\n", s, e, row[Event(e)])
		}
	}
	b.WriteString("\n## Attempt states\n\nAn attempt is one offer of a job to one runner, under the job's next fencing epoch (the attempt's number). `offered` and `running` are active; every other state is final for the attempt, except that an `unknown` attempt may still take a late result from its runner while its job is unknown and nobody has retried it.\n\n| state | meaning |\n|---|---|\n")
	for _, s := range AttemptStates {
		fmt.Fprintf(&b, "| `%s` | %s |\n", s, attemptDoc[s])
	}
	b.WriteString("\n## Stop reasons\n\nKept apart from exit codes.\n\n| reason |\n|---|\n")
	for _, r := range reasons {
		fmt.Fprintf(&b, "| `%s` |\n", r)
	}
	return b.String()
}
