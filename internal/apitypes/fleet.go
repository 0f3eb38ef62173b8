package apitypes

import (
	"time"
)

// Fleet API (user tokens, except register):
//
//	POST /api/v1/fleet/launches        LaunchRequest → 201 LaunchResponse (the tokens, shown once)
//	GET  /api/v1/fleet/launches        → LaunchList (the caller's; admin: all)
//	GET  /api/v1/fleet/launches/{id}   → LaunchView (owner or admin)
//	POST /api/v1/fleet/launches/{id}/revoke → LaunchView (owner or admin: its runners are revoked)
//	POST /api/v1/fleet/launches/{id}/failure LaunchFailure → 204 (shown on the owner's waiting jobs)
//	GET  /api/v1/fleet/demand?labels=&after=GEN&wait=MS → Demand (after the queue's next change)
//	POST /api/v1/runner/register       (registration token) RegisterRequest → 201 RunnerView

// DefaultRegistrationTTL is how long a registration token lasts unless
// the launch asks otherwise; MaxRegistrationTTL bounds what it may ask.
const (
	DefaultRegistrationTTL = 15 * time.Minute
	MaxRegistrationTTL     = 24 * time.Hour
	MaxLaunchCount         = 100
)

// LaunchRequest asks for Count registration tokens, one per runner a
// target will start for the caller, each scoped to Labels.
type LaunchRequest struct {
	Target string            `json:"target"`
	Count  int               `json:"count"`
	Slots  int               `json:"slots"`
	Labels map[string]string `json:"labels,omitempty"`
	// TTLSeconds is how long the tokens may wait to be used (0: the default).
	TTLSeconds int `json:"ttl_seconds,omitempty"`
}

// LaunchView is a launch and its runners.
type LaunchView struct {
	ID        string            `json:"id"`
	Owner     string            `json:"owner"`
	Target    string            `json:"target"`
	Count     int               `json:"count"`
	Slots     int               `json:"slots"`
	Labels    map[string]string `json:"labels,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	Revoked   bool              `json:"revoked,omitempty"`
	Runners   []LaunchRunner    `json:"runners"`
}

// LaunchRunner is one runner of a launch: registered once its token was
// used, connected while it is.
type LaunchRunner struct {
	Name       string    `json:"name"`
	ExpiresAt  time.Time `json:"expires_at"`
	Registered bool      `json:"registered"`
	Connected  bool      `json:"connected"`
	Revoked    bool      `json:"revoked,omitempty"`
}

// LaunchResponse is a new launch with its registration tokens, the only
// time the hub shows them.
type LaunchResponse struct {
	LaunchView
	Registrations []Registration `json:"registrations"`
}

// Registration is one runner's single-use registration token.
type Registration struct {
	Name      string    `json:"name"`
	Token     string    `json:"token"`
	ExpiresAt time.Time `json:"expires_at"`
}

// LaunchList is the answer to GET /fleet/launches.
type LaunchList struct {
	Launches []LaunchView `json:"launches"`
}

// RegisterRequest exchanges a registration token for a runner token the
// runner made: Key is its SHA-256 (hex), never the token. Labels are those
// the runner will report; each must be one of the launch's.
type RegisterRequest struct {
	Key    string            `json:"key"`
	Labels map[string]string `json:"labels,omitempty"`
}

// MaxDemand bounds the queued jobs one demand answer counts.
const MaxDemand = 1000

// Demand answers GET /api/v1/fleet/demand?labels=&after=GEN&wait=MS: the
// caller's queued jobs runners with those labels could take, and the
// queue's generation to wait after next.
type Demand struct {
	Queued     int    `json:"queued"`
	Generation uint64 `json:"generation"`
}

// MaxLaunchFailureReason is the most bytes of a launch failure's reason.
const MaxLaunchFailureReason = 1000

// LaunchFailure reports why a launch failed on its target ("" clears):
// one line of plain text.
type LaunchFailure struct {
	Reason string `json:"reason"`
}
