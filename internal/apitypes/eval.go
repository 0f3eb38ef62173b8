package apitypes

import (
	"encoding/json"
	"time"
)

// EvalInstance is one line of an evaluation's dataset, in SWE-bench's
// shape: Repo is a project of the hub (the CLI pushes a local path and
// sends the project). The tests are TestCmd, or FailToPass and PassToPass
// (each a shell command, or with TestCmd an argument of it); every one
// must pass for the instance to be resolved.
type EvalInstance struct {
	InstanceID       string     `json:"instance_id"`
	Repo             string     `json:"repo"`
	BaseCommit       string     `json:"base_commit"`
	ProblemStatement string     `json:"problem_statement"`
	TestCmd          string     `json:"test_cmd,omitempty"`
	FailToPass       StringList `json:"FAIL_TO_PASS,omitempty"`
	PassToPass       StringList `json:"PASS_TO_PASS,omitempty"`
	// Image is the container image both the instance's agent job and its
	// grading job run in (as SWE-bench's per-instance images); "" for the
	// runner's own sandbox.
	Image string `json:"image,omitempty"`
}

// StringList reads a JSON list of strings, or a string holding one (as
// SWE-bench's files have FAIL_TO_PASS).
type StringList []string

func (l *StringList) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err == nil {
		if s == "" {
			*l = nil
			return nil
		}
		b = []byte(s)
	}
	var out []string
	if err := json.Unmarshal(b, &out); err != nil {
		return err
	}
	*l = out
	return nil
}

// EvalLine is one line of a dataset as the CLI read it: an instance, or
// why it was refused (Instance nil).
type EvalLine struct {
	Line       int           `json:"line"`
	InstanceID string        `json:"instance_id,omitempty"`
	Instance   *EvalInstance `json:"instance,omitempty"`
	Refused    string        `json:"refused,omitempty"`
}

// MaxEvalRequest bounds an EvalRunRequest as JSON.
const MaxEvalRequest = 64 << 20

// EvalRunRequest starts an evaluation (POST /evals). Key makes the start
// idempotent: the same key returns the evaluation it started.
type EvalRunRequest struct {
	Key   string `json:"key,omitempty"`
	Agent string `json:"agent"`
	// Exec is the command of an exec agent's jobs, run by sh -c with the
	// problem statement as $1.
	Exec  string `json:"exec,omitempty"`
	Model string `json:"model,omitempty"`
	// Name is the predictions' model_name_or_path (default: the agent).
	Name string `json:"name,omitempty"`
	// Dataset names the dataset for the list (the CLI sends its file's
	// name); it is not part of the default key.
	Dataset     string     `json:"dataset,omitempty"`
	Attempts    int        `json:"attempts,omitempty"`
	Repeats     int        `json:"repeats,omitempty"`
	MaxParallel int        `json:"max_parallel,omitempty"`
	MaxCostUSD  float64    `json:"max_cost_usd,omitempty"`
	GradeWallS  int        `json:"grade_wall_s,omitempty"` // each test's wall limit, seconds
	Lines       []EvalLine `json:"lines"`
}

// EvalItemView is one sample of an instance (or a refused line, Repeat 0).
type EvalItemView struct {
	InstanceID string  `json:"instance_id"`
	Line       int     `json:"line"`
	Repeat     int     `json:"repeat"`
	Attempt    int     `json:"attempt"`
	State      string  `json:"state"`
	Reason     string  `json:"reason,omitempty"`
	AgentJob   string  `json:"agent_job,omitempty"`
	GradeJob   string  `json:"grade_job,omitempty"`
	Graded     string  `json:"graded,omitempty"`
	CostUSD    float64 `json:"cost_usd"`
	Tokens     int64   `json:"tokens"`
	PatchBytes int     `json:"patch_bytes"` // the size of its model_patch
}

// EvalView is an evaluation and its items.
type EvalView struct {
	ID        string         `json:"id"`
	State     string         `json:"state"`
	Reason    string         `json:"reason,omitempty"`
	Agent     string         `json:"agent"`
	Name      string         `json:"name"`
	Dataset   string         `json:"dataset,omitempty"`
	Attempts  int            `json:"attempts"`
	Repeats   int            `json:"repeats"`
	CreatedAt time.Time      `json:"created_at"`
	Counts    map[string]int `json:"counts"` // items by state
	// Done of Total items ended (refused lines are items that ended);
	// Resolved of Graded samples passed their tests. CostUSD and Tokens
	// are the agents' so far.
	Done     int            `json:"done"`
	Total    int            `json:"total"`
	Resolved int            `json:"resolved"`
	Graded   int            `json:"graded"`
	CostUSD  float64        `json:"cost_usd"`
	Tokens   int64          `json:"tokens"`
	Items    []EvalItemView `json:"items,omitempty"`
}

// EvalRepeat is one repeat's share of resolved samples.
type EvalRepeat struct {
	Repeat   int     `json:"repeat"`
	Resolved int     `json:"resolved"`
	Total    int     `json:"total"`
	Rate     float64 `json:"rate"`
}

// EvalPrediction is a line of SWE-bench's predictions file.
type EvalPrediction struct {
	InstanceID      string `json:"instance_id"`
	ModelNameOrPath string `json:"model_name_or_path"`
	ModelPatch      string `json:"model_patch"`
}

// EvalReport is an evaluation's numbers (GET /evals/{id}/report). Total
// counts graded samples (instance × repeat × attempt), never a refused or
// skipped one; PassAt1 and PassAtN are the unbiased estimator averaged over
// instances, N the attempts. Predictions are each instance's first sample
// (repeat 1, attempt 1).
type EvalReport struct {
	Eval              EvalView         `json:"eval"`
	Instances         int              `json:"instances"`
	Resolved          int              `json:"resolved"`
	Total             int              `json:"total"`
	Pending           int              `json:"pending"`
	Refused           int              `json:"refused"`
	Skipped           int              `json:"skipped"`
	PassAt1           float64          `json:"pass_at_1"`
	N                 int              `json:"n"`
	PassAtN           float64          `json:"pass_at_n"`
	CostUSD           float64          `json:"cost_usd"`
	Tokens            int64            `json:"tokens"`
	CostPerResolved   float64          `json:"cost_per_resolved_usd"`
	TokensPerResolved float64          `json:"tokens_per_resolved"`
	Repeats           []EvalRepeat     `json:"repeats"`
	Min               float64          `json:"min"`
	Max               float64          `json:"max"`
	Stddev            float64          `json:"stddev"`
	Predictions       []EvalPrediction `json:"predictions"`
}

// EvalList is the answer to GET /evals.
type EvalList struct {
	Evals []EvalView `json:"evals"`
}
