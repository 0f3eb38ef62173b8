package apitypes

import "time"

// GroupRequest starts a group of attempts (POST /groups): N sibling jobs
// on one base commit, each followed by Verify in its own sandbox
// (internal/attemptgroup; a group is a pipeline run).
type GroupRequest struct {
	Project string `json:"project"`
	Base    string `json:"base"`
	Prompt  string `json:"prompt"`
	// Attempts is how many; 0 is one per entry of Agents.
	Attempts int `json:"attempts,omitempty"`
	// Agents are the attempts' agents, one per attempt, each AGENT or
	// AGENT:ACCOUNT (native:ACCOUNT); Agent is every attempt's when
	// Agents is empty.
	Agents []string `json:"agents,omitempty"`
	Agent  string   `json:"agent,omitempty"`
	Model  string   `json:"model,omitempty"`
	// Verify is a shell command run at each attempt's commit, in its own
	// exec job; empty for none.
	Verify string `json:"verify,omitempty"`
	// Key makes the start idempotent, as a pipeline's.
	Key string `json:"key,omitempty"`
	// Judge is an agent, AGENT or AGENT:ACCOUNT, that ranks the attempts
	// once they and their verify ended: in observe mode, given each
	// attempt's diff and verify result, it delivers a GroupVerdict. It
	// ranks; it picks nothing unless PickByJudge.
	Judge string `json:"judge,omitempty"`
	// PickByJudge picks the attempt the judge ranked first, as drover pick
	// does, when the verdict is valid and that attempt's verify passed.
	PickByJudge bool `json:"pick_by_judge,omitempty"`
}

// GroupVerdict is what a group's judge delivers, as its summary: every
// attempt once, by name (attempt-1 to attempt-N), best first, each with a
// short reason. Anything else is an invalid verdict, never trusted.
type GroupVerdict struct {
	Ranking []GroupRank `json:"ranking"`
}

// GroupRank is one attempt's place in a verdict.
type GroupRank struct {
	Attempt string `json:"attempt"`
	Reason  string `json:"reason"`
}

// GroupJudge is a group's judge and its verdict.
type GroupJudge struct {
	Agent   string `json:"agent"`
	Account string `json:"account,omitempty"`
	// State is the judge step's: pending, running, done, failed,
	// unknown, needs_human.
	State   string  `json:"state"`
	Reason  string  `json:"reason,omitempty"`
	Job     string  `json:"job,omitempty"`
	Tokens  int64   `json:"tokens"`
	CostUSD float64 `json:"cost_usd"`
	// Verdict is valid or invalid once the judge delivered ("" before);
	// Invalid says why one is not trusted. Ranking is a valid one's, best
	// first; its reasons are the judge's text, untrusted.
	Verdict string        `json:"verdict,omitempty"`
	Invalid string        `json:"invalid,omitempty"`
	Ranking []GroupRanked `json:"ranking,omitempty"`
	// PickByJudge: the group picks what the judge ranked first; Pick says
	// what came of it once the group settled.
	PickByJudge bool   `json:"pick_by_judge,omitempty"`
	Pick        string `json:"pick,omitempty"`
}

// GroupRanked is an attempt in a valid verdict's ranking.
type GroupRanked struct {
	Attempt int    `json:"attempt"` // its number, from 1
	Reason  string `json:"reason"`
}

// GroupPickRequest makes one attempt the group's result
// (POST /groups/{id}/pick).
type GroupPickRequest struct {
	Attempt int `json:"attempt"`
}

// GroupView is a group and its attempts side by side (GET /groups/{id}).
type GroupView struct {
	ID        string    `json:"id"` // the pipeline run's id
	Project   string    `json:"project"`
	Base      string    `json:"base"`
	Requester string    `json:"requester"`
	State     string    `json:"state"` // the pipeline's: running, done, needs_human, failed, cancelled
	Reason    string    `json:"reason,omitempty"`
	Verify    string    `json:"verify,omitempty"`
	CreatedAt time.Time `json:"created_at"`
	CostUSD   float64   `json:"cost_usd"`
	Tokens    int64     `json:"tokens"`
	// Picked is the attempt picked as the group's result (0: none yet);
	// Result is its commit, at Ref (refs/drover/groups/ID) in the
	// project's repository on the hub.
	Picked      int              `json:"picked,omitempty"`
	Result      string           `json:"result,omitempty"`
	Ref         string           `json:"ref,omitempty"`
	Publication *PublicationView `json:"publication,omitempty"`
	Attempts    []GroupAttempt   `json:"attempts"`
	// Judge is the group's judge, when it has one.
	Judge *GroupJudge `json:"judge,omitempty"`
}

// GroupAttempt is one attempt of a group.
type GroupAttempt struct {
	Number  int    `json:"number"` // from 1
	Agent   string `json:"agent"`
	Account string `json:"account,omitempty"`
	Job     string `json:"job,omitempty"`
	// State is the attempt step's: pending, running, done, failed,
	// needs_human, unknown, skipped.
	State  string `json:"state"`
	Reason string `json:"reason,omitempty"`
	Commit string `json:"commit,omitempty"`
	// Verify is passed, failed, running, pending, skipped, or none (the
	// group has no verify command); VerifyJob its job.
	Verify        string  `json:"verify"`
	VerifyJob     string  `json:"verify_job,omitempty"`
	Files         int     `json:"files"`
	Added         int     `json:"added"`
	Deleted       int     `json:"deleted"`
	Tokens        int64   `json:"tokens"`
	CostUSD       float64 `json:"cost_usd"`
	WallSeconds   float64 `json:"wall_seconds"`
	Diff          string  `json:"diff,omitempty"`
	DiffTruncated bool    `json:"diff_truncated,omitempty"`
}
