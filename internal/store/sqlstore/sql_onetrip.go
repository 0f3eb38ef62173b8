package sqlstore

import (
	"fmt"
	"strings"

	"drover/internal/store"
)

// Reads that the dispatch path made as two or three statements, made as
// one: on Postgres every statement is a round trip, and the write that
// holds the hub's turn pays for each (issue 30).

// attemptWithJob selects an attempt (a.) and its job (j.).
var attemptWithJob = "SELECT a." + strings.Join(Attempts.Cols, ", a.") + ", j." + strings.Join(Jobs.Cols, ", j.") +
	" FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE a.id = ?"

// AttemptWithJob reads an attempt and its job in one statement.
func (t *tx) AttemptWithJob(id string) (store.Attempt, store.Job, error) {
	var j store.Job
	a, err := one(t, "attempt "+id, func(s Scanner) (store.Attempt, error) {
		return ScanAttempt(scanFunc(func(adest ...any) error {
			var err error
			j, err = ScanJob(scanFunc(func(jdest ...any) error { return s.Scan(append(adest, jdest...)...) }))
			return err
		}))
	}, attemptWithJob, id)
	return a, j, err
}

// runnerSharesCols are a runner's columns (runners.) and a share's (s.,
// empty when it has none), runnerSharesOf where they come from: the
// runner named by its placeholder, with each of its shares (one row of
// empty share columns when it has none), its shares oldest first.
var runnerSharesCols = "runners." + strings.Join(Runners.Cols, ", runners.") +
	", COALESCE(s.runner_id, ''), COALESCE(s.account_id, ''), COALESCE(s.kind, ''), COALESCE(s.subject, ''), COALESCE(s.created_at, 0), s.accepted_at"

const runnerSharesOf = " runners LEFT JOIN shares s ON s.runner_id = runners.id WHERE runners.id = ?" +
	" ORDER BY s.created_at, s.account_id, s.kind, s.subject"

// runnerShares selects a runner's row with each of its shares.
var runnerShares = "SELECT " + runnerSharesCols + " FROM" + runnerSharesOf

// runnerShare is one row of runnerShares.
type runnerShare struct {
	r  store.Runner
	sh store.Share
}

// scanRunnerShare scans a runner's columns and a share's from s, after
// the destinations of before (those of columns selected first).
func scanRunnerShare(s Scanner, before ...any) (runnerShare, error) {
	var w runnerShare
	var err error
	w.r, err = ScanRunner(scanFunc(func(rdest ...any) error {
		w.sh, err = ScanShare(scanFunc(func(sdest ...any) error {
			return s.Scan(append(append(before, rdest...), sdest...)...)
		}))
		return err
	}))
	return w, err
}

// withShares is the runner of rows (one or more) and its shares.
func withShares(rows []runnerShare) (store.Runner, []store.Share) {
	shares := []store.Share{}
	for _, w := range rows {
		if w.sh.RunnerID != "" {
			shares = append(shares, w.sh)
		}
	}
	return rows[0].r, shares
}

// RunnerShares reads a runner and its shares in one statement.
func (t *tx) RunnerShares(runnerID string) (store.Runner, []store.Share, error) {
	rows, err := all(t, "runner "+runnerID+" with its shares", func(s Scanner) (runnerShare, error) {
		return scanRunnerShare(s)
	}, runnerShares, runnerID)
	if err != nil {
		return store.Runner{}, nil, err
	}
	if len(rows) == 0 {
		return store.Runner{}, nil, fmt.Errorf("runner %s: %w", runnerID, store.ErrNotFound)
	}
	rn, shares := withShares(rows)
	return rn, shares, nil
}

// ClaimQueuedFor is ClaimQueued(jobID) and RunnerShares(runnerID), in one
// statement where the engine makes every statement a round trip
// (Dialect.OneTrip): the job's claim (its row lock) in a WITH, so that it
// locks the job's row alone.
func (t *tx) ClaimQueuedFor(jobID, runnerID string) (store.Job, store.Runner, []store.Share, error) {
	if !t.d.OneTrip {
		j, err := t.ClaimQueued(jobID)
		if err != nil {
			return j, store.Runner{}, nil, err
		}
		rn, shares, err := t.RunnerShares(runnerID)
		return j, rn, shares, err
	}
	type row struct {
		j store.Job
		w runnerShare
	}
	q := "WITH j AS (" + jobs.query("WHERE id = ? AND state = 'queued'"+t.d.SkipLocked) + ")" +
		" SELECT j.*, " + runnerSharesCols + " FROM j," + runnerSharesOf
	what := "queued job " + jobID + " for runner " + runnerID
	rows, err := all(t, what, func(s Scanner) (row, error) {
		var w row
		var err error
		w.j, err = ScanJob(scanFunc(func(jdest ...any) error {
			w.w, err = scanRunnerShare(s, jdest...)
			return err
		}))
		return w, err
	}, q, jobID, runnerID)
	if err != nil {
		return store.Job{}, store.Runner{}, nil, err
	}
	if len(rows) == 0 {
		return store.Job{}, store.Runner{}, nil, fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	ws := make([]runnerShare, len(rows))
	for i, w := range rows {
		ws[i] = w.w
	}
	rn, shares := withShares(ws)
	return rows[0].j, rn, shares, nil
}

// scanFunc is a Scanner made of a function, to scan one row into two
// entities: the first's scan calls the second's with its destinations.
type scanFunc func(dest ...any) error

func (f scanFunc) Scan(dest ...any) error { return f(dest...) }

// attemptJobUpdate is UpdateJob's notingUpdate with an attempt's update
// and an event's insert: the job's placeholders, the attempt's, the
// event's.
var attemptJobUpdate = notingUpdate("", attempts.update+" RETURNING id", eventInsert)

// UpdateAttemptAndJob is UpdateAttempt, UpdateJob and AddEvent(ev), in one
// statement where the engine makes every statement a round trip
// (Dialect.OneTrip).
func (t *tx) UpdateAttemptAndJob(a store.Attempt, j store.Job, ev store.Event) error {
	if !t.d.OneTrip {
		if err := t.UpdateAttempt(a); err != nil {
			return err
		}
		if err := t.UpdateJob(j); err != nil {
			return err
		}
		_, err := t.AddEvent(ev)
		return err
	}
	n, aargs := len(Jobs.Cols), AttemptArgs(a)
	jargs := JobArgs(j)
	vals := append(append(append(append(jargs[1:n:n], jargs[0]), aargs[1:]...), aargs[0]), eventArgs(ev)...)
	what := "update attempt " + a.ID + " and job " + j.ID
	var jrows, arows, erows int64
	if err := t.queryRow(attemptJobUpdate, vals...).Scan(&jrows, &arows, &erows); err != nil {
		t.retryable(err)
		return fmt.Errorf("%s: %w", what, t.d.Err(err))
	}
	switch {
	case arows == 0:
		return fmt.Errorf("update attempt %s: %w", a.ID, store.ErrNotFound)
	case jrows == 0:
		return fmt.Errorf("update job %s: %w", j.ID, store.ErrNotFound)
	}
	return nil
}

// offerUpdate is UpdateJobAt's notingUpdate with an attempt's insert and
// an event's: the job's placeholders and the epoch, the attempt's, the
// event's.
var offerUpdate = notingUpdate(" AND epoch = ?", attempts.insert+" RETURNING id", eventInsert)

// OfferAttempt is InsertAttempt, UpdateJobAt and AddEvent(ev), in one
// statement where the engine makes every statement a round trip
// (Dialect.OneTrip). There the inserts run whether or not the job was at
// epoch: the error then undoes them with the transaction, as it does an
// attempt inserted before UpdateJobAt failed.
func (t *tx) OfferAttempt(a store.Attempt, j store.Job, epoch int64, ev store.Event) error {
	if !t.d.OneTrip {
		if err := t.InsertAttempt(a); err != nil {
			return err
		}
		if err := t.UpdateJobAt(j, epoch); err != nil {
			return err
		}
		_, err := t.AddEvent(ev)
		return err
	}
	n := len(Jobs.Cols)
	jargs := JobArgs(j)
	vals := append(append(append(jargs[1:n:n], jargs[0], epoch), AttemptArgs(a)...), eventArgs(ev)...)
	var jrows, arows, erows int64
	if err := t.queryRow(offerUpdate, vals...).Scan(&jrows, &arows, &erows); err != nil {
		t.retryable(err)
		return fmt.Errorf("offer attempt %s of job %s: %w", a.ID, j.ID, t.d.Err(err))
	}
	switch {
	case arows == 0:
		return fmt.Errorf("insert attempt %s: %w", a.ID, store.ErrConflict)
	case jrows == 0:
		return fmt.Errorf("update job %s at epoch %d: %w: %w", j.ID, epoch, store.ErrConflict, store.ErrNotFound)
	}
	return nil
}

// queuedHeadsUsers is queuedHeadsAtOnce with each head's requester (u.).
var queuedHeadsUsers = queuedHeadsJoined("heads.*, u."+strings.Join(Users.Cols, ", u."),
	" JOIN users u ON u.id = heads.requester_id")

// QueuedHeadsWithRequesters is QueuedHeads and the User of each head's
// requester, in one statement where the engine makes every statement a
// round trip (Dialect.OneTrip).
func (t *tx) QueuedHeadsWithRequesters(perShape int) ([]store.Job, map[string]store.User, error) {
	if !t.d.OneTrip {
		js, err := t.QueuedHeads(perShape)
		if err != nil {
			return nil, nil, err
		}
		us := map[string]store.User{}
		for _, j := range js {
			if _, ok := us[j.RequesterID]; !ok {
				if us[j.RequesterID], err = t.User(j.RequesterID); err != nil {
					return nil, nil, err
				}
			}
		}
		return js, us, nil
	}
	type row struct {
		j store.Job
		u store.User
	}
	rows, err := all(t, "queued jobs by shape with their requesters", func(s Scanner) (row, error) {
		var w row
		var err error
		w.j, err = ScanJob(scanFunc(func(jdest ...any) error {
			w.u, err = ScanUser(scanFunc(func(udest ...any) error { return s.Scan(append(jdest, udest...)...) }))
			return err
		}))
		return w, err
	}, queuedHeadsUsers, allShape(perShape))
	if err != nil || len(rows) == 0 {
		return nil, map[string]store.User{}, err // none is nil, as QueuedHeads's
	}
	js, us := make([]store.Job, len(rows)), map[string]store.User{}
	for i, w := range rows {
		js[i], us[w.u.ID] = w.j, w.u
	}
	SortOldestFirst(js)
	return js, us, nil
}
