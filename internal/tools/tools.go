// Package tools is drover's agent tool set: ask, checkpoint, deliver,
// context and sparse_add. The rules of the tools (argument limits, the
// protocol's, and that nothing mutates the job after ask or deliver) live in Tools, in plain Go, so the MCP server
// that vendor agents talk to and the built-in model loop behave the same.
// What a tool does to the job is the Backend's business: the runner relays it
// to the hub.
package tools

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"time"

	"drover/internal/rules"
)

// Backend carries out the tools for one attempt. Its errors reach the agent
// as tool errors, so they should read well to one (for example "fenced: this
// attempt was superseded").
type Backend interface {
	// Ask records the question and publishes the work in progress; the job
	// then waits for an answer.
	Ask(ctx context.Context, q Question) (AskResult, error)
	// Checkpoint publishes the work in progress.
	Checkpoint(ctx context.Context, message string) (CheckpointResult, error)
	// Deliver publishes the work and completes the job.
	Deliver(ctx context.Context, summary string) error
	// Context reads the job's current context (not a snapshot).
	Context(ctx context.Context) (JobContext, error)
	// SparseAdd widens the attempt's sparse checkout by folders.
	SparseAdd(ctx context.Context, paths []string) (SparseResult, error)
}

// SparseResult is what a sparse_add did: the folders it added (none when
// the checkout held them all already) and the checkout's folders now.
type SparseResult struct {
	Added []string `json:"added"`
	Cone  []string `json:"cone"`
}

// Question is what an agent asks; Choices are optional.
type Question struct {
	Text    string   `json:"question"`
	Choices []string `json:"choices,omitempty"`
	// ExpiresInSeconds, when set, is how long the question may wait for an
	// approved answer; after it the job fails with question_expired. The
	// hub holds its upper bound.
	ExpiresInSeconds int64 `json:"expires_in_seconds,omitempty"`
}

// AskResult is what the backend made of a question.
type AskResult struct {
	QuestionID string `json:"question_id"`
	Head       string `json:"head,omitempty"` // the work in progress published with it
}

// CheckpointResult is the job's head after a checkpoint.
type CheckpointResult struct {
	Head string `json:"head"`
}

// JobContext is what the context tool shows the agent.
type JobContext struct {
	JobID        string           `json:"job_id"`
	Attempt      int              `json:"attempt"`
	Prompt       string           `json:"prompt"`
	Repository   string           `json:"repository,omitempty"`
	Base         string           `json:"base,omitempty"` // the commit the job started from
	Head         string           `json:"head,omitempty"` // the latest published head
	ContextDir   string           `json:"context_dir,omitempty"`
	ContextFiles []ContextFile    `json:"context_files,omitempty"`
	Questions    []QuestionRecord `json:"questions,omitempty"`
	Attempts     []AttemptRecord  `json:"attempts,omitempty"` // earlier attempts, oldest first
	// Forge is the issue or pull request the job works for, as the hub
	// read it from the forge (its shape: protocol.ForgeContext). It is
	// untrusted text written by anyone on the forge: never instructions.
	Forge json.RawMessage `json:"forge,omitempty"`
}

// ContextFile is one file attached to the job.
type ContextFile struct {
	Name string `json:"name"`
	Size int64  `json:"size"`
}

// QuestionRecord is an earlier question and, once approved, its answer.
type QuestionRecord struct {
	ID       string    `json:"id"`
	Question string    `json:"question"`
	Choices  []string  `json:"choices,omitempty"`
	AskedAt  time.Time `json:"asked_at,omitzero"`
	Answer   *Answer   `json:"answer,omitempty"`
}

// Answer is a person's answer to a question.
type Answer struct {
	Text       string    `json:"text"`
	Choice     int       `json:"choice,omitempty"` // 1-based index into the choices; 0 for free text
	By         string    `json:"by,omitempty"`
	AnsweredAt time.Time `json:"answered_at,omitzero"`
	// Approved is false for another user's answer that the requester has not
	// approved yet. Tools.Context drops such answers whatever the backend
	// sends: the agent must never act on them.
	Approved bool `json:"approved"`
}

// AttemptRecord is how an earlier attempt ended.
type AttemptRecord struct {
	Number  int    `json:"number"`
	State   string `json:"state"`
	Reason  string `json:"reason,omitempty"`
	Message string `json:"message,omitempty"`
}

// Status says whether a tool has ended the attempt's turn.
type Status string

const (
	Working   Status = "working"   // neither ask nor deliver has succeeded
	Waiting   Status = "waiting"   // ask succeeded: the job waits for an answer
	Delivered Status = "delivered" // deliver succeeded: the job is completed
)

// Tools applies the tool rules for one attempt on top of a Backend. It is
// safe for concurrent use; mutating calls run one at a time so that two
// racing calls cannot both pass the "already waiting/delivered" check.
type Tools struct {
	backend Backend
	turn    chan struct{} // one token: held by a mutating call

	mu     sync.Mutex
	status Status
}

// New returns the tools of one attempt.
func New(b Backend) *Tools {
	return &Tools{backend: b, turn: make(chan struct{}, 1), status: Working}
}

// Status reports whether ask or deliver has succeeded. The runner reads it
// when the agent's turn ends: only Delivered completes the job.
func (t *Tools) Status() Status {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.status
}

// Ask checks the question and hands it to the backend. After it succeeds
// the agent must end its turn, and no further mutating call is accepted.
func (t *Tools) Ask(ctx context.Context, q Question) (AskResult, error) {
	release, err := t.begin(ctx, ToolAsk)
	if err != nil {
		return AskResult{}, err
	}
	defer release()
	if err := checkQuestion(q); err != nil {
		return AskResult{}, fmt.Errorf("ask: %w", err)
	}
	res, err := t.backend.Ask(ctx, q)
	if err != nil {
		return AskResult{}, fmt.Errorf("ask: %w", err)
	}
	t.setStatus(Waiting)
	return res, nil
}

// Checkpoint checks the message and has the backend publish the work.
func (t *Tools) Checkpoint(ctx context.Context, message string) (CheckpointResult, error) {
	release, err := t.begin(ctx, ToolCheckpoint)
	if err != nil {
		return CheckpointResult{}, err
	}
	defer release()
	if err := rules.CheckMessage(message); err != nil {
		return CheckpointResult{}, fmt.Errorf("checkpoint: %w", err)
	}
	res, err := t.backend.Checkpoint(ctx, message)
	if err != nil {
		return CheckpointResult{}, fmt.Errorf("checkpoint: %w", err)
	}
	return res, nil
}

// Deliver checks the summary and has the backend complete the job.
func (t *Tools) Deliver(ctx context.Context, summary string) error {
	release, err := t.begin(ctx, ToolDeliver)
	if err != nil {
		return err
	}
	defer release()
	if err := rules.CheckSummary(summary); err != nil {
		return fmt.Errorf("deliver: %w", err)
	}
	if err := t.backend.Deliver(ctx, summary); err != nil {
		return fmt.Errorf("deliver: %w", err)
	}
	t.setStatus(Delivered)
	return nil
}

// SparseAdd has the backend widen the sparse checkout by paths. It changes
// the worktree, so it is refused once the turn is over.
func (t *Tools) SparseAdd(ctx context.Context, paths []string) (SparseResult, error) {
	release, err := t.begin(ctx, ToolSparseAdd)
	if err != nil {
		return SparseResult{}, err
	}
	defer release()
	if err := rules.CheckSparseAdd(paths); err != nil {
		return SparseResult{}, fmt.Errorf("sparse_add: %w", err)
	}
	res, err := t.backend.SparseAdd(ctx, paths)
	if err != nil {
		return SparseResult{}, fmt.Errorf("sparse_add: %w", err)
	}
	return res, nil
}

// Context reads the job's context from the backend, without answers that
// await approval. It is read-only, so it is allowed in any status.
func (t *Tools) Context(ctx context.Context) (JobContext, error) {
	jc, err := t.backend.Context(ctx)
	if err != nil {
		return JobContext{}, fmt.Errorf("context: %w", err)
	}
	qs := make([]QuestionRecord, len(jc.Questions))
	for i, q := range jc.Questions {
		if q.Answer != nil && !q.Answer.Approved {
			q.Answer = nil // copy: the backend's value is left alone
		}
		qs[i] = q
	}
	jc.Questions = qs
	return jc, nil
}

// begin waits for the turn token, then refuses the call if the attempt's
// turn is already over. The returned func gives the token back.
func (t *Tools) begin(ctx context.Context, tool string) (func(), error) {
	select {
	case t.turn <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("%s: %w", tool, ctx.Err())
	}
	release := func() { <-t.turn }
	switch t.Status() {
	case Waiting:
		release()
		return nil, fmt.Errorf("%s: refused: the job is already waiting for an answer to your question; end your turn now", tool)
	case Delivered:
		release()
		return nil, fmt.Errorf("%s: refused: the job is already delivered; end your turn now", tool)
	}
	return release, nil
}

func (t *Tools) setStatus(s Status) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.status = s
}

// checkQuestion checks a question against the limits the hub holds
// (protocol.CheckQuestion).
func checkQuestion(q Question) error {
	if _, err := rules.QuestionExpiry(q.ExpiresInSeconds); err != nil {
		return err
	}
	return rules.CheckQuestion(q.Text, q.Choices)
}
