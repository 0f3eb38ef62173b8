// Package store declares drover's persistence. The hub decides; the store
// only keeps. Every state change happens inside one Write transaction, so a
// hub restart finds jobs, attempts, leases and logs exactly as they were
// committed. No SQL lives outside the store's implementations (sqlite/, and
// later postgres/), which must all pass storetest.
package store

import (
	"context"
	"errors"
	"time"

	"drover/internal/job"
)

// Errors every implementation returns (wrapped) for these cases.
var (
	ErrNotFound = errors.New("not found")
	ErrConflict = errors.New("already exists")
)

// Store opens transactions. Write transactions are serialized; fn may run
// again if the implementation retries on a serialization failure, so fn must
// not have side effects outside tx.
type Store interface {
	Read(ctx context.Context, fn func(Tx) error) error
	Write(ctx context.Context, fn func(Tx) error) error
	Close() error
}

// Tx is one transaction. Methods return ErrNotFound (wrapped) for a missing
// row and ErrConflict for a duplicate key.
type Tx interface {
	// Users and tokens. Tokens are stored as SHA-256 hashes only.
	InsertUser(u User) error
	User(id string) (User, error)
	UserByName(name string) (User, error)
	InsertToken(t Token) error
	Token(hash string) (Token, error)
	RevokeTokens(kind TokenKind, ownerID string, at time.Time) error

	// Runners.
	InsertRunner(r Runner) error
	UpdateRunner(r Runner) error
	Runner(id string) (Runner, error)
	RunnerByName(name string) (Runner, error)
	Runners() ([]Runner, error)

	// Jobs.
	InsertJob(j Job) error
	UpdateJob(j Job) error
	Job(id string) (Job, error)
	JobByKey(requesterID, key string) (Job, error)
	Jobs(f JobFilter) ([]Job, error)     // newest first
	QueuedJobs(limit int) ([]Job, error) // oldest first (FIFO dispatch)

	// Attempts.
	InsertAttempt(a Attempt) error
	UpdateAttempt(a Attempt) error
	Attempt(id string) (Attempt, error)
	Attempts(jobID string) ([]Attempt, error)            // by number ascending
	ActiveAttempts() ([]Attempt, error)                  // offered or running, all runners
	ExpiredAttempts(now time.Time) ([]Attempt, error)    // active with LeaseUntil before now
	ExtendLeases(runnerID string, until time.Time) error // active attempts of one runner
	ExtendAllLeases(until time.Time) error

	// Logs: append-only bytes per attempt. The caller checks the offset
	// against Attempt.LogSize and updates the attempt in the same transaction.
	AppendLog(attemptID string, offset int64, data []byte) error
	ReadLog(attemptID string, offset int64, max int) ([]byte, error)
	// DeleteLog removes every chunk of an attempt's log (the hub does this
	// when a finish's checksum disagrees, then takes the log again from 0).
	DeleteLog(attemptID string) error

	// Events: a job's history, sequence numbers increase across all jobs.
	AddEvent(e Event) (int64, error)
	Events(jobID string, afterSeq int64, limit int) ([]Event, error)

	// Request ledger: each runner request id is applied once; a resent id
	// gets the stored response.
	Request(runnerID, requestID string) (response []byte, found bool, err error)
	PutRequest(runnerID, requestID string, response []byte, at time.Time) error
	PruneRequests(before time.Time) error

	// Meta: small settings such as whether the admin exists.
	Meta(key string) (string, error)
	SetMeta(key, value string) error
}

// User is a person (or script) that submits jobs.
type User struct {
	ID        string
	Name      string
	Admin     bool
	CreatedAt time.Time
}

// TokenKind says whom a token authenticates.
type TokenKind string

const (
	TokenUser   TokenKind = "user"
	TokenRunner TokenKind = "runner"
)

// Token is a credential, kept only as the hex SHA-256 of its plaintext.
type Token struct {
	Hash      string
	Kind      TokenKind
	OwnerID   string // user id or runner id
	CreatedAt time.Time
	RevokedAt *time.Time
}

// Runner is a machine that runs jobs.
type Runner struct {
	ID        string
	Name      string
	OwnerID   string // user who approved its login
	TokenHash string // current token
	Slots     int
	Labels    map[string]string
	CreatedAt time.Time
	LastSeen  *time.Time
	RevokedAt *time.Time
}

// Job is one unit of work.
type Job struct {
	ID          string
	State       job.State
	Agent       string
	Args        []string
	Labels      map[string]string
	RequesterID string
	Key         string // idempotency key, unique per requester when set
	Epoch       int64  // fencing epoch of the current attempt; grows with every offer
	AttemptID   string // current (latest) attempt, "" before the first offer
	Cancelling  bool   // a cancel was requested while an attempt was active
	Reason      job.Reason
	ExitCode    *int
	LogCap      int64
	CreatedAt   time.Time
	UpdatedAt   time.Time
	FinishedAt  *time.Time
}

// Attempt is one offer of a job to one runner.
type Attempt struct {
	ID         string
	JobID      string
	Epoch      int64 // also the attempt's number within its job
	RunnerID   string
	State      job.AttemptState
	Reason     job.Reason
	ExitCode   *int
	Message    string
	OfferedAt  time.Time
	AcceptedAt *time.Time
	FinishedAt *time.Time
	LeaseUntil time.Time
	LogSize    int64
	LogSHA256  string // set at finish
	Isolation  string // JSON: what the runner's execution boundary applied (set at finish)
}

// JobFilter selects jobs to list.
type JobFilter struct {
	State       job.State // "" for any
	RequesterID string    // "" for any
	Limit       int       // 0 for the default (100)
}

// Event is one entry in a job's history.
type Event struct {
	Seq     int64
	JobID   string
	At      time.Time
	Kind    string
	Actor   string
	Message string
}
