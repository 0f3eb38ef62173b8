package sqlstore

import (
	"database/sql"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"drover/internal/job"
	"drover/internal/store"
)

var users = newTable(Users)

func (t *tx) InsertUser(u store.User) error { return t.insert(users, "user "+u.ID, UserArgs(u)) }

// UpdateUser sets the user's name, admin flag and removal; the creation
// time stays; its runners get a new access version.
func (t *tx) UpdateUser(u store.User) error {
	what := "update user " + u.ID
	res, err := t.exec(what, `UPDATE users SET name = ?, admin = ?, removed_at = ? WHERE id = ?`,
		u.Name, u.Admin, OptMillis(u.RemovedAt), u.ID)
	if err != nil {
		return err
	}
	if err := affected(what, res); err != nil {
		return err
	}
	// Its runners' access names it and depends on its admin flag and removal.
	return t.stampAccess("the runners of "+u.ID, "owner_id = ?", u.ID)
}

// Users lists every user by name, removed ones included.
func (t *tx) Users() ([]store.User, error) {
	return all(t, "users", ScanUser, users.query("ORDER BY name"))
}

func (t *tx) User(id string) (store.User, error) {
	return one(t, "user "+id, ScanUser, users.query("WHERE id = ?"), id)
}

func (t *tx) UserByName(name string) (store.User, error) {
	return one(t, "user named "+name, ScanUser, users.query("WHERE name = ?"), name)
}

var tokens = newTable(Tokens)

func (t *tx) InsertToken(k store.Token) error {
	return t.insert(tokens, TokenWhat(k.Hash), TokenArgs(k))
}

func (t *tx) Token(hash string) (store.Token, error) {
	return one(t, TokenWhat(hash), ScanToken, tokens.query("WHERE hash = ?"), hash)
}

// RevokeTokens revokes the owner's live tokens; an earlier revocation time
// is kept.
func (t *tx) RevokeTokens(kind store.TokenKind, ownerID string, at time.Time) error {
	_, err := t.exec("revoke "+string(kind)+" tokens of "+ownerID,
		`UPDATE tokens SET revoked_at = ? WHERE kind = ? AND owner_id = ? AND revoked_at IS NULL`,
		Millis(at), kind, ownerID)
	return err
}

// RevokeToken revokes one live token.
func (t *tx) RevokeToken(hash string, at time.Time) error {
	res, err := t.exec("revoke "+TokenWhat(hash),
		`UPDATE tokens SET revoked_at = ? WHERE hash = ? AND revoked_at IS NULL`, Millis(at), hash)
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil || n == 0 {
		return fmt.Errorf("%s: %w", TokenWhat(hash), store.ErrNotFound)
	}
	return nil
}

var runners = newTable(Runners)

func (t *tx) InsertRunner(r store.Runner) error {
	return t.insert(runners, "runner "+r.ID, RunnerArgs(r))
}

func (t *tx) UpdateRunner(r store.Runner) error {
	return t.updateRow(runnerUpdate, "runner "+r.ID, RunnerArgs(r), r.OwnerID, r.Name, access(r.Access),
		r.TokenHash, r.RevokedAt != nil)
}

func (t *tx) Runner(id string) (store.Runner, error) {
	return one(t, "runner "+id, scanRunnerHeld, runnersHeld+"WHERE runners.id = ?", activeArgs(id)...)
}

func (t *tx) RunnerByName(name string) (store.Runner, error) {
	return one(t, "runner named "+name, scanRunnerHeld, runnersHeld+"WHERE runners.name = ?", activeArgs(name)...)
}

// Runners lists all runners by name.
func (t *tx) Runners() ([]store.Runner, error) {
	return all(t, "runners", scanRunnerHeld, runnersHeld+"ORDER BY runners.name", activeArgs()...)
}

func (t *tx) RunnerTokens() (map[string]string, error) {
	return stringMap(t, "runner tokens", `SELECT id, token_hash FROM runners WHERE revoked_at IS NULL`)
}

var jobs = newTable(Jobs)

func (t *tx) InsertJob(j store.Job) error {
	if err := t.insert(jobs, "job "+j.ID, JobArgs(j)); err != nil {
		return err
	}
	return t.noteJobState(j.ID, "", j.State, j.UpdatedAt)
}

func (t *tx) UpdateJob(j store.Job) error {
	if t.d.OneTrip {
		n, err := t.updateJobNoting("update job "+j.ID, jobUpdateNoting, JobArgs(j))
		if err == nil && n == 0 {
			err = fmt.Errorf("update job %s: %w", j.ID, store.ErrNotFound)
		}
		return err
	}
	old, hooks, err := t.jobStateIfHooks(j.ID)
	if err != nil {
		return err
	}
	if err := t.update(jobs, "job "+j.ID, JobArgs(j)); err != nil || !hooks {
		return err
	}
	return t.noteJobState(j.ID, old, j.State, j.UpdatedAt)
}

func (t *tx) Job(id string) (store.Job, error) {
	return one(t, "job "+id, ScanJob, jobs.query("WHERE id = ?"), id)
}

// ClaimQueued reads a queued job and, on an engine with row locks, locks
// its row, skipping it when another dispatcher's transaction holds it.
func (t *tx) ClaimQueued(id string) (store.Job, error) {
	return one(t, "queued job "+id, ScanJob, jobs.query("WHERE id = ? AND state = 'queued'"+t.d.SkipLocked), id)
}

// UpdateJobAt rewrites the job only while its stored epoch is still epoch:
// the check is in the UPDATE itself, so no other writer's offer can slip in.
func (t *tx) UpdateJobAt(j store.Job, epoch int64) error {
	args := JobArgs(j)
	if t.d.OneTrip {
		n, err := t.updateJobNoting("update job "+j.ID, jobUpdateAtNoting, append(args, epoch))
		if err == nil && n == 0 {
			err = fmt.Errorf("update job %s at epoch %d: %w: %w", j.ID, epoch, store.ErrConflict, store.ErrNotFound)
		}
		return err
	}
	old, hooks, err := t.jobStateIfHooks(j.ID)
	if err != nil {
		return err
	}
	res, err := t.exec("update job "+j.ID, jobs.update+" AND epoch = ?", append(args[1:len(args):len(args)], args[0], epoch)...)
	if err != nil {
		return err
	}
	if err := affected(fmt.Sprintf("update job %s at epoch %d", j.ID, epoch), res); err != nil {
		return fmt.Errorf("%w: %w", store.ErrConflict, err)
	}
	if !hooks {
		return nil
	}
	return t.noteJobState(j.ID, old, j.State, j.UpdatedAt)
}

func (t *tx) JobByKey(requesterID, key string) (store.Job, error) {
	return one(t, "job with key "+key+" of "+requesterID, ScanJob,
		jobs.query("WHERE requester_id = ? AND key = ? AND key != ''"), requesterID, key)
}

// Jobs lists jobs newest first: by default 100, at most 1000.
func (t *tx) Jobs(f store.JobFilter) ([]store.Job, error) {
	q, args := t.d.JobsQuery(f)
	return all(t, "jobs", ScanJob, q, args...)
}

// JobsQuery builds the statement of Jobs (apart, so a test can check its
// query plan).
func (d *Dialect) JobsQuery(f store.JobFilter) (string, []any) {
	var where []string
	var args []any
	if f.State != "" {
		where, args = append(where, "state = ?"), append(args, f.State)
	}
	if f.RequesterID != "" {
		where, args = append(where, "requester_id = ?"), append(args, f.RequesterID)
	}
	limit := JobLimit(f.Limit)
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
	// NoIndex keeps the other filters off the indexes: a state index would
	// take an arm through every job in that state.
	var arms []string
	var armArgs []any
	for _, way := range visibleWays {
		cond := way
		for _, w := range where {
			cond += " AND " + d.NoIndex + w
		}
		arms = append(arms, "SELECT id FROM (SELECT id FROM jobs WHERE "+cond+newest+") AS arm")
		armArgs = append(append(append(armArgs, f.VisibleTo), args...), limit)
	}
	return jobs.query("WHERE id IN (" + strings.Join(arms, " UNION ") + ")" + newest), append(armArgs, limit)
}

// ActiveJobsOf lists the requester's jobs that have not ended, oldest first.
func (t *tx) ActiveJobsOf(requesterID string) ([]store.Job, error) {
	return all(t, "active jobs of "+requesterID, ScanJob,
		jobs.query("WHERE requester_id = ? AND state IN (?, ?, ?, ?) ORDER BY created_at, id"),
		requesterID, job.Queued, job.Offered, job.Running, job.Waiting)
}

// QueuedJobs lists queued jobs oldest first; limit <= 0 means all.
func (t *tx) QueuedJobs(limit int) ([]store.Job, error) {
	return all(t, "queued jobs", ScanJob, jobs.query("WHERE state = ? ORDER BY created_at, id LIMIT ?"),
		job.Queued, noLimit(limit))
}

// JobCounts counts the jobs in each state.
func (t *tx) JobCounts() (map[job.State]int64, error) {
	type count struct {
		state job.State
		n     int64
	}
	cs, err := all(t, "job counts", func(s Scanner) (c count, err error) {
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
	perShape = allShape(perShape)
	if t.d.OneTrip {
		out, err := all(t, "queued jobs by shape", ScanJob, queuedHeadsAtOnce, perShape)
		if err != nil || len(out) == 0 {
			return nil, err // none is nil, as the skip's
		}
		SortOldestFirst(out)
		return out, nil
	}
	next := `SELECT queue_shape FROM jobs ` + t.d.QueueIndex + `
		WHERE state = 'queued' AND queue_shape > ? ORDER BY queue_shape LIMIT 1`
	heads := jobs.query(t.d.QueueIndex + ` WHERE state = 'queued' AND queue_shape = ? ORDER BY created_at, id LIMIT ?`)
	var out []store.Job
	shape := ""
	for {
		err := t.queryRow(next, shape).Scan(&shape)
		if errors.Is(err, sql.ErrNoRows) {
			break
		}
		if t.retryable(err); err != nil {
			return nil, fmt.Errorf("next shape of queued jobs: %w", err)
		}
		js, err := all(t, "queued jobs of one shape", ScanJob, heads, shape, perShape)
		if err != nil {
			return nil, err
		}
		out = append(out, js...)
	}
	SortOldestFirst(out)
	return out, nil
}

// allShape is QueuedHeads's perShape, every job of a shape for <= 0.
func allShape(perShape int) int {
	if perShape <= 0 {
		return math.MaxInt32
	}
	return perShape
}

func (t *tx) ActiveByRequester() (map[string]int, error) {
	rows, err := t.query(`SELECT requester_id, COUNT(*) FROM jobs WHERE state IN (?, ?) GROUP BY requester_id`,
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
		t.retryable(err)
		return nil, fmt.Errorf("count active jobs by requester: %w", err)
	}
	return out, nil
}

var attempts = newTable(Attempts)

// activeState selects offered and running attempts (job.AttemptState.Active);
// it takes the two states as its first arguments.
const activeState = "state IN (?, ?)"

func activeArgs(more ...any) []any {
	return append([]any{job.AttemptOffered, job.AttemptRunning}, more...)
}

func (t *tx) InsertAttempt(a store.Attempt) error {
	return t.insert(attempts, "attempt "+a.ID, AttemptArgs(a))
}

func (t *tx) UpdateAttempt(a store.Attempt) error {
	return t.update(attempts, "attempt "+a.ID, AttemptArgs(a))
}

func (t *tx) Attempt(id string) (store.Attempt, error) {
	return one(t, "attempt "+id, ScanAttempt, attempts.query("WHERE id = ?"), id)
}

func (t *tx) Attempts(jobID string) ([]store.Attempt, error) {
	return all(t, "attempts of job "+jobID, ScanAttempt, attempts.query("WHERE job_id = ? ORDER BY epoch"), jobID)
}

func (t *tx) ActiveAttempts() ([]store.Attempt, error) {
	return all(t, "active attempts", ScanAttempt,
		attempts.query("WHERE "+activeState+" ORDER BY offered_at, id"), activeArgs()...)
}

func (t *tx) RunnerActiveAttempts(runnerID string) ([]store.Attempt, error) {
	return all(t, "active attempts of runner "+runnerID, ScanAttempt,
		attempts.query("WHERE "+activeState+" AND runner_id = ? ORDER BY offered_at, id"), activeArgs(runnerID)...)
}

func (t *tx) ExpiredAttempts(now time.Time) ([]store.Attempt, error) {
	return all(t, "expired attempts", ScanAttempt,
		attempts.query("WHERE "+activeState+" AND lease_until < ? ORDER BY lease_until, id"),
		activeArgs(Millis(now))...)
}

// ExtendLeases moves the leases of a runner's active attempts to until,
// never earlier than they already are.
func (t *tx) ExtendLeases(runnerID string, until time.Time) error {
	ms := Millis(until)
	_, err := t.exec("extend leases of runner "+runnerID,
		"UPDATE attempts SET lease_until = ? WHERE "+activeState+" AND runner_id = ? AND lease_until < ?",
		append([]any{ms}, activeArgs(runnerID, ms)...)...)
	return err
}

var projects = newTable(Projects)

// SetProjectConfig replaces a project's config.
func (t *tx) SetProjectConfig(name string, c store.ProjectConfig, at time.Time) error {
	res, err := t.exec("set config of project "+name,
		`UPDATE projects SET config = ?, updated_at = ? WHERE name = ?`, JSONArg{V: c}, Millis(at), name)
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
			owner_id = CASE WHEN projects.owner_id = '' THEN excluded.owner_id ELSE projects.owner_id END`,
		p.Name, p.OwnerID, p.Remote, Millis(p.CreatedAt), Millis(p.UpdatedAt)); err != nil {
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
		Millis(p.UpdatedAt), p.Name, p.OwnerID)
	return err
}

func (t *tx) Project(name string) (store.Project, error) {
	return one(t, "project "+name, ScanProject, projects.query("WHERE name = ?"), name)
}

func (t *tx) Projects() ([]store.Project, error) {
	return all(t, "projects", ScanProject, projects.query("ORDER BY name"))
}

func (t *tx) InsertContextFile(jobID string, f store.ContextFile) error {
	data := f.Data
	if data == nil {
		data = []byte{} // the column is NOT NULL; nil would bind as NULL
	}
	return t.insertNew("insert context file "+f.Name+" of job "+jobID,
		`INSERT INTO context_files (job_id, name, size, data) VALUES (?, ?, ?, ?)`+onConflict,
		jobID, f.Name, int64(len(data)), data)
}

func (t *tx) ContextFiles(jobID string, data bool) ([]store.ContextFile, error) {
	if !data {
		return all(t, "context files of job "+jobID, func(s Scanner) (f store.ContextFile, err error) {
			err = s.Scan(&f.Name, &f.Size)
			return f, err
		}, `SELECT name, size FROM context_files WHERE job_id = ? ORDER BY name`, jobID)
	}
	return all(t, "context files of job "+jobID, func(s Scanner) (f store.ContextFile, err error) {
		err = s.Scan(&f.Name, &f.Size, &f.Data)
		if err == nil && f.Data == nil {
			f.Data = []byte{}
		}
		return f, err
	}, `SELECT name, size, data FROM context_files WHERE job_id = ? ORDER BY name`, jobID)
}

// queuedHeadsAtOnce is QueuedHeads's skip from shape to shape and its
// reads of each shape's oldest jobs in one statement (Dialect.OneTrip):
// the same seeks along jobs_queue_shape, without a round trip for each.
var queuedHeadsAtOnce = queuedHeadsJoined("heads.*", "")

// queuedHeadsJoined is queuedHeadsAtOnce selecting cols of the heads
// (heads.) and of what join adds.
func queuedHeadsJoined(cols, join string) string {
	return `WITH RECURSIVE shapes (shape) AS (
		(SELECT queue_shape FROM jobs WHERE state = 'queued' AND queue_shape > '' ORDER BY queue_shape LIMIT 1)
		UNION ALL
		SELECT (SELECT queue_shape FROM jobs WHERE state = 'queued' AND queue_shape > shapes.shape ORDER BY queue_shape LIMIT 1)
		FROM shapes WHERE shapes.shape IS NOT NULL)
	SELECT ` + cols + ` FROM shapes CROSS JOIN LATERAL (` +
		jobs.query(`WHERE state = 'queued' AND queue_shape = shapes.shape ORDER BY created_at, id LIMIT ?`) + `) heads` + join
}

// jobUpdateNoting is UpdateJob's update with its outbox note (Dialect.
// OneTrip), jobUpdateAtNoting UpdateJobAt's, whose last placeholder is
// the epoch.
var jobUpdateNoting, jobUpdateAtNoting = notingUpdate(""), notingUpdate(" AND epoch = ?")

// notingUpdate is the update of a job (cond's conditions added) that
// also records, as noteJobState would, its move to another state while
// any webhook exists, in one statement: every part of it sees the row as
// it was before the update, so old is what jobStateIfHooks would read.
// Each of also is one more data-modifying statement with RETURNING, whose
// placeholders follow the job's and the earlier ones', and whose rows are
// counted in a column after the job's.
func notingUpdate(cond string, also ...string) string {
	more, count := "", ""
	for i, a := range also {
		more += fmt.Sprintf(",\n\t\talso%d AS (%s)", i, a)
		count += fmt.Sprintf(", (SELECT count(*) FROM also%d)", i)
	}
	return fmt.Sprintf(`WITH old AS (SELECT state FROM jobs WHERE id = ?%d),
		upd AS (%s%s RETURNING id, state, updated_at),
		note AS (INSERT INTO job_changes (job_id, state, at) SELECT upd.id, upd.state, upd.updated_at FROM upd, old
			WHERE upd.state <> old.state AND EXISTS (SELECT 1 FROM webhooks))%s
		SELECT count(*)%s FROM upd`, len(Jobs.Cols), jobs.update, cond, more, count)
}

// updateJobNoting runs query, a notingUpdate, for the job whose key is
// args[0] (the columns' values args[1:] in order, then cond's) and
// returns how many rows it rewrote.
func (t *tx) updateJobNoting(what, query string, args []any) (int64, error) {
	n := len(Jobs.Cols)
	vals := append(append(args[1:n:n], args[0]), args[n:]...)
	var rows int64
	if err := t.queryRow(query, vals...).Scan(&rows); err != nil {
		t.retryable(err)
		return 0, fmt.Errorf("%s: %w", what, t.d.Err(err))
	}
	return rows, nil
}
