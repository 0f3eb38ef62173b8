// Package webhook sends outbound webhooks: the events of jobs (queued,
// started, asked, finished) POSTed to the URLs users register, signed with
// a secret the hub generated for each hook. It is a capability over the
// hub's core: it declares what it needs (Core), keeps its own records in
// the store (hooks and their deliveries), and the hub mounts its
// operations beside the API's.
//
// Delivery is at least once and loses nothing. Every write of a job that
// changes its state records the change (store.JobChange) in that same
// transaction, so a change that committed has its outbox row, whatever
// happens to the hub after. The leading hub expands each change into one
// delivery per interested hook and forgets the change in one transaction
// (a second expansion of it adds nothing: deliveries are unique per hook
// and change), then sends the deliveries until a receiver answers 2xx or
// the retry policy gives up. There is no cursor over sequence numbers:
// a change committed late, by any hub, is simply found by the next pass.
// One job's deliveries to one hook go out in the order of its changes,
// each waiting for the one before to be delivered or given up.
package webhook

import (
	"context"
	"log/slog"
	"net/http"
	"slices"
	"time"

	"drover/internal/hub/call"
	"drover/internal/job"
	"drover/internal/retry"
	"drover/internal/store"
)

// Core is what webhooks need of the hub's core.
type Core interface {
	// SeesJob says whether user userID may see job j now, as everywhere
	// (false for a removed user).
	SeesJob(ctx context.Context, userID string, j store.Job) (bool, error)
	// SeesProject checks that c may see project; one c may not reads as
	// not found.
	SeesProject(ctx context.Context, c call.Caller, project string) error
	// JobURL is the link to a job's page ("" when the hub has no public
	// URL).
	JobURL(jobID string) string
	// Leading says whether this hub runs the hub-wide duties now: only
	// the leader sends.
	Leading() bool
}

// The events a hook may ask for.
const (
	EventQueued   = "job.queued"   // a job was submitted, or requeued (retry, an approved answer)
	EventStarted  = "job.started"  // a runner accepted it
	EventAsked    = "job.asked"    // its agent asked a question; it waits for an answer
	EventFinished = "job.finished" // it completed, failed, was cancelled or ended unknown
)

// Events are the known event names, in a job's order.
var Events = []string{EventQueued, EventStarted, EventAsked, EventFinished}

// eventOf is the event of a job's move to s ("" for none: an offer).
func eventOf(s job.State) string {
	switch {
	case s == job.Queued:
		return EventQueued
	case s == job.Running:
		return EventStarted
	case s == job.Waiting:
		return EventAsked
	case s.Terminal():
		return EventFinished
	}
	return ""
}

// Config is what Hooks need besides the core.
type Config struct {
	Store  store.Store
	Logger *slog.Logger
	Now    func() time.Time
	// HTTP sends the deliveries; nil is a client with Timeout and no
	// redirects to other hosts.
	HTTP *http.Client
	// Timeout bounds one try, the receiver's answer included; 0 is
	// DefaultTimeout.
	Timeout time.Duration
	// Retry is when a failed delivery is tried again and when it is given
	// up (its Tries and MaxElapsed); the zero Policy is DefaultRetry.
	Retry retry.Policy
	// Sweep is how often the leader looks at the clock for a delivery
	// come due and at whether it leads; 0 is DefaultSweep.
	Sweep time.Duration
	// Recheck is how often the leader reads the outbox and the pending
	// deliveries without being told of a change (a hint from another hub
	// lost); 0 is DefaultRecheck.
	Recheck time.Duration
	// AllowPrivate lets the default client send to loopback, private and
	// link-local addresses. Without it a user's hook cannot make the hub
	// post to the services on its own host or network.
	AllowPrivate bool
}

// Defaults.
const (
	// KeepLog is how long a delivery's record is kept once it ended.
	KeepLog        = 7 * 24 * time.Hour
	DefaultTimeout = 10 * time.Second
	DefaultSweep   = time.Second
	DefaultRecheck = 10 * time.Second
)

// DefaultRetry tries a delivery for a day at most, 20 times, waiting up
// to an hour between tries.
var DefaultRetry = retry.Policy{First: 2 * time.Second, Max: time.Hour, Jitter: retry.EqualJitter,
	Tries: 20, MaxElapsed: 24 * time.Hour}

// Limits on what a user registers and what the hub reads.
const (
	MaxURL        = 2048
	MaxHooks      = 50       // per owner
	maxResponse   = 64 << 10 // of a receiver's answer, read and dropped
	maxRedirects  = 3
	expandBatch   = 100
	sendBatch     = 64
	maxInFlight   = 8
	maxDeliveries = 1000 // listed at once
	pruneEvery    = 10 * time.Minute
	pruneBatch    = 1000
	// farAhead bounds how far ahead the pending deliveries are read for
	// the soonest to come (past any retry's delay).
	farAhead = 100 * 365 * 24 * time.Hour
	// claimMargin is how long past its timeout a try's claim lasts.
	claimMargin = 5 * time.Second
)

// Formats are the body shapes a hook may ask for: the event as JSON, or a
// chat message (its text escaped for the target) for Slack or Matrix.
var Formats = []string{"json", "slack", "matrix"}

func known(list []string, s string) bool { return slices.Contains(list, s) }
