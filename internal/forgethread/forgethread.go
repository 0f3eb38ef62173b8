// Package forgethread is the conversation on the forge of a job started
// there (an issue's or a pull request's thread): the bot's one status
// comment, edited as the job moves, each question the agent asks posted
// once, a linked user's reply answering it, and the thread read live for
// the agent's context tool. It is a capability over the hub's core: it
// declares what it needs (Core), keeps its record of each job's thread in
// the store (forge_threads), and the hub wakes it at every job change.
//
// Only the leading hub writes to forges, with backoff through outages and
// rate limits; what the status comment shows is recorded, so it is edited
// only when that changes, and a sweep carries on every thread whose
// comment does not show its job's outcome yet, so none is lost. Everything
// the agent wrote is escaped before it reaches the forge (escape.go).
package forgethread

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"drover/internal/apitypes"
	"drover/internal/forge"
	"drover/internal/retry"
	"drover/internal/store"
)

// Core is what forge threads need of the hub's core.
type Core interface {
	// Job reads a job as the hub sees it.
	Job(ctx context.Context, id string) (apitypes.JobView, error)
	// JobURL is the job's page on the dashboard, "" when the hub has no
	// public URL.
	JobURL(id string) string
	// Forge opens forge connection name with the hub's credential, and
	// says its kind (which numbers threads: forge.ThreadNumber);
	// ErrNoThreads when that forge cannot read or write threads.
	Forge(ctx context.Context, name string) (f Forge, kind string, err error)
	// Answer answers the question job jobID waits on as user userID,
	// through the hub's own answer path and its approval rule.
	Answer(ctx context.Context, userID, jobID, text string) error
	// Leading says whether this hub runs the hub-wide duties now: only
	// the leader writes to forges.
	Leading() bool
}

// ErrNoThreads is a forge connection whose client cannot read or write
// issue and pull request threads.
var ErrNoThreads = errors.New("this forge cannot read threads")

// Forge is the part of a forge client (forge.Threads) threads use.
type Forge interface {
	Issue(ctx context.Context, repo forge.Repo, number int) (Issue, error)
	Comments(ctx context.Context, repo forge.Repo, number int) ([]Comment, error)
	Reviews(ctx context.Context, repo forge.Repo, number int) ([]Review, error)
	ReviewThreads(ctx context.Context, repo forge.Repo, number int) ([]ReviewThread, error)
	Checks(ctx context.Context, repo forge.Repo, sha string) ([]Check, error)
	CommentOnce(ctx context.Context, repo forge.Repo, number int, marker, body string) (Comment, error)
	EditComment(ctx context.Context, repo forge.Repo, id int64, body string) error
}

// The thread types, as package forge reads them.
type (
	Issue        = forge.Issue
	Comment      = forge.Comment
	Review       = forge.Review
	ReviewThread = forge.ReviewThread
	Check        = forge.Check
)

// Target is the issue or pull request a job works for.
type Target struct {
	Forge  string // the forge connection's name
	Repo   forge.Repo
	Number int
	IsPR   bool
}

func (t Target) String() string {
	return t.Forge + ":" + t.Repo.String() + "#" + itoa(t.Number)
}

// Config is what a Service needs besides the core.
type Config struct {
	Store  store.Store
	Logger *slog.Logger
	Now    func() time.Time
	// Sweep is how often the leader looks at every unsettled thread; 0 is
	// DefaultSweep.
	Sweep time.Duration
	// Retry is how one update waits through a forge's outage or rate
	// limit; without Tries or MaxElapsed it is DefaultRetry. After it the
	// thread waits for a later sweep, longer after each failure (Later).
	Retry retry.Policy
}

// DefaultSweep bounds how long a thread waits on a change this hub did not
// see (a job changed on another hub, a thread attached there).
const DefaultSweep = 5 * time.Second

// Later is how long the sweep leaves a thread whose updates failed n times
// in a row: from a sweep's period, doubling, up to 10 minutes.
func Later(sweep time.Duration) retry.Policy {
	return retry.Policy{First: sweep, Max: 10 * time.Minute, Jitter: retry.EqualJitter}
}

// DefaultRetry is how an update waits through a forge's trouble.
func DefaultRetry() retry.Policy {
	return retry.Policy{First: time.Second, Max: time.Minute, Jitter: retry.EqualJitter, Tries: 5, MaxElapsed: 2 * time.Minute}
}

func itoa(n int) string { return strconv.Itoa(n) }
