// Package spec is the pipeline file: a graph of named steps (agent, exec,
// integrate, gate, publish) read from YAML, checked whole before anything
// runs, and the verdicts an adversary step delivers. It is a leaf: the hub
// side that runs the steps as jobs builds on it and is not here yet.
//
// Every refusal names the file and the line: "review.yaml:12: step
// "verify": loop needs max_rounds".
package spec

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"time"
)

// Step kinds.
const (
	KindAgent     = "agent"     // a drover agent on a prompt
	KindExec      = "exec"      // a command, e.g. the test suite
	KindIntegrate = "integrate" // merges the commits of Steps, in order
	KindGate      = "gate"      // a person approves through drover's questions
	KindPublish   = "publish"   // publishes the result; the last step
)

// Limits on a pipeline file.
const (
	MaxFile      = 256 << 10 // bytes of a pipeline file or a step file
	MaxSteps     = 200
	MaxParams    = 64
	MaxRoundsCap = 50   // the most max_rounds a loop may declare
	MaxItems     = 1000 // static for_each items
	MaxParallel  = 100
	MaxTouches   = 64
	MaxReads     = 40
	// MaxReadDiff bounds each diff a step that reads others is given;
	// MaxReads of them fit a job's context files.
	MaxReadDiff = 256 << 10
)

// ReadsFile is the context file that tells a step that reads others how
// each ended (ReadOutcome, in the order of reads).
const ReadsFile = "steps.json"

// ReadOutcome is how a step read by another ended.
type ReadOutcome struct {
	Step   string `json:"step"`
	State  string `json:"state"` // done, failed, unknown, skipped
	Commit string `json:"commit,omitempty"`
	// Diff names the context file with the diff of the step's change
	// (from its input to its commit), when it changed something.
	Diff          string `json:"diff,omitempty"`
	DiffTruncated bool   `json:"diff_truncated,omitempty"`
}

// Pipeline is a parsed, valid pipeline file.
type Pipeline struct {
	Name   string  `yaml:"name" json:"name"`
	Params []Param `yaml:"params,omitempty" json:"params,omitempty"`
	Steps  []Step  `yaml:"steps" json:"steps"`

	// File is the name the file was parsed under, for messages.
	File string `yaml:"-" json:"-"`
}

// Param is a value given when the pipeline runs ({{params.NAME}}). One
// without a default must be given.
type Param struct {
	Name        string  `yaml:"name" json:"name"`
	Description string  `yaml:"description,omitempty" json:"description,omitempty"`
	Default     *string `yaml:"default,omitempty" json:"default,omitempty"`

	Line int `yaml:"-" json:"-"`
}

// Step is one node of the graph; each runs as an ordinary drover job.
// Prompt, Command and ForEach.Items may hold template variables:
// {{params.NAME}}, {{steps.ID.commit}}, {{steps.ID.verdict}},
// {{steps.ID.feedback}} (ID a step this one depends on, transitively) and
// {{item}} (in a for_each step).
type Step struct {
	ID        string   `yaml:"id" json:"id"`
	Kind      string   `yaml:"kind" json:"kind"`
	DependsOn []string `yaml:"depends_on,omitempty" json:"depends_on,omitempty"`
	// Agent, Model, Mode (observe or fix), Tools and Prompt: an agent
	// step's job. PromptFile instead names a Markdown file in the
	// repository whose YAML front matter sets these and whose body is the
	// prompt; after Parse, Prompt holds that body and the header's values
	// fill what the step left unset.
	Agent      string `yaml:"agent,omitempty" json:"agent,omitempty"`
	Model      string `yaml:"model,omitempty" json:"model,omitempty"`
	Mode       string `yaml:"mode,omitempty" json:"mode,omitempty"`
	Tools      bool   `yaml:"tools,omitempty" json:"tools,omitempty"`
	Prompt     string `yaml:"prompt,omitempty" json:"prompt,omitempty"`
	PromptFile string `yaml:"prompt_file,omitempty" json:"prompt_file,omitempty"`
	// Command is an exec step's argv.
	Command []string `yaml:"command,omitempty" json:"command,omitempty"`
	// Steps are what an integrate step merges, in this order.
	Steps   []string `yaml:"steps,omitempty" json:"steps,omitempty"`
	Loop    *Loop    `yaml:"loop,omitempty" json:"loop,omitempty"`
	ForEach *ForEach `yaml:"for_each,omitempty" json:"for_each,omitempty"`
	Limits  Limits   `yaml:"limits,omitempty" json:"limits,omitempty"`
	// Account pins an agent step's job to one runner account (its id or
	// label), as drover run --account does.
	Account string `yaml:"account,omitempty" json:"account,omitempty"`
	// Optional: the step's failure does not fail the pipeline; the steps
	// that depend on it are skipped (best-of-N attempts, each verified).
	Optional bool `yaml:"optional,omitempty" json:"optional,omitempty"`
	// Fresh: the step always runs its own job; it neither replays a
	// recorded result nor records one (sibling attempts of one task).
	Fresh bool `yaml:"fresh,omitempty" json:"fresh,omitempty"`
	// Reads are steps whose outcomes this one is given, however they
	// ended: it starts once they all have, neither takes their commits
	// nor is skipped when one failed, and its job gets ReadsFile (each
	// one's state and commit) and, for each that changed something, the
	// diff of its change as ID.diff (a judge of sibling attempts).
	Reads []string `yaml:"reads,omitempty" json:"reads,omitempty"`

	// Line is where the step starts in its file, for messages.
	Line int `yaml:"-" json:"-"`
}

// Loop reruns a step, each round after the steps named in Repeat (say, a
// builder's fix step, which reads this step's feedback), until Until holds
// or a bound is reached. MaxRounds is required; a repeated finding stops
// the loop as needing a person (Verdict.Repeats).
type Loop struct {
	// Until is the condition over this step's output; "verdict.approved"
	// is the one known today.
	Until     string        `yaml:"until" json:"until"`
	MaxRounds int           `yaml:"max_rounds" json:"max_rounds"`
	MaxCost   float64       `yaml:"max_cost,omitempty" json:"max_cost,omitempty"`
	MaxWall   time.Duration `yaml:"max_wall,omitempty" json:"max_wall,omitempty"`
	// Repeat are steps this one depends on that run again before each
	// round after the first.
	Repeat []string `yaml:"repeat,omitempty" json:"repeat,omitempty"`
}

// ForEach fans a step out: one job and branch per item, Items given here or
// From an earlier step's output, at most MaxParallel at once, and two items
// whose Touches globs overlap never at the same time.
type ForEach struct {
	Items       []string `yaml:"items,omitempty" json:"items,omitempty"`
	From        string   `yaml:"from,omitempty" json:"from,omitempty"`
	MaxParallel int      `yaml:"max_parallel,omitempty" json:"max_parallel,omitempty"`
	Touches     []string `yaml:"touches,omitempty" json:"touches,omitempty"`
}

// Limits bound one step's job (each round's, in a loop); zero is unset.
type Limits struct {
	MaxTurns int           `yaml:"max_turns,omitempty" json:"max_turns,omitempty"`
	MaxCost  float64       `yaml:"max_cost,omitempty" json:"max_cost,omitempty"`
	MaxWall  time.Duration `yaml:"max_wall,omitempty" json:"max_wall,omitempty"`
}

// UntilApproved is the loop condition on the step's own verdict.
const UntilApproved = "verdict.approved"

// Hash identifies a run of the step: its definition (with the prompt file's
// text resolved, its line left out) and inputs, the input commits and
// param values it runs on, in the order the caller gives them (say, sorted
// "commit:ID=SHA" and "param:NAME=VALUE"). A step whose definition or any
// input changes is a new step; the same ones replay.
func (s Step) Hash(inputs ...string) string {
	// Marshal cannot fail on these plain types; the struct's field order
	// keeps the encoding canonical.
	b, _ := json.Marshal(struct {
		Step   Step     `json:"step"`
		Inputs []string `json:"inputs"`
	}{s, inputs})
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}
