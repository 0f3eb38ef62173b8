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

// runnerShares selects a runner's row with each of its shares (one row of
// empty share columns when it has none), its shares oldest first.
var runnerShares = "SELECT runners." + strings.Join(Runners.Cols, ", runners.") +
	", COALESCE(s.runner_id, ''), COALESCE(s.account_id, ''), COALESCE(s.kind, ''), COALESCE(s.subject, ''), COALESCE(s.created_at, 0), s.accepted_at" +
	" FROM runners LEFT JOIN shares s ON s.runner_id = runners.id WHERE runners.id = ?" +
	" ORDER BY s.created_at, s.account_id, s.kind, s.subject"

// RunnerShares reads a runner and its shares in one statement.
func (t *tx) RunnerShares(runnerID string) (store.Runner, []store.Share, error) {
	type row struct {
		r  store.Runner
		sh store.Share
	}
	rows, err := all(t, "runner "+runnerID+" with its shares", func(s Scanner) (row, error) {
		var w row
		var err error
		w.r, err = ScanRunner(scanFunc(func(rdest ...any) error {
			w.sh, err = ScanShare(scanFunc(func(sdest ...any) error { return s.Scan(append(rdest, sdest...)...) }))
			return err
		}))
		return w, err
	}, runnerShares, runnerID)
	if err != nil {
		return store.Runner{}, nil, err
	}
	if len(rows) == 0 {
		return store.Runner{}, nil, fmt.Errorf("runner %s: %w", runnerID, store.ErrNotFound)
	}
	shares := []store.Share{}
	for _, w := range rows {
		if w.sh.RunnerID != "" {
			shares = append(shares, w.sh)
		}
	}
	return rows[0].r, shares, nil
}

// scanFunc is a Scanner made of a function, to scan one row into two
// entities: the first's scan calls the second's with its destinations.
type scanFunc func(dest ...any) error

func (f scanFunc) Scan(dest ...any) error { return f(dest...) }

// attemptJobUpdate is UpdateJob's notingUpdate with an attempt's update:
// the job's placeholders, then the attempt's.
var attemptJobUpdate = notingUpdate("", attempts.update+" RETURNING id")

// UpdateAttemptAndJob is UpdateAttempt and UpdateJob, in one statement
// where the engine makes every statement a round trip (Dialect.OneTrip).
func (t *tx) UpdateAttemptAndJob(a store.Attempt, j store.Job) error {
	if !t.d.OneTrip {
		if err := t.UpdateAttempt(a); err != nil {
			return err
		}
		return t.UpdateJob(j)
	}
	n, aargs := len(Jobs.Cols), AttemptArgs(a)
	jargs := JobArgs(j)
	vals := append(append(append(jargs[1:n:n], jargs[0]), aargs[1:]...), aargs[0])
	what := "update attempt " + a.ID + " and job " + j.ID
	var jrows, arows int64
	if err := t.queryRow(attemptJobUpdate, vals...).Scan(&jrows, &arows); err != nil {
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

// offerUpdate is UpdateJobAt's notingUpdate with an attempt's insert: the
// job's placeholders and the epoch, then the attempt's.
var offerUpdate = notingUpdate(" AND epoch = ?", attempts.insert+" RETURNING id")

// OfferAttempt is InsertAttempt and UpdateJobAt, in one statement where
// the engine makes every statement a round trip (Dialect.OneTrip). There
// the insert runs whether or not the job was at epoch: the error then
// undoes it with the transaction, as it does an attempt inserted before
// UpdateJobAt failed.
func (t *tx) OfferAttempt(a store.Attempt, j store.Job, epoch int64) error {
	if !t.d.OneTrip {
		if err := t.InsertAttempt(a); err != nil {
			return err
		}
		return t.UpdateJobAt(j, epoch)
	}
	n := len(Jobs.Cols)
	jargs := JobArgs(j)
	vals := append(append(jargs[1:n:n], jargs[0], epoch), AttemptArgs(a)...)
	var jrows, arows int64
	if err := t.queryRow(offerUpdate, vals...).Scan(&jrows, &arows); err != nil {
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
