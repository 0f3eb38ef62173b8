package sqlstore

import (
	"fmt"
	"slices"
	"strings"

	"drover/internal/store"
)

// Table is an entity table whose first column is its primary key and whose
// rows are written whole, so that inserts, updates and selects of one
// entity share one column list.
type Table struct {
	Name string
	Cols []string
}

// List is the columns comma-separated, for a SELECT.
func (t Table) List() string { return strings.Join(t.Cols, ", ") }

var Users = Table{"users", []string{"id", "name", "admin", "created_at", "removed_at"}}

func UserArgs(u store.User) []any {
	return []any{u.ID, u.Name, u.Admin, Millis(u.CreatedAt), OptMillis(u.RemovedAt)}
}

func ScanUser(s Scanner) (u store.User, err error) {
	err = s.Scan(&u.ID, &u.Name, &u.Admin, TimeCol{&u.CreatedAt}, OptTimeCol{&u.RemovedAt})
	return u, err
}

var Tokens = Table{"tokens", []string{"hash", "kind", "owner_id", "created_at", "revoked_at"}}

func TokenArgs(k store.Token) []any {
	return []any{k.Hash, string(k.Kind), k.OwnerID, Millis(k.CreatedAt), OptMillis(k.RevokedAt)}
}

func ScanToken(s Scanner) (k store.Token, err error) {
	err = s.Scan(&k.Hash, &k.Kind, &k.OwnerID, TimeCol{&k.CreatedAt}, OptTimeCol{&k.RevokedAt})
	return k, err
}

// TokenWhat names a token in errors by a prefix of its hash only: enough
// to debug, too little to matter if logged.
func TokenWhat(hash string) string { return "token " + hash[:min(len(hash), 8)] }

var Runners = Table{"runners", []string{
	"id", "name", "owner_id", "token_hash", "slots", "labels", "created_at", "last_seen", "revoked_at", "access", "version"}}

// DefaultAccess is protocol.AccessPrivate, also the column's default: a
// runner nobody opened stays its owner's.
const DefaultAccess = "private"

func access(a string) string {
	if a == "" {
		return DefaultAccess
	}
	return a
}

func RunnerArgs(r store.Runner) []any {
	return []any{r.ID, r.Name, r.OwnerID, r.TokenHash, r.Slots, JSONArg{r.Labels},
		Millis(r.CreatedAt), OptMillis(r.LastSeen), OptMillis(r.RevokedAt), access(r.Access), r.Version}
}

func ScanRunner(s Scanner) (r store.Runner, err error) {
	err = s.Scan(&r.ID, &r.Name, &r.OwnerID, &r.TokenHash, &r.Slots, JSONCol{&r.Labels},
		TimeCol{&r.CreatedAt}, OptTimeCol{&r.LastSeen}, OptTimeCol{&r.RevokedAt}, &r.Access, &r.Version)
	r.Access = access(r.Access)
	return r, err
}

var Jobs = Table{"jobs", []string{
	"id", "state", "agent", "args", "labels", "requester_id", "key", "epoch", "attempt_id",
	"cancelling", "reason", "exit_code", "log_cap", "created_at", "updated_at", "finished_at",
	"project", "base", "head", "mode", "repo_url", "checkpoints", "tools", "resume_attempt", "account", "network", "model", "fallback", "sparse", "image"}}

func JobArgs(j store.Job) []any {
	return []any{j.ID, string(j.State), j.Agent, JSONArg{j.Args}, JSONArg{j.Labels}, j.RequesterID, j.Key, j.Epoch,
		j.AttemptID, j.Cancelling, string(j.Reason), OptInt(j.ExitCode), j.LogCap,
		Millis(j.CreatedAt), Millis(j.UpdatedAt), OptMillis(j.FinishedAt),
		j.Project, j.Base, j.Head, j.Mode, j.RepoURL, j.Checkpoints, j.Tools, j.ResumeAttempt, j.Account, JSONArg{j.Network}, j.Model, j.Fallback, JSONArg{j.Sparse}, j.Image}
}

func ScanJob(s Scanner) (j store.Job, err error) {
	err = s.Scan(&j.ID, &j.State, &j.Agent, JSONCol{&j.Args}, JSONCol{&j.Labels}, &j.RequesterID, &j.Key,
		&j.Epoch, &j.AttemptID, &j.Cancelling, &j.Reason, OptIntCol{&j.ExitCode}, &j.LogCap,
		TimeCol{&j.CreatedAt}, TimeCol{&j.UpdatedAt}, OptTimeCol{&j.FinishedAt},
		&j.Project, &j.Base, &j.Head, &j.Mode, &j.RepoURL, &j.Checkpoints, &j.Tools, &j.ResumeAttempt, &j.Account,
		JSONCol{&j.Network}, &j.Model, &j.Fallback, JSONCol{&j.Sparse}, &j.Image)
	return j, err
}

const (
	defaultJobLimit = 100
	maxJobLimit     = 1000
)

// JobLimit is how many jobs a JobFilter's Limit lists: by default 100, at
// most 1000.
func JobLimit(limit int) int {
	if limit <= 0 {
		limit = defaultJobLimit
	}
	return min(limit, maxJobLimit)
}

// SortOldestFirst orders jobs by creation, the id breaking ties (the
// queue's FIFO order).
func SortOldestFirst(js []store.Job) {
	slices.SortFunc(js, func(a, b store.Job) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
}

var Attempts = Table{"attempts", []string{
	"id", "job_id", "epoch", "runner_id", "state", "reason", "exit_code", "message",
	"offered_at", "accepted_at", "finished_at", "lease_until", "log_size", "log_sha256", "isolation",
	"session", "summary", "usage", "account"}}

func AttemptArgs(a store.Attempt) []any {
	return []any{a.ID, a.JobID, a.Epoch, a.RunnerID, string(a.State), string(a.Reason), OptInt(a.ExitCode), a.Message,
		Millis(a.OfferedAt), OptMillis(a.AcceptedAt), OptMillis(a.FinishedAt), Millis(a.LeaseUntil),
		a.LogSize, a.LogSHA256, a.Isolation, a.Session, a.Summary, a.Usage, a.Account}
}

func ScanAttempt(s Scanner) (a store.Attempt, err error) {
	err = s.Scan(&a.ID, &a.JobID, &a.Epoch, &a.RunnerID, &a.State, &a.Reason, OptIntCol{&a.ExitCode}, &a.Message,
		TimeCol{&a.OfferedAt}, OptTimeCol{&a.AcceptedAt}, OptTimeCol{&a.FinishedAt}, TimeCol{&a.LeaseUntil},
		&a.LogSize, &a.LogSHA256, &a.Isolation, &a.Session, &a.Summary, &a.Usage, &a.Account)
	return a, err
}

var Projects = Table{"projects", []string{"name", "owner_id", "remote", "created_at", "updated_at", "config"}}

func ScanProject(s Scanner) (p store.Project, err error) {
	err = s.Scan(&p.Name, &p.OwnerID, &p.Remote, TimeCol{&p.CreatedAt}, TimeCol{&p.UpdatedAt}, JSONCol{&p.Config})
	return p, err
}

var Accounts = Table{"accounts", []string{
	"runner_id", "id", "owner_id", "agent", "label", "kind", "state", "limited_until", "rank", "updated_at"}}

func ScanAccount(s Scanner) (a store.Account, err error) {
	err = s.Scan(&a.RunnerID, &a.ID, &a.OwnerID, &a.Agent, &a.Label, &a.Kind, &a.State,
		OptTimeCol{&a.LimitedUntil}, &a.Rank, TimeCol{&a.UpdatedAt})
	return a, err
}

var Questions = Table{"questions", []string{
	"id", "job_id", "attempt_id", "text", "choices", "asked_at", "expires_at",
	"answer", "choice", "answered_by", "answered_at", "approved_by", "approved_at"}}

func QuestionArgs(q store.Question) []any {
	choices := q.Choices
	if choices == nil {
		choices = []string{} // JSON [] rather than null
	}
	return []any{q.ID, q.JobID, q.AttemptID, q.Text, JSONArg{choices}, Millis(q.AskedAt), OptMillis(q.ExpiresAt),
		q.Answer, OptInt(q.Choice), q.AnsweredBy, OptMillis(q.AnsweredAt), q.ApprovedBy, OptMillis(q.ApprovedAt)}
}

func ScanQuestion(s Scanner) (q store.Question, err error) {
	err = s.Scan(&q.ID, &q.JobID, &q.AttemptID, &q.Text, JSONCol{&q.Choices}, TimeCol{&q.AskedAt}, OptTimeCol{&q.ExpiresAt},
		&q.Answer, OptIntCol{&q.Choice}, &q.AnsweredBy, OptTimeCol{&q.AnsweredAt}, &q.ApprovedBy, OptTimeCol{&q.ApprovedAt})
	return q, err
}

// ShareCols are a share's columns, for a SELECT scanned by ScanShare.
const ShareCols = "runner_id, account_id, kind, subject, created_at, accepted_at"

func ScanShare(s Scanner) (sh store.Share, err error) {
	err = s.Scan(&sh.RunnerID, &sh.AccountID, &sh.Kind, &sh.Subject, TimeCol{&sh.CreatedAt}, OptTimeCol{&sh.AcceptedAt})
	return sh, err
}

func ShareWhat(s store.Share) string {
	if s.AccountID != "" {
		return fmt.Sprintf("share of account %s of runner %s with %s %s", s.AccountID, s.RunnerID, s.Kind, s.Subject)
	}
	return fmt.Sprintf("share of runner %s with %s %s", s.RunnerID, s.Kind, s.Subject)
}

// EventCols are an event's columns, for a SELECT scanned by ScanEvent.
const EventCols = "seq, job_id, at, kind, actor, message, data"

func ScanEvent(s Scanner) (e store.Event, err error) {
	err = s.Scan(&e.Seq, &e.JobID, TimeCol{&e.At}, &e.Kind, &e.Actor, &e.Message, &e.Data)
	return e, err
}
