// Package postgres implements store.Store on PostgreSQL through pgx, for a
// hub that outgrows one machine's SQLite. It runs the statements
// internal/store/sqlstore shares with SQLite on its own migrations, which
// give the same logical schema.
//
// Writes are SERIALIZABLE: whatever else writes the database (another
// hub, an operator), a Write behaves as if it ran alone, and one that lost
// a serialization race (40001) or a deadlock (40P01) runs again from the
// start, a bounded number of times. The Writes of one Store also take
// turns, as SQLite's do, so that a single hub never loses such a race
// against itself. Reads are REPEATABLE READ, READ ONLY:
// one consistent snapshot that never waits for a writer. ReadEach's
// statements run alone, each its own snapshot, on connections that
// refuse writes.
package postgres

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"
	"github.com/jackc/pgx/v5/stdlib"

	"drover/internal/retry"
	"drover/internal/store"
	"drover/internal/store/sqlstore"
)

var _ store.Store = (*Store)(nil)

const (
	// maxConns bounds the pool (Postgres' max_connections is shared by
	// every hub and tool on the server).
	maxConns = 16
	// writeTries is how often a Write runs in all before a serialization
	// failure is returned.
	writeTries = 20
	// readTries is how often a Read runs in all on lost connections.
	readTries = 3
	// eachConns bounds the pool of ReadEach (a dispatch pass at a time
	// per hub, and little else).
	eachConns = 4
	// connectTimeout bounds the first connection: a wrong or unreachable
	// URL fails the hub's start, not hangs it.
	connectTimeout = 10 * time.Second
)

// Store is a drover store in one Postgres database.
type Store struct {
	db    *sql.DB
	each  *sql.DB       // ReadEach's pool: connections whose statements may not write
	write chan struct{} // one token: the Write that holds it runs
	cfg   *pgx.ConnConfig
	hints *hints          // to and from the other hubs on the database (hints.go)
	stmts *sqlstore.Stmts // counted only: pgx keeps its statements prepared itself
}

// IsURL says whether a --db value names a Postgres database.
func IsURL(s string) bool {
	return strings.HasPrefix(s, "postgres://") || strings.HasPrefix(s, "postgresql://")
}

// Open connects to the database at url (postgres://user:pass@host/db) and
// applies any pending migrations. Its errors name the host, never the
// password.
func Open(ctx context.Context, url string) (*Store, error) {
	cfg, err := pgx.ParseConfig(url)
	if err != nil {
		// pgx's parse errors quote the URL with its password masked.
		return nil, fmt.Errorf("open Postgres store: %w", err)
	}
	where := redacted(cfg)
	if cfg.ConnectTimeout == 0 || cfg.ConnectTimeout > connectTimeout {
		cfg.ConnectTimeout = connectTimeout
	}
	db := stdlib.OpenDB(*cfg)
	db.SetMaxOpenConns(maxConns)
	db.SetMaxIdleConns(maxConns)
	s := &Store{db: db, each: readOnlyDB(cfg), write: make(chan struct{}, 1), cfg: cfg, hints: newHints(), stmts: sqlstore.NewStmts(db, false)}
	if err := db.PingContext(ctx); err != nil {
		s.each.Close()
		db.Close()
		return nil, fmt.Errorf("open Postgres store at %s: %w", where, scrub(err, cfg.Password))
	}
	if err := migrate(ctx, s); err != nil {
		s.each.Close()
		db.Close()
		return nil, fmt.Errorf("open Postgres store at %s: %w", where, scrub(err, cfg.Password))
	}
	return s, nil
}

// readOnlyDB is a pool on cfg's database whose every transaction, the
// implicit one of a statement sent alone too, is read only: the server
// refuses a write there (ReadEach has no READ ONLY transaction to say so).
func readOnlyDB(cfg *pgx.ConnConfig) *sql.DB {
	ro := cfg.Copy()
	ro.RuntimeParams["default_transaction_read_only"] = "on"
	db := stdlib.OpenDB(*ro)
	db.SetMaxOpenConns(eachConns)
	db.SetMaxIdleConns(eachConns)
	return db
}

// redacted names the database by user, host, port and name.
func redacted(cfg *pgx.ConnConfig) string {
	return fmt.Sprintf("postgres://%s@%s/%s", cfg.User, hostPort(cfg.Host, cfg.Port), cfg.Database)
}

func hostPort(host string, port uint16) string {
	if strings.HasPrefix(host, "/") {
		return "[" + host + "]:" + strconv.Itoa(int(port)) // a unix socket directory
	}
	return host + ":" + strconv.Itoa(int(port))
}

// scrub makes sure err's message does not carry the password (the server
// or driver might echo a connection string).
func scrub(err error, password string) error {
	if password == "" || !strings.Contains(err.Error(), password) {
		return err
	}
	return errors.New(strings.ReplaceAll(err.Error(), password, "xxxxx"))
}

// Close sends the hints still pending and closes the pool.
func (s *Store) Close() error {
	s.closeHints()
	return errors.Join(s.each.Close(), s.db.Close())
}

// Statements is how many statements the store has run (the hub's metrics).
func (s *Store) Statements() int64 { return s.stmts.Run() }

// RoundTrips is how many round trips to the server the store's
// statements, BEGINs, COMMITs and ROLLBACKs took.
func (s *Store) RoundTrips() int64 { return s.stmts.Trips() }

// CountStatementsByText makes the store count each statement's runs by
// its text from now on (StatementsByText).
func (s *Store) CountStatementsByText() { s.stmts.CountByText() }

// StatementsByText is each statement's runs since CountStatementsByText.
func (s *Store) StatementsByText() map[string]int64 { return s.stmts.ByText() }

// Read runs fn in a read-only transaction that sees one consistent snapshot.
// It runs again, a few times, on a connection that was lost.
func (s *Store) Read(ctx context.Context, fn func(store.Tx) error) error {
	return s.run(ctx, "read", readTries, &sql.TxOptions{Isolation: sql.LevelRepeatableRead, ReadOnly: true}, fn)
}

// ReadEach runs fn, which only reads, outside a transaction: each
// statement sees what was committed when it began, and fn pays no round
// trip for a BEGIN or a COMMIT. It runs again, a few times, on a
// connection that was lost.
func (s *Store) ReadEach(ctx context.Context, fn func(store.Tx) error) error {
	return s.retried(ctx, "read", readTries, func(ctx context.Context) (bool, error) {
		return sqlstore.RunEach(ctx, s.each, &dialect, s.stmts, fn)
	})
}

// Write runs fn in a serializable transaction and commits it. If fn
// returns an error the transaction is rolled back and that error returned.
// fn runs again after a serialization failure (see the package comment).
func (s *Store) Write(ctx context.Context, fn func(store.Tx) error) error {
	select {
	case s.write <- struct{}{}:
		defer func() { <-s.write }()
	case <-ctx.Done():
		return fmt.Errorf("begin write: %w", ctx.Err())
	}
	return s.run(ctx, "write", writeTries, &sql.TxOptions{Isolation: sql.LevelSerializable}, fn)
}

// run runs fn in a transaction, again (up to tries in all) after a
// failure that kept nothing: a serialization failure, or a connection
// lost before the commit (database/sql then opens another).
func (s *Store) run(ctx context.Context, what string, tries int, opts *sql.TxOptions, fn func(store.Tx) error) error {
	return s.retried(ctx, what, tries, func(ctx context.Context) (bool, error) {
		sqlTx, err := s.db.BeginTx(ctx, opts)
		if err != nil {
			return retryable(err, false), fmt.Errorf("begin %s: %w", what, storeErr(err))
		}
		return sqlstore.Run(ctx, sqlTx, &dialect, s.stmts, fn)
	})
}

// retried runs once, again (up to tries in all) while it reports again.
func (s *Store) retried(ctx context.Context, what string, tries int, once func(context.Context) (again bool, err error)) error {
	err := retry.Do(ctx, writeRetry(tries), func(ctx context.Context) error {
		if err := ctx.Err(); err != nil {
			return retry.Permanent(fmt.Errorf("begin %s: %w", what, err))
		}
		again, err := once(ctx)
		if !again {
			return retry.Permanent(err)
		}
		return err
	})
	if err != nil && ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
		return fmt.Errorf("retry %s: %w", what, ctx.Err())
	}
	return err
}

// writeRetry spaces the tries of a transaction: jittered and growing (up
// to 64ms), so racing writers fall apart.
func writeRetry(tries int) retry.Policy {
	return retry.Policy{First: 2 * time.Millisecond, Max: 64 * time.Millisecond, Jitter: retry.FullJitter, Tries: tries}
}

// dialect is how the shared statements run on Postgres: $N placeholders,
// no planner hints (it keeps statistics), and a path's statements combined
// where one can do (every statement is a round trip).
var dialect = sqlstore.Dialect{Rebind: rebind, Err: storeErr, Retry: retryable, SkipLocked: " FOR UPDATE SKIP LOCKED", OneTrip: true}

// rebind turns ? into $1, $2… in order, and ?N into $N.
func rebind(q string) string {
	var b strings.Builder
	b.Grow(len(q) + 16)
	n := 0
	for i := 0; i < len(q); i++ {
		if q[i] != '?' {
			b.WriteByte(q[i])
			continue
		}
		b.WriteByte('$')
		if i+1 < len(q) && q[i+1] >= '0' && q[i+1] <= '9' {
			continue // ?N: the digits follow
		}
		n++
		b.WriteString(strconv.Itoa(n))
	}
	return b.String()
}

func pgCode(err error) string {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code
	}
	return ""
}

// retryable: a serialization failure or deadlock (the server rolled the
// transaction back, even at commit), or, before the commit was sent, a
// lost connection (a restarted server, a cut network): nothing was kept.
// A connection lost during the commit may have committed, so that one is
// returned.
func retryable(err error, committing bool) bool {
	code := pgCode(err)
	switch {
	case code == "40001", code == "40P01": // serialization_failure, deadlock_detected
		return true
	case committing:
		return false
	case strings.HasPrefix(code, "08"), strings.HasPrefix(code, "57P"): // connection exception, server shutting down
		return true
	case code != "":
		return false
	}
	var ne net.Error
	return errors.Is(err, driver.ErrBadConn) || errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) ||
		errors.As(err, &ne) || pgconn.SafeToRetry(err)
}

// storeErr maps Postgres errors to the store's, keeping pgx's error in the
// chain for its message.
func storeErr(err error) error {
	if errors.Is(err, store.ErrConflict) || errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrNoSpace) {
		return err // mapped already
	}
	switch pgCode(err) {
	case "23505": // unique_violation
		return fmt.Errorf("%w: %w", store.ErrConflict, err)
	case "23503": // foreign_key_violation
		return fmt.Errorf("referenced row %w: %w", store.ErrNotFound, err)
	case "53100": // disk_full
		return fmt.Errorf("%w: %w", store.ErrNoSpace, err)
	}
	return err
}
