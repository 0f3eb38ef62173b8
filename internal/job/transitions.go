package job

import "fmt"

// Event is something that happens to a job.
type Event string

const (
	EvOffer        Event = "offer"            // the dispatcher offers the job to a runner
	EvAccept       Event = "accept"           // the runner accepted the offer
	EvDecline      Event = "decline"          // the runner refused the offer
	EvOfferExpired Event = "offer_expired"    // the offer's lease ran out before an accept
	EvLeaseExpired Event = "lease_expired"    // the runner's lease ran out while it held a started attempt
	EvComplete     Event = "complete"         // the runner reports success
	EvFail         Event = "fail"             // the runner reports failure
	EvCancelled    Event = "cancelled"        // the runner reports the attempt stopped on request
	EvInterrupted  Event = "interrupted"      // the runner reports the attempt's outcome cannot be known
	EvRelease      Event = "release"          // the runner stopped the attempt cleanly before it finished
	EvCancel       Event = "cancel"           // a user cancels the job
	EvRetry        Event = "retry"            // an owner asks for another attempt
	EvAsk          Event = "ask"              // the attempt ended by asking a question
	EvAnswer       Event = "answer"           // an approved answer arrived
	EvRestart      Event = "restart"          // an owner asks to start over from the base, without resuming
	EvExpire       Event = "question_expired" // the question waited past its expiry without an approved answer
)

// Transitions is the job state machine. A missing entry is a refused event.
// Cancel on an offered or running job keeps the state: the hub records the
// request and the runner ends the attempt, which then reports EvCancelled.
var Transitions = map[State]map[Event]State{
	Queued: {
		EvOffer:  Offered,
		EvCancel: Cancelled,
	},
	Offered: {
		EvAccept:       Running,
		EvDecline:      Queued,
		EvOfferExpired: Queued,
		EvCancel:       Cancelled,
	},
	Running: {
		EvLeaseExpired: Unknown,
		EvComplete:     Completed,
		EvFail:         Failed,
		EvCancelled:    Cancelled,
		EvInterrupted:  Unknown,
		EvRelease:      Queued,
		EvCancel:       Running,
		EvAsk:          Waiting,
	},
	// A waiting job holds no runner slot; it leaves only by a person's
	// decision (answer, restart, cancel) or by its question expiring.
	Waiting: {
		EvAnswer:  Queued,
		EvRestart: Queued,
		EvCancel:  Cancelled,
		EvExpire:  Failed,
	},
	Completed: {},
	Failed: {
		EvRetry:   Queued,
		EvRestart: Queued,
	},
	Cancelled: {
		EvRetry:   Queued,
		EvRestart: Queued,
	},
	Unknown: {
		EvRetry:   Queued,
		EvRestart: Queued,
		// A runner whose lease ran out can still come back with a durable
		// receipt while the job's epoch is current: then the outcome is known.
		EvComplete:  Completed,
		EvFail:      Failed,
		EvCancelled: Cancelled,
		EvAsk:       Waiting,
	},
}

// Next returns the state that event e leads to from s, or an error naming
// both when the table has no such transition.
func Next(s State, e Event) (State, error) {
	row, ok := Transitions[s]
	if !ok {
		return s, fmt.Errorf("unknown job state %q", s)
	}
	n, ok := row[e]
	if !ok {
		return s, fmt.Errorf("a %s job cannot take %q", s, e)
	}
	return n, nil
}

// FinishEvent maps a runner's outcome onto the job event it causes.
func FinishEvent(o AttemptState) (Event, error) {
	switch o {
	case AttemptCompleted:
		return EvComplete, nil
	case AttemptFailed:
		return EvFail, nil
	case AttemptCancelled:
		return EvCancelled, nil
	case AttemptUnknown:
		return EvInterrupted, nil
	case AttemptReleased:
		return EvRelease, nil
	case AttemptAsked:
		return EvAsk, nil
	}
	return "", fmt.Errorf("attempt state %q does not end an attempt", o)
}
