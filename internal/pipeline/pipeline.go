// Package pipeline runs pipeline files (internal/pipeline/spec) on the
// hub: a graph of steps, each an ordinary job of the pipeline's requester
// on its project, with loops that stop, fan-outs that keep apart what
// overlaps, merges on the hub, and a publication at the end. It is a
// capability over the hub's core: it declares what it needs (Core), keeps
// its own records in the store (pipelines, their runs, step results and
// events), and the hub mounts its operations beside the API's.
//
// Nothing runs twice and nothing is paid for twice. A step's job is
// submitted with an idempotency key made of the pipeline, the run and its
// try, before the run is recorded, so a hub that dies between the two
// finds the same job when it carries on. A finished step's result is
// recorded under the hash of its definition and inputs, and a later run of
// the same step replays it at no cost. The hub that leads advances the
// pipelines; any hub may start, show or cancel one.
package pipeline

import (
	"context"
	"log/slog"
	"time"

	"drover/internal/apitypes"
	"drover/internal/gitcmd"
	"drover/internal/hub/call"
	"drover/internal/store"
)

// Core is what pipelines need of the hub's core.
type Core interface {
	// Caller is user userID as a caller: the requester, on whose behalf
	// the pipeline's steps run.
	Caller(ctx context.Context, userID string) (call.Caller, error)
	// MaySee says whether c may see a pipeline of requesterID on project:
	// its requester, an admin, or a member of the project, as with jobs.
	MaySee(ctx context.Context, c call.Caller, project, requesterID string) (bool, error)
	// Source checks that c may run jobs on project at base, and returns
	// the hub's bare repository of the project.
	Source(ctx context.Context, c call.Caller, project, base string) (repoDir string, err error)
	// Repo checks that c may still run jobs on project, hosted on the hub,
	// and returns its repository: Source without the base's checks, for
	// every pass (each job's submission checks its own base).
	Repo(ctx context.Context, c call.Caller, project string) (repoDir string, err error)
	// Submit queues a job for c, or finds the one c submitted with the
	// same req.Key.
	Submit(ctx context.Context, c call.Caller, req apitypes.SubmitRequest) (apitypes.JobView, error)
	// Record makes a completed job of c whose result is a commit the hub
	// made (an integrate step's merge), or finds the one with the same
	// key.
	Record(ctx context.Context, c call.Caller, req Recorded) (apitypes.JobView, error)
	// Job reads a job for the pipeline.
	Job(ctx context.Context, id string) (apitypes.JobView, error)
	// Cancel cancels a job as c, fenced; Retry requeues one that failed
	// or ended unknown.
	Cancel(ctx context.Context, c call.Caller, id string) error
	Retry(ctx context.Context, c call.Caller, id string) error
	// Publish publishes a completed job's result to its project's forge
	// as c (internal/publish).
	Publish(ctx context.Context, c call.Caller, jobID string) (apitypes.PublicationView, error)
	// Leading says whether this hub runs the hub-wide duties now: only
	// the leader advances pipelines.
	Leading() bool
	// Settle is told, on the leader, that pipeline id (of file) has all
	// its steps done, before it is marked done: its maker may act on the
	// results as c (an attempt group picks what its judge ranked first).
	// It must be idempotent: an error leaves the pipeline running, and
	// its next pass settles it again.
	Settle(ctx context.Context, c call.Caller, id, file string) error
}

// Recorded is a job the hub did itself: it completed at Head, made from
// Base on Project.
type Recorded struct {
	Key     string
	Project string
	Base    string
	Head    string
	Agent   string // what did it: "integrate"
	Summary string
}

// Config is what an Engine needs besides the core.
type Config struct {
	Store  store.Store
	Git    gitcmd.Git
	Logger *slog.Logger
	Now    func() time.Time
	// Sweep is how often the leader looks at every running pipeline,
	// besides when a step's job changes; 0 is DefaultSweep.
	Sweep time.Duration
}

// DefaultSweep bounds how long a pipeline waits on a change this hub did
// not see (a job finished on another hub, a lost wake-up).
const DefaultSweep = 5 * time.Second
