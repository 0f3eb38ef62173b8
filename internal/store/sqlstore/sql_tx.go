package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"

	"drover/internal/store"
)

// Dialect is what differs between the engines for the statements they
// share. The statements are written with ? placeholders (?N where one is
// used twice).
type Dialect struct {
	// Rebind turns the placeholders into the engine's; nil keeps them.
	Rebind func(string) string
	// Err maps a driver's error to the store's (ErrConflict, ErrNotFound,
	// ErrNoSpace), keeping the driver's in the chain for its message.
	Err func(error) error
	// Retry says whether after err the whole transaction may run again:
	// a serialization failure, or a connection lost before the commit was
	// sent (committing false), which kept nothing. nil for an engine whose
	// transactions never fail so.
	Retry func(err error, committing bool) bool
	// QueueIndex follows "FROM jobs" in the reads of the queue by shape:
	// SQLite's planner, without statistics, may otherwise take jobs_state
	// and sort.
	QueueIndex string
	// NoIndex prefixes a column to keep its condition off the indexes
	// where that condition would take a visibility arm through every job
	// in one state ("+" in SQLite; "" where the planner weighs it itself).
	NoIndex string
	// SkipLocked ends a read of a row a write means to claim: it locks the
	// row and skips one another transaction holds (" FOR UPDATE SKIP
	// LOCKED"), so dispatchers of several hubs never queue on one row; ""
	// where writes are serialized anyway.
	SkipLocked string
	// OneTrip: the engine runs, in one statement, what a path would
	// otherwise send as several (an UPDATE inside WITH, a LATERAL join):
	// there every statement is a round trip to a server, on a dispatch's
	// path too (Postgres); false where statements run in process.
	OneTrip bool
}

// tx implements store.Tx. The interface's methods take no context, so the
// one given to Read or Write is kept here and used for every statement.
type tx struct {
	ctx   context.Context
	tx    querier
	sqlTx *sql.Tx // tx as a transaction; nil in RunEach, where each statement is its own
	d     *Dialect
	stmts *Stmts               // nil: statements run as text, uncounted
	bound map[string]*sql.Stmt // stmts' statements bound to tx
	retry bool                 // a statement failed so (see Dialect.Retry) that the transaction may run again
}

// querier runs statements: a transaction (*sql.Tx), or a database (*sql.DB)
// whose every statement commits on its own (RunEach).
type querier interface {
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Run runs fn in sqlTx and commits it. If fn returns an error the
// transaction is rolled back and that error returned (mapped by the
// dialect). retry reports a failure after which the caller may run it all
// again (Dialect.Retry), of any statement, even one fn did not return, or
// of the commit. stmts (nil: none) counts the statements and may keep
// them prepared.
func Run(ctx context.Context, sqlTx *sql.Tx, d *Dialect, stmts *Stmts, fn func(store.Tx) error) (retry bool, err error) {
	t := &tx{ctx: ctx, tx: sqlTx, sqlTx: sqlTx, d: d, stmts: stmts}
	stmts.trips(2) // its BEGIN, and its COMMIT or ROLLBACK
	defer func() {
		// Roll back on a panic too; the connection must go back clean.
		if p := recover(); p != nil {
			_ = sqlTx.Rollback()
			panic(p)
		}
	}()
	if err := fn(t); err != nil {
		_ = sqlTx.Rollback()
		return t.retry || t.retryable(err), d.Err(err)
	}
	if err := sqlTx.Commit(); err != nil {
		// A statement that failed so aborted the transaction: its commit
		// kept nothing either.
		return t.retry || (d.Retry != nil && d.Retry(err, true)), fmt.Errorf("commit: %w", d.Err(err))
	}
	return false, nil
}

// RunEach runs fn, which only reads, outside any transaction: each of its
// statements on db sees what was committed when it began, and none waits
// for a BEGIN or a COMMIT (a round trip each on a server). For a read whose
// statements need no one snapshot: what it reads is checked again by the
// write it leads to. db's connections should refuse writes (Postgres'
// default_transaction_read_only). retry is as Run's.
func RunEach(ctx context.Context, db *sql.DB, d *Dialect, stmts *Stmts, fn func(store.Tx) error) (retry bool, err error) {
	t := &tx{ctx: ctx, tx: db, d: d, stmts: stmts}
	if err := fn(t); err != nil {
		return t.retry || t.retryable(err), d.Err(err)
	}
	return false, nil
}

func (t *tx) retryable(err error) bool {
	if err != nil && t.d.Retry != nil && t.d.Retry(err, false) {
		t.retry = true
	}
	return t.retry
}

// q is query in the engine's placeholders.
func (t *tx) q(query string) string {
	if t.d.Rebind == nil {
		return query
	}
	return t.d.Rebind(query)
}

// prepared is query bound to the transaction when t's Stmts keep it
// prepared, else nil (run it as text).
func (t *tx) prepared(query string) *sql.Stmt {
	st := t.stmts.stmt(query)
	if st == nil {
		return nil
	}
	if t.sqlTx == nil {
		return st
	}
	if b, ok := t.bound[query]; ok {
		return b
	}
	if t.bound == nil {
		t.bound = map[string]*sql.Stmt{}
	}
	b := t.sqlTx.StmtContext(t.ctx, st)
	t.bound[query] = b
	return b
}

func (t *tx) queryRow(query string, args ...any) *sql.Row {
	q := t.q(query)
	if st := t.prepared(q); st != nil {
		return st.QueryRowContext(t.ctx, args...)
	}
	return t.tx.QueryRowContext(t.ctx, q, args...)
}

func (t *tx) query(query string, args ...any) (*sql.Rows, error) {
	q := t.q(query)
	var rows *sql.Rows
	var err error
	if st := t.prepared(q); st != nil {
		rows, err = st.QueryContext(t.ctx, args...)
	} else {
		rows, err = t.tx.QueryContext(t.ctx, q, args...)
	}
	t.retryable(err)
	return rows, err
}

// table describes an entity table whose first column is its primary key and
// whose rows are written whole, so that inserts, updates and selects of one
// entity share one column list.
type table struct {
	name   string
	cols   string // comma-separated, for SELECT
	insert string
	update string
	set    string // the update's assignments of every column but the key
	key    string
}

func newTable(tb Table) table {
	name, cols := tb.Name, tb.Cols
	set := make([]string, len(cols)-1)
	for i, c := range cols[1:] {
		set[i] = c + " = ?"
	}
	t := table{
		name: name,
		cols: strings.Join(cols, ", "),
		insert: fmt.Sprintf("INSERT INTO %s (%s) VALUES (?%s)"+onConflict, name, strings.Join(cols, ", "),
			strings.Repeat(", ?", len(cols)-1)),
		set: strings.Join(set, ", "),
		key: cols[0],
	}
	t.update = t.updateSetting("")
	return t
}

// updateSetting is the update of one row that also makes extra's
// assignments (a column the table's rows do not carry), whose placeholders
// follow the columns' (see updateRow).
func (tb table) updateSetting(extra string) string {
	set := tb.set
	if extra != "" {
		set += ", " + extra
	}
	return fmt.Sprintf("UPDATE %s SET %s WHERE %s = ?", tb.name, set, tb.key)
}

// upsert is the insert of a row that replaces the one of its key, but for
// the columns keep, which stay as the first insert wrote them.
func (tb table) upsert(keep ...string) string { return tb.upsertOn(1, keep...) }

// upsertOn is upsert for a table whose key is its first n columns.
func (tb table) upsertOn(n int, keep ...string) string {
	cols := strings.Split(tb.cols, ", ")
	var set []string
	for _, c := range cols[n:] {
		if !slices.Contains(keep, c) {
			set = append(set, c+" = excluded."+c)
		}
	}
	return fmt.Sprintf("INSERT INTO %s (%s) VALUES (?%s) ON CONFLICT (%s) DO UPDATE SET %s",
		tb.name, tb.cols, strings.Repeat(", ?", len(cols)-1), strings.Join(cols[:n], ", "), strings.Join(set, ", "))
}

// query returns a SELECT of all columns followed by rest (WHERE, ORDER BY…).
func (t table) query(rest string) string {
	return "SELECT " + t.cols + " FROM " + t.name + " " + rest
}

func (t *tx) exec(what, query string, args ...any) (sql.Result, error) {
	q := t.q(query)
	var res sql.Result
	var err error
	if st := t.prepared(q); st != nil {
		res, err = st.ExecContext(t.ctx, args...)
	} else {
		res, err = t.tx.ExecContext(t.ctx, q, args...)
	}
	if err != nil {
		t.retryable(err)
		return nil, fmt.Errorf("%s: %w", what, t.d.Err(err))
	}
	return res, nil
}

// onConflict ends every insert of a new row: a duplicate key inserts
// nothing and is ErrConflict, without failing the statement, which in
// Postgres would abort the whole transaction (the hub goes on after some
// conflicts, such as adding a member twice).
const onConflict = " ON CONFLICT DO NOTHING"

// insert writes a new row; args are in the table's column order.
func (t *tx) insert(tb table, what string, args []any) error {
	return t.insertNew("insert "+what, tb.insert, args...)
}

// insertNew runs query, an INSERT ending in onConflict, and reports
// ErrConflict when it inserted nothing.
func (t *tx) insertNew(what, query string, args ...any) error {
	res, err := t.exec(what, query, args...)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", what, store.ErrConflict)
	}
	return nil
}

// update rewrites the row whose key is args[0] and reports ErrNotFound if
// there is none.
func (t *tx) update(tb table, what string, args []any) error {
	return t.updateRow(tb.update, what, args)
}

// updateRow runs query, an update of the row whose key is args[0], with
// the columns' values args[1:] then extra's, and reports ErrNotFound if
// there is none.
func (t *tx) updateRow(query, what string, args []any, extra ...any) error {
	res, err := t.exec("update "+what, query, append(append(args[1:len(args):len(args)], extra...), args[0])...)
	if err != nil {
		return err
	}
	return affected("update "+what, res)
}

// affected reports ErrNotFound when the statement of res changed no row.
func affected(what string, res sql.Result) error {
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("%s: %w", what, err)
	}
	if n == 0 {
		return fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	return nil
}

// stringMap maps the first column of query's rows to the second.
func stringMap(t *tx, what, query string, args ...any) (map[string]string, error) {
	type pair struct{ k, v string }
	ps, err := all(t, what, func(s Scanner) (p pair, err error) {
		err = s.Scan(&p.k, &p.v)
		return p, err
	}, query, args...)
	if err != nil {
		return nil, err
	}
	out := make(map[string]string, len(ps))
	for _, p := range ps {
		out[p.k] = p.v
	}
	return out, nil
}

// one returns the single row of query, or ErrNotFound.
func one[T any](t *tx, what string, scan func(Scanner) (T, error), query string, args ...any) (T, error) {
	v, err := scan(t.queryRow(query, args...))
	t.retryable(err)
	if errors.Is(err, sql.ErrNoRows) {
		return v, fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	if err != nil {
		return v, fmt.Errorf("read %s: %w", what, err)
	}
	return v, nil
}

// all returns every row of query, never nil.
func all[T any](t *tx, what string, scan func(Scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := t.query(query, args...)
	if err != nil {
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	defer rows.Close()
	vs := []T{}
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, fmt.Errorf("list %s: %w", what, err)
		}
		vs = append(vs, v)
	}
	if err := rows.Err(); err != nil {
		t.retryable(err)
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	return vs, nil
}

// noLimit turns a non-positive limit into one no table reaches (every
// engine takes it).
func noLimit(limit int) int64 {
	if limit <= 0 {
		return math.MaxInt64
	}
	return int64(limit)
}

// RunPart runs fn in sqlTx inside a savepoint and does not commit: the
// writes of several callers then share one commit. fn's error undoes its
// own writes only, and is returned mapped by the dialect. broken reports
// that sqlTx cannot go on (the savepoint could not be taken or undone):
// the caller rolls it all back.
func RunPart(ctx context.Context, sqlTx *sql.Tx, d *Dialect, stmts *Stmts, fn func(store.Tx) error) (err error, broken bool) {
	stmts.trips(2) // SAVEPOINT, then RELEASE (and ROLLBACK TO, below)
	if _, err := sqlTx.ExecContext(ctx, "SAVEPOINT part"); err != nil {
		return d.Err(err), true
	}
	t := &tx{ctx: ctx, tx: sqlTx, sqlTx: sqlTx, d: d, stmts: stmts}
	if err := fn(t); err != nil {
		stmts.trips(1)
		if _, rerr := sqlTx.ExecContext(ctx, "ROLLBACK TO part"); rerr != nil {
			return d.Err(err), true
		}
		if _, rerr := sqlTx.ExecContext(ctx, "RELEASE part"); rerr != nil {
			return d.Err(err), true
		}
		return d.Err(err), false
	}
	if _, err := sqlTx.ExecContext(ctx, "RELEASE part"); err != nil {
		return d.Err(err), true
	}
	return nil, false
}
