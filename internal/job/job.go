// Package job defines the job and attempt state machines shared by the hub,
// the store and the runner. Transitions are data (see transitions.go) so that
// docs/states.md, the property tests and the hub all read the same table.
package job

import "fmt"

// State is the state of a job as users see it.
type State string

const (
	Queued    State = "queued"    // waiting for a runner
	Offered   State = "offered"   // offered to one runner, not yet accepted
	Running   State = "running"   // accepted by a runner; the agent may be running
	Waiting   State = "waiting"   // the agent asked a question; no runner slot is held
	Completed State = "completed" // terminal: the agent succeeded
	Failed    State = "failed"    // terminal: the agent failed
	Cancelled State = "cancelled" // terminal: stopped on request
	Unknown   State = "unknown"   // the outcome cannot be known; never re-run without `drover retry`
)

// States lists every job state, in lifecycle order.
var States = []State{Queued, Offered, Running, Waiting, Completed, Failed, Cancelled, Unknown}

// Terminal reports whether no automatic transition leaves s.
// Unknown is terminal for the scheduler: only an explicit retry (or a late
// receipt from the runner that held it) moves it on.
func (s State) Terminal() bool {
	switch s {
	case Completed, Failed, Cancelled, Unknown:
		return true
	}
	return false
}

// Valid reports whether s is a known job state.
func (s State) Valid() bool {
	for _, v := range States {
		if s == v {
			return true
		}
	}
	return false
}

// AttemptState is the state of one attempt (one offer of a job to one runner).
type AttemptState string

const (
	AttemptOffered   AttemptState = "offered"   // sent to the runner, not accepted
	AttemptRunning   AttemptState = "running"   // accepted: the runner may have launched it
	AttemptCompleted AttemptState = "completed" // finished, exit 0
	AttemptFailed    AttemptState = "failed"    // finished, non-zero or could not start
	AttemptCancelled AttemptState = "cancelled" // stopped on request
	AttemptUnknown   AttemptState = "unknown"   // runner lost while it may have been running
	AttemptExpired   AttemptState = "expired"   // offer never accepted (lease ran out or declined)
	AttemptReleased  AttemptState = "released"  // runner stopped it cleanly before it finished (shutdown, account limit)
	AttemptAsked     AttemptState = "asked"     // the agent asked a question and ended its turn; the job waits
)

// AttemptStates lists every attempt state.
var AttemptStates = []AttemptState{AttemptOffered, AttemptRunning, AttemptCompleted, AttemptFailed,
	AttemptCancelled, AttemptUnknown, AttemptExpired, AttemptReleased, AttemptAsked}

// Active reports whether the attempt holds a runner slot.
func (s AttemptState) Active() bool { return s == AttemptOffered || s == AttemptRunning }

// Reason says why an attempt or job stopped. It is kept apart from the exit
// code: a process can exit 0 and still have been cancelled.
type Reason string

const (
	ReasonNone            Reason = ""
	ReasonExited          Reason = "exited"            // the agent ran to its end (see exit code)
	ReasonSpawnFailed     Reason = "spawn_failed"      // the agent could not be started
	ReasonCancelled       Reason = "cancelled"         // a user cancelled the job
	ReasonTimeout         Reason = "timeout"           // the agent ran past its time limit
	ReasonRunnerLost      Reason = "runner_lost"       // the runner's lease ran out while it held the attempt
	ReasonInterrupted     Reason = "interrupted"       // a restarted runner found the attempt claimed but not finished
	ReasonRunnerShutdown  Reason = "runner_shutdown"   // the runner stopped it on SIGTERM; the job is requeued
	ReasonOfferExpired    Reason = "offer_expired"     // the offer was never accepted
	ReasonDeclined        Reason = "declined"          // the runner refused the offer
	ReasonDropped         Reason = "dropped_by_runner" // the runner reported it no longer holds the attempt
	ReasonRetried         Reason = "retried"           // an owner asked for another attempt
	ReasonAgentError      Reason = "agent_error"       // the agent adapter failed
	ReasonObserveChanged  Reason = "observe_changed"   // an observe-mode job changed HEAD, the index or a tracked file
	ReasonWorkspace       Reason = "workspace_error"   // the source could not be prepared or the result not published
	ReasonNotDelivered    Reason = "not_delivered"     // a tool-using agent's turn ended without deliver or ask
	ReasonQuestionExpired Reason = "question_expired"  // nobody gave an approved answer before the question expired
	ReasonLimited         Reason = "limited"           // the agent's account hit a usage or rate limit; the job is requeued
	ReasonRunnerDiskFull  Reason = "runner_disk_full"  // the runner could not write the attempt's output or journal; the agent was stopped
	ReasonLimitTurns      Reason = "limit_turns"       // the agent took more model turns than its runner allows per job; it was stopped, its work published
	// The provider refused the account's key or login (HTTP 401/403): the
	// account needs its owner's attention and runs nothing until then.
	ReasonAuthFailed Reason = "auth_failed"
	// The model API could not be reached (connection refused, DNS, TLS) at
	// the URL drover resolved for the account.
	ReasonEndpointUnreachable Reason = "endpoint_unreachable"
	// A native account's model server does not serve its model (HTTP 404
	// naming it): the account needs attention until its configuration
	// changes or a probe passes.
	ReasonModelNotFound Reason = "model_not_found"
	// A native account's model server refused the request (another 4xx:
	// an endpoint that is not there, such as a base URL missing /v1); the
	// message has the status and what the server said. The account needs
	// attention as for model_not_found.
	ReasonEndpointRefused Reason = "endpoint_refused"
	// The project's setup commands failed, timed out or were stopped
	// before the agent ran (the message says which command and why).
	ReasonSetupFailed Reason = "setup_failed"
)

var reasons = []Reason{ReasonExited, ReasonSpawnFailed, ReasonCancelled, ReasonTimeout, ReasonRunnerLost,
	ReasonInterrupted, ReasonRunnerShutdown, ReasonOfferExpired, ReasonDeclined, ReasonDropped, ReasonRetried,
	ReasonAgentError, ReasonObserveChanged, ReasonWorkspace, ReasonNotDelivered, ReasonQuestionExpired, ReasonLimited,
	ReasonAuthFailed, ReasonEndpointUnreachable, ReasonRunnerDiskFull, ReasonSetupFailed, ReasonLimitTurns,
	ReasonModelNotFound, ReasonEndpointRefused}

// Valid reports whether r is a known reason (the empty reason included).
func (r Reason) Valid() bool {
	if r == ReasonNone {
		return true
	}
	for _, v := range reasons {
		if r == v {
			return true
		}
	}
	return false
}

func (r Reason) String() string {
	if r == ReasonNone {
		return "none"
	}
	return string(r)
}

// Outcome is what a runner reports at the end of an attempt.
type Outcome struct {
	State    AttemptState `json:"state"` // completed, failed, cancelled, unknown, released or asked
	Reason   Reason       `json:"reason"`
	ExitCode *int         `json:"exit_code,omitempty"`
	Message  string       `json:"message,omitempty"`
}

// Validate checks that an outcome reported by a runner is one a finish may carry.
func (o Outcome) Validate() error {
	switch o.State {
	case AttemptCompleted, AttemptFailed, AttemptCancelled, AttemptUnknown, AttemptReleased, AttemptAsked:
	default:
		return fmt.Errorf("outcome state %q is not one a runner may report", o.State)
	}
	if !o.Reason.Valid() {
		return fmt.Errorf("unknown stop reason %q", o.Reason)
	}
	if o.State == AttemptCompleted && (o.ExitCode == nil || *o.ExitCode != 0) {
		return fmt.Errorf("a completed outcome needs exit code 0")
	}
	if len(o.Message) > 4096 {
		return fmt.Errorf("outcome message is %d bytes, the limit is 4096", len(o.Message))
	}
	return nil
}

// ToolOutcome is the one rule of what drover's tools make of an attempt's
// outcome, applied by the runner (from its tool server's status) and again
// by the hub (from the question and delivery it recorded). asked and
// delivered say whether the attempt's ask or deliver succeeded.
//
// An attempt that asked ends asked, even if its agent failed afterwards,
// unless it was cancelled: its job waits for the answer. One that did not
// ask cannot end asked. Only deliver completes: a turn that ended without
// deliver or ask fails not_delivered. A cancelled, released or timed-out
// attempt keeps its outcome, except that an agent limited after it asked or
// delivered fails: releasing the job would run it again.
func ToolOutcome(o Outcome, asked, delivered bool) Outcome {
	if o.Reason == ReasonLimited && (asked || delivered) {
		o.State, o.Reason = AttemptFailed, ReasonExited
	}
	switch {
	case asked && o.State != AttemptCancelled && o.State != AttemptUnknown:
		return Outcome{State: AttemptAsked, ExitCode: o.ExitCode, Message: o.Message}
	case !asked && o.State == AttemptAsked:
		return Outcome{State: AttemptFailed, Reason: ReasonAgentError, ExitCode: o.ExitCode, Message: "finished as asked without asking a question"}
	case delivered || o.Reason != ReasonExited:
		return o
	}
	msg := "the agent's turn ended without deliver or ask"
	if o.Message != "" {
		msg += "; " + o.Message
	}
	return Outcome{State: AttemptFailed, Reason: ReasonNotDelivered, ExitCode: o.ExitCode, Message: msg}
}
