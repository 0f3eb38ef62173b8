// Package sqlite is drover's SQLite store, built on the pure-Go driver
// modernc.org/sqlite so the binary needs no cgo.
//
// The database runs in WAL mode with synchronous=FULL: a Write that returned
// nil survives a power cut, not only a crash. Writes go through a pool of one
// connection whose transactions begin IMMEDIATE, so they are serialized in
// the process and take the database write lock up front (no deadlocking
// upgrade from a read lock); writes that wait meanwhile commit together
// (group.go). Reads use a separate query-only pool; under WAL
// they see the last commit and never wait for the writer.
package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"time"

	msqlite "modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"drover/internal/retry"
	"drover/internal/store"
	"drover/internal/store/sqlstore"
)

var _ store.Store = (*Store)(nil)

const (
	readConns = 8

	// busyTimeout is how long SQLite itself waits for a lock held by
	// another connection (or process) before reporting SQLITE_BUSY.
	busyTimeout = 10 * time.Second

	// beginRetries is how many more times Write tries BEGIN after
	// SQLITE_BUSY. Each try already waited busyTimeout inside SQLite, so
	// this only matters when another process holds the lock for long.
	beginRetries = 3
)

// Store is a drover store in one SQLite database file.
type Store struct {
	w *sql.DB // one connection; BEGIN IMMEDIATE
	r *sql.DB // query-only connections
	// Each pool's statements, counted and kept prepared: SQLite would
	// parse every statement of every transaction again.
	ws, rs *sqlstore.Stmts
	g      groups // writes waiting to commit together (group.go)
}

// Open opens (creating if needed) the database at path and applies any
// pending migrations.
func Open(ctx context.Context, path string) (*Store, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	// SQLite would create the file 0644 (less the umask); made 0600 first,
	// its -wal and -shm, which SQLite creates with the database file's
	// mode, are 0600 too.
	f, err := os.OpenFile(abs, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	f.Close()
	w, err := openPool(ctx, dsn(abs, true), 1)
	if err != nil {
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	// Migrate before the read pool exists: the writer's first connection
	// switched the file to WAL, which readers then find in its header.
	if err := migrate(ctx, w); err != nil {
		w.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	r, err := openPool(ctx, dsn(abs, false), readConns)
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("open store %s: %w", path, err)
	}
	return &Store{w: w, r: r, ws: sqlstore.NewStmts(w, true), rs: sqlstore.NewStmts(r, true)}, nil
}

// dsn builds the driver's connection string. Pragmas go in the DSN because
// the driver runs them on every new connection of the pool.
func dsn(path string, write bool) string {
	q := url.Values{}
	q.Add("_pragma", fmt.Sprintf("busy_timeout(%d)", busyTimeout.Milliseconds()))
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "synchronous(FULL)")
	if write {
		q.Add("_pragma", "journal_mode(WAL)")
		// A group's writes run each in a savepoint (group.go), whose
		// sub-journal (the pages a savepoint changed, to roll it back)
		// spilled to a temporary file past 64 KiB: two writes to it for
		// every page, a sixth of a burst's CPU. In memory: it only ever
		// undoes a savepoint of the open transaction, and a crash
		// recovers from the WAL, which never needed it.
		q.Add("_pragma", "temp_store(MEMORY)")
		q.Set("_txlock", "immediate")
	} else {
		q.Set("_query_only", "1")
	}
	// A file: URI, so that a path containing '?' or '#' is escaped rather
	// than cut short.
	return (&url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}).String()
}

func openPool(ctx context.Context, dsn string, conns int) (*sql.DB, error) {
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, err
	}
	return db, nil
}

// Close closes the database. Readers close first so that the writer is the
// last connection and checkpoints the WAL into the main file.
func (s *Store) Close() error {
	s.rs.Close()
	s.ws.Close()
	return errors.Join(s.r.Close(), s.w.Close())
}

// Statements is how many statements the store has run (the hub's metrics).
func (s *Store) Statements() int64 { return s.ws.Run() + s.rs.Run() }

// CountStatementsByText makes the store count each statement's runs by
// its text from now on (StatementsByText).
func (s *Store) CountStatementsByText() {
	s.ws.CountByText()
	s.rs.CountByText()
}

// StatementsByText is each statement's runs since CountStatementsByText,
// writes and reads together.
func (s *Store) StatementsByText() map[string]int64 {
	out := s.ws.ByText()
	if out == nil {
		out = map[string]int64{}
	}
	for q, n := range s.rs.ByText() {
		out[q] += n
	}
	return out
}

// Read runs fn in a read-only transaction that sees one consistent snapshot.
func (s *Store) Read(ctx context.Context, fn func(store.Tx) error) error {
	sqlTx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	_, err = sqlstore.Run(ctx, sqlTx, &dialect, s.rs, fn)
	return err
}

// ReadEach is Read: a transaction in process costs no round trip, so
// its one snapshot comes free.
func (s *Store) ReadEach(ctx context.Context, fn func(store.Tx) error) error {
	return s.Read(ctx, fn)
}

// dialect is how the shared statements run on SQLite: ? placeholders as
// written, and planner hints (INDEXED BY, unary +) its planner needs
// without statistics.
var dialect = sqlstore.Dialect{
	Err:        func(err error) error { return noSpace(storeErr(err)) },
	QueueIndex: "INDEXED BY jobs_queue_shape",
	NoIndex:    "+",
}

// beginWrite begins an IMMEDIATE transaction (see dsn), retrying a few times
// if another process holds the write lock past busy_timeout.
func beginWrite(ctx context.Context, db *sql.DB) (*sql.Tx, error) {
	var sqlTx *sql.Tx
	pol := retry.Policy{First: 10 * time.Millisecond, Tries: beginRetries + 1}
	err := retry.Do(ctx, pol, func(ctx context.Context) error {
		var err error
		if sqlTx, err = db.BeginTx(ctx, nil); err != nil && !isBusy(err) {
			return retry.Permanent(err)
		}
		return err
	})
	switch {
	case err == nil:
		return sqlTx, nil
	case ctx.Err() != nil && isBusy(err):
		return nil, fmt.Errorf("begin write: %w", ctx.Err())
	}
	return nil, fmt.Errorf("begin write: %w", noSpace(err))
}

func sqliteCode(err error) (int, bool) {
	var se *msqlite.Error
	if errors.As(err, &se) {
		return se.Code(), true
	}
	return 0, false
}

func isBusy(err error) bool {
	code, ok := sqliteCode(err)
	return ok && code&0xff == sqlite3.SQLITE_BUSY
}

// noSpace marks an error of a full disk (SQLITE_FULL: SQLite reports a
// write that failed with ENOSPC so) with store.ErrNoSpace, keeping the
// driver's error for its message.
func noSpace(err error) error {
	code, ok := sqliteCode(err)
	if !ok || errors.Is(err, store.ErrNoSpace) {
		return err
	}
	if code&0xff == sqlite3.SQLITE_FULL {
		return fmt.Errorf("%w: %w", store.ErrNoSpace, err)
	}
	return err
}

// storeErr maps constraint violations to the store's errors, keeping the
// driver's error in the chain for its message.
func storeErr(err error) error {
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) {
		return err // mapped already
	}
	code, _ := sqliteCode(err)
	switch code {
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return fmt.Errorf("%w: %w", store.ErrConflict, err)
	case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		return fmt.Errorf("referenced row %w: %w", store.ErrNotFound, err)
	}
	return err
}

// Snapshot runs fn in a read-only SQL transaction on one consistent
// snapshot of the database, for a tool that reads it whole (copy-db).
func (s *Store) Snapshot(ctx context.Context, fn func(*sql.Tx) error) error {
	sqlTx, err := s.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("begin read: %w", err)
	}
	defer sqlTx.Rollback()
	return fn(sqlTx)
}
