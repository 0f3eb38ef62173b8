package protocol

import (
	"encoding/json"
	"fmt"
	"time"

	"drover/internal/job"
	"drover/internal/rules"
)

// The agent tools and the person in the loop: questions, answers,
// deliveries, the live job context and resuming a session. The runner relays
// its tool server's calls as the ask, deliver and context requests; people
// answer over the HTTP API (AnswerRequest, QuestionList).

// Limits on what an agent or a person may send. The runner's tool server
// checks them first; the hub checks again what reaches it.
const (
	MaxSession = 1024 // bytes of an agent session id
	// HistoryBudget bounds the encoded questions an offer or a context reply
	// carries, so that either fits in one frame with the job's argv; the
	// oldest questions are left out first (see Omitted).
	HistoryBudget = 512 << 10
)

// Ask records a question from the agent of a running attempt. Reply: AskAck.
// The attempt then ends its turn and finishes with outcome "asked"; the job
// waits, holding no slot, until an approved answer requeues it.
type Ask struct {
	AttemptRef
	Question string   `json:"question"`
	Choices  []string `json:"choices,omitempty"`
	// ExpiresIn, when set, is how long the question may wait for an
	// approved answer; after it the job fails with question_expired.
	ExpiresIn Duration `json:"expires_in_ms,omitempty"`
}

// AskAck is the reply to ask.
type AskAck struct {
	QuestionID string `json:"question_id"`
}

// Validate checks an ask's arguments against the limits.
func (a Ask) Validate() error {
	if err := rules.CheckQuestion(a.Question, a.Choices); err != nil {
		return err
	}
	if a.ExpiresIn < 0 || a.ExpiresIn.D() > rules.MaxQuestionExpiry {
		return fmt.Errorf("expires_in_ms must be from 0 (no expiry) to %d", rules.MaxQuestionExpiry.Milliseconds())
	}
	return nil
}

// Deliver records the agent's summary of its finished work. Reply: {}. For
// a job with tools it is the only way to completed: the attempt then
// finishes "completed".
type Deliver struct {
	AttemptRef
	Summary string `json:"summary"`
}

// GetContext asks for the job's context as it stands now. Reply: JobContext.
// It changes nothing, so it is not kept in the request ledger.
type GetContext struct {
	AttemptRef
}

// JobContext is what an agent may know about its job, read live: a job
// resumed after hours sees the current head, questions and attempts.
type JobContext struct {
	Job     string   `json:"job"`
	Attempt int64    `json:"attempt"` // the calling attempt's number
	Agent   string   `json:"agent"`
	Prompt  string   `json:"prompt"` // the job's arguments joined by spaces
	Args    []string `json:"args"`
	Project string   `json:"project,omitempty"`
	Base    string   `json:"base,omitempty"`
	Head    string   `json:"head,omitempty"`
	Mode    string   `json:"mode,omitempty"`
	// Context lists the attached files (their bytes: GET /runner/context).
	Context []ContextFile `json:"context,omitempty"`
	// Questions asked so far, oldest first. An answer is present only once
	// approved: the agent never sees an answer awaiting approval.
	Questions []QuestionView `json:"questions,omitempty"`
	Omitted   int            `json:"omitted,omitempty"` // oldest questions left out (HistoryBudget)
	// Attempts are the job's earlier attempts, oldest first.
	Attempts []AttemptOutcome `json:"attempts,omitempty"`
	// Forge is the issue or pull request the job works for, read from the
	// forge at the call (absent for a job started elsewhere). Everything in
	// it was written on the forge: untrusted text, never instructions.
	Forge *ForgeContext `json:"forge,omitempty"`
}

// ForgeContext is a forge thread as the hub read it for an agent, bounded
// (ForgeBudget): what did not fit or could not be read is said in Notes,
// and the rest is still there.
type ForgeContext struct {
	Forge      string              `json:"forge"` // the forge connection's name
	Repo       string              `json:"repo"`  // OWNER/NAME
	Number     int                 `json:"number"`
	IsPR       bool                `json:"is_pr,omitempty"`
	URL        string              `json:"url,omitempty"`
	Title      string              `json:"title,omitempty"`
	Body       string              `json:"body,omitempty"`
	Author     string              `json:"author,omitempty"`
	State      string              `json:"state,omitempty"`
	Labels     []string            `json:"labels,omitempty"`
	HeadSHA    string              `json:"head_sha,omitempty"` // a pull request's
	HeadBranch string              `json:"head_branch,omitempty"`
	BaseBranch string              `json:"base_branch,omitempty"`
	Comments   []ForgeComment      `json:"comments,omitempty"` // oldest first
	Reviews    []ForgeReview       `json:"reviews,omitempty"`
	Threads    []ForgeReviewThread `json:"review_threads,omitempty"` // unresolved only
	Checks     []ForgeCheck        `json:"checks,omitempty"`         // at the head
	Notes      []string            `json:"notes,omitempty"`
}

// ForgeBudget bounds the text of a ForgeContext, in bytes.
const ForgeBudget = 64 << 10

// ForgeComment is one comment in a forge thread.
type ForgeComment struct {
	Author    string    `json:"author"`
	Body      string    `json:"body"`
	CreatedAt time.Time `json:"created_at,omitzero"`
}

// ForgeReview is one review of a pull request.
type ForgeReview struct {
	Author   string `json:"author"`
	State    string `json:"state"`
	Body     string `json:"body,omitempty"`
	CommitID string `json:"commit_id,omitempty"`
}

// ForgeReviewThread is an unresolved conversation on a line of a pull
// request's change.
type ForgeReviewThread struct {
	Path     string         `json:"path"`
	Line     int            `json:"line,omitempty"`
	Comments []ForgeComment `json:"comments"`
}

// ForgeCheck is one check at a pull request's head.
type ForgeCheck struct {
	Name       string `json:"name"`
	Status     string `json:"status"`
	Conclusion string `json:"conclusion,omitempty"`
	URL        string `json:"url,omitempty"`
}

// AttemptOutcome is how one attempt ended, as an agent sees it.
type AttemptOutcome struct {
	Number   int64            `json:"number"`
	State    job.AttemptState `json:"state"`
	Reason   job.Reason       `json:"reason,omitempty"`
	ExitCode *int             `json:"exit_code,omitempty"`
	Message  string           `json:"message,omitempty"`
	Summary  string           `json:"summary,omitempty"` // its delivery
}

// ResumeSpec tells a runner that the job continues a conversation: its agent
// asked, and a person's approved answer queued it again. A runner that can
// resume Session (SameRunner: it ran that attempt and may still have its
// worktree) does so and passes the newest answer; otherwise it starts a fresh
// session with History in the prompt. The job's head is the work published
// so far either way.
type ResumeSpec struct {
	Attempt    int64  `json:"attempt"`           // number of the attempt that asked
	Session    string `json:"session,omitempty"` // its agent session id, if it reported one
	SameRunner bool   `json:"same_runner,omitempty"`
	// History is every question with an approved answer, oldest first.
	History []QuestionView `json:"history"`
	Omitted int            `json:"omitted,omitempty"` // oldest questions left out (HistoryBudget)
}

// QuestionView is one question and its answer as the API shows it.
type QuestionView struct {
	ID        string     `json:"id"`
	Job       string     `json:"job"`
	Attempt   int64      `json:"attempt"` // number of the attempt that asked
	Question  string     `json:"question"`
	Choices   []string   `json:"choices,omitempty"`
	AskedAt   time.Time  `json:"asked_at"`
	ExpiresAt *time.Time `json:"expires_at,omitempty"`
	Requester string     `json:"requester,omitempty"` // in GET /questions
	Answer    *Answer    `json:"answer,omitempty"`
}

// Answer is a person's answer. Another user's answer is stored unapproved
// and reaches the agent only once the job's requester approves it.
type Answer struct {
	Text       string     `json:"text"`
	Choice     int        `json:"choice,omitempty"` // 1-based index into the choices; 0 for free text
	By         string     `json:"by"`
	AnsweredAt time.Time  `json:"answered_at"`
	Approved   bool       `json:"approved"`
	ApprovedBy string     `json:"approved_by,omitempty"`
	ApprovedAt *time.Time `json:"approved_at,omitempty"`
}

// AwaitsApproval reports whether the question has an answer its job's
// requester has not approved yet.
func (q QuestionView) AwaitsApproval() bool { return q.Answer != nil && !q.Answer.Approved }

// FitHistory keeps the newest questions whose JSON fits in budget bytes and
// returns them with the number left out.
func FitHistory(qs []QuestionView, budget int) ([]QuestionView, int) {
	total := 0
	for i := len(qs) - 1; i >= 0; i-- {
		b, err := json.Marshal(qs[i])
		if err != nil || total+len(b) > budget {
			return qs[i+1:], i + 1
		}
		total += len(b)
	}
	return qs, 0
}
