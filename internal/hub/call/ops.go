package call

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"drover/internal/apitypes"
	"drover/internal/gitcmd"
	"drover/internal/job"
	"drover/internal/protocol"
)

// The typed requests and replies of the core's operations that the
// protocol's own messages do not already name: what a transport decodes
// from its wire (paths, queries, bodies) and hands the core.

// MaxLogWait caps how long a log read waits for bytes to come.
const MaxLogWait = 30 * time.Second

// Submitted is the reply to a submission: the job, and whether this call
// created it (false: the idempotency key named an earlier one).
type Submitted struct {
	Job     apitypes.JobView
	Created bool
}

// ListJobsRequest asks for the jobs the caller may see.
type ListJobsRequest struct {
	State job.State // only jobs in this state ("": every state)
	Limit int       // at most this many (0: the store's default)
}

// ShowJobRequest asks for one job, with its first events if Events.
type ShowJobRequest struct {
	ID     string
	Events bool
}

// JobActionRequest changes a job by Action (cancel, retry, restart,
// answer its question with Answer, or approve its answer), then shows it.
type JobActionRequest struct {
	Action string
	Answer apitypes.AnswerRequest
	Show   ShowJobRequest
}

// JobEventsRequest asks for a job's events after sequence number After.
type JobEventsRequest struct {
	ID    string
	After int64
}

// ErrCallerGone ends a wait whose caller went away: nothing is answered.
var ErrCallerGone = errors.New("the caller went away")

// LogSlice is one answer to a log read.
type LogSlice struct {
	Data     []byte
	Attempt  int64 // 0 when the job has no attempt yet
	Latest   int64
	Size     int64
	Complete bool
	State    string
}

// LogRequest asks for a job's log from Offset on, of its attempt number
// Attempt (0: the latest), waiting up to Wait for bytes to come.
type LogRequest struct {
	ID      string
	Attempt int64
	Offset  int64
	Wait    time.Duration
}

// UserRequest names a user to act on.
type UserRequest struct{ Name string }

// RunnerRequest names a runner.
type RunnerRequest struct{ Name string }

// ShareRunnerRequest shares runner Name (Share) or unshares it.
type ShareRunnerRequest struct {
	Name  string
	Share bool
	apitypes.ShareRequest
}

// AnswerShareRequest accepts (Accept) or declines a share of runner Name
// with its caller, or with Project.
type AnswerShareRequest struct {
	Name   string
	Accept bool
	apitypes.AnswerShareRequest
}

// ShareAccountRequest shares an account (Share) or unshares it.
type ShareAccountRequest struct {
	Share bool
	apitypes.AccountShareRequest
}

// MembersRequest names the project whose members are listed.
type MembersRequest struct{ Project string }

// ChangeMemberRequest adds User to Project (Add) or removes them.
type ChangeMemberRequest struct {
	Project, User string
	Add           bool
}

// MapProjectRequest maps project Name to a remote URL ("": hosted again).
type MapProjectRequest struct {
	Name string
	apitypes.MapProjectRequest
}

// ProjectConfigRequest names a project and, to set it, its new config.
type ProjectConfigRequest struct {
	Project string
	apitypes.ProjectConfigRequest
}

// SecretRequest names a project's secret (Name "": all of them) and,
// to set it, its value and host.
type SecretRequest struct {
	Project, Name string
	apitypes.SecretRequest
}

// LaunchRequest names a launch.
type LaunchRequest struct{ ID string }

// DemandRequest asks for the demand of runners with Labels, waiting up to
// WaitMS (negative: not milliseconds) for a generation other than After.
type DemandRequest struct {
	Labels map[string]string
	After  uint64
	WaitMS int
}

// LaunchFailureRequest reports a failure of launch ID.
type LaunchFailureRequest struct {
	ID string
	apitypes.LaunchFailure
}

// StaleHead is the error PublishBundle answers with when the hub holds a
// newer head than the one the runner built on.
type StaleHead struct{ Head string }

func (e StaleHead) Error() string { return "stale head; the hub's head is " + e.Head }

// PublishRequest is a runner's result (or checkpoint) as a git bundle:
// the commit it holds and its SHA-256. Spool stores the bundle, once the
// attempt may publish, and returns the file's path.
type PublishRequest struct {
	Ref        protocol.AttemptRef
	Commit     string
	Digest     string
	Checkpoint bool
	// Sparse is the runner's worktree's cone (none: whole), which the
	// agent may have widened; checked with protocol.CheckSparsePaths.
	Sparse []string
	Spool  func(digest string) (string, error)
}

// CheckIDs refuses a publication's commit id or SHA-256 that is not one
// in full.
func (r PublishRequest) CheckIDs() error {
	if !gitcmd.ValidCommitID(r.Commit) {
		return BadRequest("commit must be a full 40-hex commit id")
	}
	if b, err := hex.DecodeString(r.Digest); err != nil || len(b) != sha256.Size || hex.EncodeToString(b) != r.Digest {
		return BadRequest("sha256 must be 64 lower-case hex digits")
	}
	return nil
}
