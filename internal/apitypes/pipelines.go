package apitypes

import (
	"encoding/json"
	"time"
)

// PipelineRunRequest starts a pipeline (POST /pipelines): the file's text,
// which the hub parses and checks whole before any job starts, the prompt
// files it names (by their path in the repository), and the project and
// exact base commit its first steps start at (pushed to the hub first).
type PipelineRunRequest struct {
	File    string            `json:"file"`   // the file's name, for messages
	Source  string            `json:"source"` // the YAML
	Files   map[string]string `json:"files,omitempty"`
	Project string            `json:"project"`
	Base    string            `json:"base"`
	Params  map[string]string `json:"params,omitempty"`
	// Staged runs every step and publishes nothing: a publish step says
	// what it would have published.
	Staged bool `json:"staged,omitempty"`
	// Key makes the start idempotent: the same requester's same key
	// returns the pipeline started first.
	Key string `json:"key,omitempty"`
}

// MaxPipelineRequest bounds a PipelineRunRequest as JSON: the file and
// its prompt files together (each at most spec.MaxFile).
const MaxPipelineRequest = 4 << 20

// PipelineRetryRequest starts a step again (POST /pipelines/{id}/retry):
// one whose job failed or ended unknown, or a loop that stopped for a
// person (it gets one more round).
type PipelineRetryRequest struct {
	Step string `json:"step"`
}

// PipelineView is a pipeline and its steps, with what they cost.
type PipelineView struct {
	ID        string            `json:"id"`
	Name      string            `json:"name"`
	File      string            `json:"file,omitempty"`
	Project   string            `json:"project"`
	Base      string            `json:"base"`
	Requester string            `json:"requester"`
	Staged    bool              `json:"staged,omitempty"`
	State     string            `json:"state"` // running, done, needs_human, failed, cancelled
	Reason    string            `json:"reason,omitempty"`
	Result    string            `json:"result,omitempty"` // the commit its last step left, once done
	Params    map[string]string `json:"params,omitempty"`
	CreatedAt time.Time         `json:"created_at"`
	UpdatedAt time.Time         `json:"updated_at"`
	CostUSD   float64           `json:"cost_usd"` // every job's, earlier attempts included; replays cost nothing
	Tokens    int64             `json:"tokens"`
	// StepsDone of StepsTotal are done (or skipped: a publish that
	// published nothing).
	StepsDone  int                `json:"steps_done"`
	StepsTotal int                `json:"steps_total"`
	Steps      []PipelineStepView `json:"steps,omitempty"` // in the file's order; only on GET /pipelines/{id}
}

// PipelineStepView is one step of a pipeline and its runs (one per round
// of a loop, one per item of a for_each).
type PipelineStepView struct {
	ID        string   `json:"id"`
	Kind      string   `json:"kind"`
	DependsOn []string `json:"depends_on,omitempty"`
	// Reads are the steps whose outcomes this one is given; it waits for
	// them too.
	Reads []string `json:"reads,omitempty"`
	// State: pending (its inputs are not ready), running, done,
	// needs_human, failed, unknown, cancelled, skipped (staged publish).
	State     string            `json:"state"`
	Reason    string            `json:"reason,omitempty"`
	Rounds    int               `json:"rounds,omitempty"` // the loop's rounds so far
	MaxRounds int               `json:"max_rounds,omitempty"`
	Commit    string            `json:"commit,omitempty"`
	Verdict   json.RawMessage   `json:"verdict,omitempty"` // the last run's delivery, when it is a verdict
	CostUSD   float64           `json:"cost_usd"`
	Tokens    int64             `json:"tokens"`
	Runs      []PipelineRunView `json:"runs,omitempty"`
	// Publication is what a publish step published, or, staged, would
	// have published.
	Publication *PipelineStaged `json:"publication,omitempty"`
}

// PipelineRunView is one run of a step: its job and what came of it.
type PipelineRunView struct {
	Key       string  `json:"key"`
	Round     int     `json:"round"`
	Item      *int    `json:"item,omitempty"`
	ItemValue string  `json:"item_value,omitempty"`
	Hash      string  `json:"hash"`
	State     string  `json:"state"`
	Job       string  `json:"job,omitempty"`
	JobState  string  `json:"job_state,omitempty"`
	Attempts  int     `json:"attempts"` // its job's attempts, earlier ones included
	Tries     int     `json:"tries,omitempty"`
	Replayed  bool    `json:"replayed,omitempty"`
	Input     string  `json:"input,omitempty"`
	Commit    string  `json:"commit,omitempty"`
	Summary   string  `json:"summary,omitempty"`
	Reason    string  `json:"reason,omitempty"`
	CostUSD   float64 `json:"cost_usd"`
	Tokens    int64   `json:"tokens"`
}

// PipelineStaged is a publish step's outcome: the publication it made, or
// staged, the one it would have made.
type PipelineStaged struct {
	Staged bool             `json:"staged,omitempty"`
	Job    string           `json:"job,omitempty"`
	Commit string           `json:"commit"`
	Mode   string           `json:"mode,omitempty"`
	Branch string           `json:"branch,omitempty"`
	Done   *PublicationView `json:"done,omitempty"`
}

// PipelineList is the answer to GET /pipelines, newest first.
type PipelineList struct {
	Pipelines []PipelineView `json:"pipelines"`
}

// PipelineEventView is one entry of a pipeline's log.
type PipelineEventView struct {
	Seq     int64     `json:"seq"`
	At      time.Time `json:"at"`
	Kind    string    `json:"kind"`
	Step    string    `json:"step,omitempty"`
	Actor   string    `json:"actor"`
	Message string    `json:"message"`
}

// PipelineEventList is the answer to GET /pipelines/{id}/events?after=SEQ.
type PipelineEventList struct {
	Events []PipelineEventView `json:"events"`
}
