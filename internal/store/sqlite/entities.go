package sqlite

import (
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"time"

	"drover/internal/job"
	"drover/internal/store"
)

// Each entity has a table, an args function giving its columns in table
// order, and a scan function reading them back in the same order.

var users = newTable("users", "id", "name", "admin", "created_at", "removed_at")

func userArgs(u store.User) []any {
	return []any{u.ID, u.Name, u.Admin, millis(u.CreatedAt), optMillis(u.RemovedAt)}
}

func scanUser(s scanner) (u store.User, err error) {
	err = s.Scan(&u.ID, &u.Name, &u.Admin, timeCol{&u.CreatedAt}, optTimeCol{&u.RemovedAt})
	return u, err
}

func (t *tx) InsertUser(u store.User) error { return t.insert(users, "user "+u.ID, userArgs(u)) }

// UpdateUser sets the user's name, admin flag and removal; the creation
// time stays.
func (t *tx) UpdateUser(u store.User) error {
	what := "update user " + u.ID
	res, err := t.exec(what, `UPDATE users SET name = ?, admin = ?, removed_at = ? WHERE id = ?`,
		u.Name, u.Admin, optMillis(u.RemovedAt), u.ID)
	if err != nil {
		return err
	}
	return affected(what, res)
}

// Users lists every user by name, removed ones included.
func (t *tx) Users() ([]store.User, error) {
	return all(t, "users", scanUser, users.query("ORDER BY name"))
}

func (t *tx) User(id string) (store.User, error) {
	return one(t, "user "+id, scanUser, users.query("WHERE id = ?"), id)
}

func (t *tx) UserByName(name string) (store.User, error) {
	return one(t, "user named "+name, scanUser, users.query("WHERE name = ?"), name)
}

var tokens = newTable("tokens", "hash", "kind", "owner_id", "created_at", "revoked_at")

func tokenArgs(k store.Token) []any {
	return []any{k.Hash, k.Kind, k.OwnerID, millis(k.CreatedAt), optMillis(k.RevokedAt)}
}

func scanToken(s scanner) (k store.Token, err error) {
	err = s.Scan(&k.Hash, &k.Kind, &k.OwnerID, timeCol{&k.CreatedAt}, optTimeCol{&k.RevokedAt})
	return k, err
}

// Token errors name only a prefix of the hash: enough to debug, too little
// to matter if logged.
func tokenWhat(hash string) string { return "token " + hash[:min(len(hash), 8)] }

func (t *tx) InsertToken(k store.Token) error {
	return t.insert(tokens, tokenWhat(k.Hash), tokenArgs(k))
}

func (t *tx) Token(hash string) (store.Token, error) {
	return one(t, tokenWhat(hash), scanToken, tokens.query("WHERE hash = ?"), hash)
}

// RevokeTokens revokes the owner's live tokens; an earlier revocation time
// is kept.
func (t *tx) RevokeTokens(kind store.TokenKind, ownerID string, at time.Time) error {
	_, err := t.exec("revoke "+string(kind)+" tokens of "+ownerID,
		`UPDATE tokens SET revoked_at = ? WHERE kind = ? AND owner_id = ? AND revoked_at IS NULL`,
		millis(at), kind, ownerID)
	return err
}

// RevokeToken revokes one live token.
func (t *tx) RevokeToken(hash string, at time.Time) error {
	res, err := t.exec("revoke "+tokenWhat(hash),
		`UPDATE tokens SET revoked_at = ? WHERE hash = ? AND revoked_at IS NULL`, millis(at), hash)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return fmt.Errorf("%s: %w", tokenWhat(hash), store.ErrNotFound)
	}
	return nil
}

var runners = newTable("runners",
	"id", "name", "owner_id", "token_hash", "slots", "labels", "created_at", "last_seen", "revoked_at", "access")

// defaultAccess is protocol.AccessPrivate, also the column's default: a
// runner nobody opened stays its owner's.
const defaultAccess = "private"

func access(a string) string {
	if a == "" {
		return defaultAccess
	}
	return a
}

func runnerArgs(r store.Runner) []any {
	return []any{r.ID, r.Name, r.OwnerID, r.TokenHash, r.Slots, jsonArg{r.Labels},
		millis(r.CreatedAt), optMillis(r.LastSeen), optMillis(r.RevokedAt), access(r.Access)}
}

func scanRunner(s scanner) (r store.Runner, err error) {
	err = s.Scan(&r.ID, &r.Name, &r.OwnerID, &r.TokenHash, &r.Slots, jsonCol{&r.Labels},
		timeCol{&r.CreatedAt}, optTimeCol{&r.LastSeen}, optTimeCol{&r.RevokedAt}, &r.Access)
	r.Access = access(r.Access)
	return r, err
}

func (t *tx) InsertRunner(r store.Runner) error {
	return t.insert(runners, "runner "+r.ID, runnerArgs(r))
}

func (t *tx) UpdateRunner(r store.Runner) error {
	return t.update(runners, "runner "+r.ID, runnerArgs(r))
}

func (t *tx) Runner(id string) (store.Runner, error) {
	return one(t, "runner "+id, scanRunner, runners.query("WHERE id = ?"), id)
}

func (t *tx) RunnerByName(name string) (store.Runner, error) {
	return one(t, "runner named "+name, scanRunner, runners.query("WHERE name = ?"), name)
}

// Runners lists all runners by name.
func (t *tx) Runners() ([]store.Runner, error) {
	return all(t, "runners", scanRunner, runners.query("ORDER BY name"))
}

var jobs = newTable("jobs",
	"id", "state", "agent", "args", "labels", "requester_id", "key", "epoch", "attempt_id",
	"cancelling", "reason", "exit_code", "log_cap", "created_at", "updated_at", "finished_at",
	"project", "base", "head", "mode", "repo_url", "checkpoints", "tools", "resume_attempt", "account", "network", "model", "fallback")

func jobArgs(j store.Job) []any {
	return []any{j.ID, j.State, j.Agent, jsonArg{j.Args}, jsonArg{j.Labels}, j.RequesterID, j.Key, j.Epoch,
		j.AttemptID, j.Cancelling, j.Reason, optInt(j.ExitCode), j.LogCap,
		millis(j.CreatedAt), millis(j.UpdatedAt), optMillis(j.FinishedAt),
		j.Project, j.Base, j.Head, j.Mode, j.RepoURL, j.Checkpoints, j.Tools, j.ResumeAttempt, j.Account, jsonArg{j.Network}, j.Model, j.Fallback}
}

func scanJob(s scanner) (j store.Job, err error) {
	err = s.Scan(&j.ID, &j.State, &j.Agent, jsonCol{&j.Args}, jsonCol{&j.Labels}, &j.RequesterID, &j.Key,
		&j.Epoch, &j.AttemptID, &j.Cancelling, &j.Reason, optIntCol{&j.ExitCode}, &j.LogCap,
		timeCol{&j.CreatedAt}, timeCol{&j.UpdatedAt}, optTimeCol{&j.FinishedAt},
		&j.Project, &j.Base, &j.Head, &j.Mode, &j.RepoURL, &j.Checkpoints, &j.Tools, &j.ResumeAttempt, &j.Account,
		jsonCol{&j.Network}, &j.Model, &j.Fallback)
	return j, err
}

const (
	defaultJobLimit = 100
	maxJobLimit     = 1000
)

func (t *tx) InsertJob(j store.Job) error { return t.insert(jobs, "job "+j.ID, jobArgs(j)) }

func (t *tx) UpdateJob(j store.Job) error { return t.update(jobs, "job "+j.ID, jobArgs(j)) }

func (t *tx) Job(id string) (store.Job, error) {
	return one(t, "job "+id, scanJob, jobs.query("WHERE id = ?"), id)
}

func (t *tx) JobByKey(requesterID, key string) (store.Job, error) {
	return one(t, "job with key "+key+" of "+requesterID, scanJob,
		jobs.query("WHERE requester_id = ? AND key = ? AND key != ''"), requesterID, key)
}

// Jobs lists jobs newest first: by default 100, at most 1000.
func (t *tx) Jobs(f store.JobFilter) ([]store.Job, error) {
	q, args := jobsQuery(f)
	return all(t, "jobs", scanJob, q, args...)
}

// jobsQuery builds the statement of Jobs (apart, so a test can check its
// query plan).
func jobsQuery(f store.JobFilter) (string, []any) {
	var where []string
	var args []any
	if f.State != "" {
		where, args = append(where, "state = ?"), append(args, f.State)
	}
	if f.RequesterID != "" {
		where, args = append(where, "requester_id = ?"), append(args, f.RequesterID)
	}
	limit := f.Limit
	if limit <= 0 {
		limit = defaultJobLimit
	}
	limit = min(limit, maxJobLimit)
	const newest = " ORDER BY created_at DESC, id DESC LIMIT ?"
	if f.VisibleTo == "" {
		q := ""
		if len(where) > 0 {
			q = "WHERE " + strings.Join(where, " AND ")
		}
		return jobs.query(q + newest), append(args, limit)
	}
	// One arm per way of seeing a job, each through its own index. The
	// newest n of the union are among the newest n of each arm, so each arm
	// is filtered and limited alone and only their union is sorted again.
	// Unary + keeps the other filters off the indexes: a state index would
	// take an arm through every job in that state.
	var arms []string
	var armArgs []any
	for _, way := range visibleWays {
		cond := way
		for _, w := range where {
			cond += " AND +" + w
		}
		arms = append(arms, "SELECT id FROM (SELECT id FROM jobs WHERE "+cond+newest+")")
		armArgs = append(append(append(armArgs, f.VisibleTo), args...), limit)
	}
	return jobs.query("WHERE id IN (" + strings.Join(arms, " UNION ") + ")" + newest), append(armArgs, limit)
}

// ActiveJobsOf lists the requester's jobs that have not ended, oldest first.
func (t *tx) ActiveJobsOf(requesterID string) ([]store.Job, error) {
	return all(t, "active jobs of "+requesterID, scanJob,
		jobs.query("WHERE requester_id = ? AND state IN (?, ?, ?, ?) ORDER BY created_at, id"),
		requesterID, job.Queued, job.Offered, job.Running, job.Waiting)
}

// QueuedJobs lists queued jobs oldest first; limit <= 0 means all.
func (t *tx) QueuedJobs(limit int) ([]store.Job, error) {
	return all(t, "queued jobs", scanJob, jobs.query("WHERE state = ? ORDER BY created_at, id LIMIT ?"),
		job.Queued, noLimit(limit))
}

// JobCounts counts the jobs in each state.
func (t *tx) JobCounts() (map[job.State]int64, error) {
	type count struct {
		state job.State
		n     int64
	}
	cs, err := all(t, "job counts", func(s scanner) (c count, err error) {
		err = s.Scan(&c.state, &c.n)
		return c, err
	}, `SELECT state, COUNT(*) FROM jobs GROUP BY state`)
	if err != nil {
		return nil, err
	}
	out := make(map[job.State]int64, len(cs))
	for _, c := range cs {
		out[c.state] = c.n
	}
	return out, nil
}

// QueuedHeads skips from shape to shape along the partial index
// jobs_queue_shape (state 'queued' written out so the index applies), one
// seek a shape, then reads each shape's oldest jobs: its cost follows the
// number of shapes, not of queued jobs.
func (t *tx) QueuedHeads(perShape int) ([]store.Job, error) {
	if perShape <= 0 {
		perShape = math.MaxInt32
	}
	// INDEXED BY: without statistics SQLite may take jobs_state and sort.
	const next = `SELECT queue_shape FROM jobs INDEXED BY jobs_queue_shape
		WHERE state = 'queued' AND queue_shape > ? ORDER BY queue_shape LIMIT 1`
	heads := jobs.query(`INDEXED BY jobs_queue_shape WHERE state = 'queued' AND queue_shape = ? ORDER BY created_at, id LIMIT ?`)
	var out []store.Job
	shape := ""
	for {
		err := t.tx.QueryRowContext(t.ctx, next, shape).Scan(&shape)
		if errors.Is(err, sql.ErrNoRows) {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("next shape of queued jobs: %w", err)
		}
		js, err := all(t, "queued jobs of one shape", scanJob, heads, shape, perShape)
		if err != nil {
			return nil, err
		}
		out = append(out, js...)
	}
	slices.SortFunc(out, func(a, b store.Job) int {
		if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
			return c
		}
		return strings.Compare(a.ID, b.ID)
	})
	return out, nil
}

func (t *tx) ActiveByRequester() (map[string]int, error) {
	rows, err := t.tx.QueryContext(t.ctx, `SELECT requester_id, COUNT(*) FROM jobs WHERE state IN (?, ?) GROUP BY requester_id`,
		job.Offered, job.Running)
	if err != nil {
		return nil, fmt.Errorf("count active jobs by requester: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var id string
		var n int
		if err := rows.Scan(&id, &n); err != nil {
			return nil, fmt.Errorf("count active jobs by requester: %w", err)
		}
		out[id] = n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count active jobs by requester: %w", err)
	}
	return out, nil
}

var attempts = newTable("attempts",
	"id", "job_id", "epoch", "runner_id", "state", "reason", "exit_code", "message",
	"offered_at", "accepted_at", "finished_at", "lease_until", "log_size", "log_sha256", "isolation",
	"session", "summary", "usage")

func attemptArgs(a store.Attempt) []any {
	return []any{a.ID, a.JobID, a.Epoch, a.RunnerID, a.State, a.Reason, optInt(a.ExitCode), a.Message,
		millis(a.OfferedAt), optMillis(a.AcceptedAt), optMillis(a.FinishedAt), millis(a.LeaseUntil),
		a.LogSize, a.LogSHA256, a.Isolation, a.Session, a.Summary, a.Usage}
}

func scanAttempt(s scanner) (a store.Attempt, err error) {
	err = s.Scan(&a.ID, &a.JobID, &a.Epoch, &a.RunnerID, &a.State, &a.Reason, optIntCol{&a.ExitCode}, &a.Message,
		timeCol{&a.OfferedAt}, optTimeCol{&a.AcceptedAt}, optTimeCol{&a.FinishedAt}, timeCol{&a.LeaseUntil},
		&a.LogSize, &a.LogSHA256, &a.Isolation, &a.Session, &a.Summary, &a.Usage)
	return a, err
}

// activeState selects offered and running attempts (job.AttemptState.Active);
// it takes the two states as its first arguments.
const activeState = "state IN (?, ?)"

func activeArgs(more ...any) []any {
	return append([]any{job.AttemptOffered, job.AttemptRunning}, more...)
}

func (t *tx) InsertAttempt(a store.Attempt) error {
	return t.insert(attempts, "attempt "+a.ID, attemptArgs(a))
}

func (t *tx) UpdateAttempt(a store.Attempt) error {
	return t.update(attempts, "attempt "+a.ID, attemptArgs(a))
}

func (t *tx) Attempt(id string) (store.Attempt, error) {
	return one(t, "attempt "+id, scanAttempt, attempts.query("WHERE id = ?"), id)
}

func (t *tx) Attempts(jobID string) ([]store.Attempt, error) {
	return all(t, "attempts of job "+jobID, scanAttempt, attempts.query("WHERE job_id = ? ORDER BY epoch"), jobID)
}

func (t *tx) ActiveAttempts() ([]store.Attempt, error) {
	return all(t, "active attempts", scanAttempt,
		attempts.query("WHERE "+activeState+" ORDER BY offered_at, id"), activeArgs()...)
}

func (t *tx) RunnerActiveAttempts(runnerID string) ([]store.Attempt, error) {
	return all(t, "active attempts of runner "+runnerID, scanAttempt,
		attempts.query("WHERE "+activeState+" AND runner_id = ? ORDER BY offered_at, id"), activeArgs(runnerID)...)
}

func (t *tx) ExpiredAttempts(now time.Time) ([]store.Attempt, error) {
	return all(t, "expired attempts", scanAttempt,
		attempts.query("WHERE "+activeState+" AND lease_until < ? ORDER BY lease_until, id"),
		activeArgs(millis(now))...)
}

// ExtendLeases moves the leases of a runner's active attempts to until,
// never earlier than they already are.
func (t *tx) ExtendLeases(runnerID string, until time.Time) error {
	ms := millis(until)
	_, err := t.exec("extend leases of runner "+runnerID,
		"UPDATE attempts SET lease_until = ? WHERE "+activeState+" AND runner_id = ? AND lease_until < ?",
		append([]any{ms}, activeArgs(runnerID, ms)...)...)
	return err
}

func (t *tx) ExtendAllLeases(until time.Time) error {
	ms := millis(until)
	_, err := t.exec("extend all leases",
		"UPDATE attempts SET lease_until = ? WHERE "+activeState+" AND lease_until < ?",
		append([]any{ms}, activeArgs(ms)...)...)
	return err
}

var projects = newTable("projects", "name", "owner_id", "remote", "created_at", "updated_at", "config")

func scanProject(s scanner) (p store.Project, err error) {
	err = s.Scan(&p.Name, &p.OwnerID, &p.Remote, timeCol{&p.CreatedAt}, timeCol{&p.UpdatedAt}, jsonCol{&p.Config})
	return p, err
}

// SetProjectConfig replaces a project's config.
func (t *tx) SetProjectConfig(name string, c store.ProjectConfig, at time.Time) error {
	res, err := t.exec("set config of project "+name,
		`UPDATE projects SET config = ?, updated_at = ? WHERE name = ?`, jsonArg{c}, millis(at), name)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return fmt.Errorf("set config of project %s: %w", name, err)
	} else if n == 0 {
		return fmt.Errorf("set config of project %s: %w", name, store.ErrNotFound)
	}
	return nil
}

// PutProject inserts the project or replaces its remote, keeping the time
// it was first created, its config and its owner: the first one given (a remap by an
// admin does not take a project from its pusher). The owner becomes a
// member with it.
func (t *tx) PutProject(p store.Project) error {
	what := "put project " + p.Name
	if _, err := t.exec(what,
		`INSERT INTO projects (name, owner_id, remote, created_at, updated_at) VALUES (?, ?, ?, ?, ?)
		ON CONFLICT (name) DO UPDATE SET remote = excluded.remote, updated_at = excluded.updated_at,
			owner_id = CASE WHEN owner_id = '' THEN excluded.owner_id ELSE owner_id END`,
		p.Name, p.OwnerID, p.Remote, millis(p.CreatedAt), millis(p.UpdatedAt)); err != nil {
		return err
	}
	if p.OwnerID == "" {
		return nil
	}
	// Only the stored owner: a put naming another owner changed nothing.
	_, err := t.exec(what+": add its owner as a member",
		`INSERT INTO project_members (project, user_id, created_at)
		SELECT name, owner_id, ? FROM projects WHERE name = ? AND owner_id = ?
		ON CONFLICT DO NOTHING`,
		millis(p.UpdatedAt), p.Name, p.OwnerID)
	return err
}

func (t *tx) Project(name string) (store.Project, error) {
	return one(t, "project "+name, scanProject, projects.query("WHERE name = ?"), name)
}

func (t *tx) Projects() ([]store.Project, error) {
	return all(t, "projects", scanProject, projects.query("ORDER BY name"))
}

func (t *tx) InsertContextFile(jobID string, f store.ContextFile) error {
	data := f.Data
	if data == nil {
		data = []byte{} // the column is NOT NULL; nil would bind as NULL
	}
	_, err := t.exec("insert context file "+f.Name+" of job "+jobID,
		`INSERT INTO context_files (job_id, name, size, data) VALUES (?, ?, ?, ?)`,
		jobID, f.Name, int64(len(data)), data)
	return err
}

func (t *tx) ContextFiles(jobID string, data bool) ([]store.ContextFile, error) {
	if !data {
		return all(t, "context files of job "+jobID, func(s scanner) (f store.ContextFile, err error) {
			err = s.Scan(&f.Name, &f.Size)
			return f, err
		}, `SELECT name, size FROM context_files WHERE job_id = ? ORDER BY name`, jobID)
	}
	return all(t, "context files of job "+jobID, func(s scanner) (f store.ContextFile, err error) {
		err = s.Scan(&f.Name, &f.Size, &f.Data)
		if err == nil && f.Data == nil {
			f.Data = []byte{}
		}
		return f, err
	}, `SELECT name, size, data FROM context_files WHERE job_id = ? ORDER BY name`, jobID)
}
