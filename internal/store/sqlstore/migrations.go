package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
	"time"
)

// Migration is one schema step of an engine, embedded with its store.
type Migration struct {
	Version int
	Name    string
	SQL     string
}

// Migrations reads the *.sql files of fsys's dir in order. Their versions
// must run 1, 2, 3… without gaps, so that the highest applied version says
// exactly which ones a database has.
func Migrations(fsys fs.FS, dir string) ([]Migration, error) {
	names, err := fs.Glob(fsys, dir+"/*.sql")
	if err != nil {
		return nil, err
	}
	var ms []Migration
	for _, name := range names {
		base := path.Base(name)
		prefix, _, _ := strings.Cut(base, "_")
		v, err := strconv.Atoi(prefix)
		if err != nil {
			return nil, fmt.Errorf("migration %s: name must start with a number and '_'", base)
		}
		b, err := fs.ReadFile(fsys, name)
		if err != nil {
			return nil, err
		}
		ms = append(ms, Migration{Version: v, Name: base, SQL: string(b)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].Version < ms[j].Version })
	for i, m := range ms {
		if m.Version != i+1 {
			return nil, fmt.Errorf("migration %s: expected version %d", m.Name, i+1)
		}
	}
	return ms, nil
}

// CheckVersion refuses a database whose schema is newer than the known
// migrations: an older drover would misread it.
func CheckVersion(engine string, current, known int) error {
	if current > known {
		return fmt.Errorf("%s database schema version %d is newer than this drover supports (version %d): upgrade drover", engine, current, known)
	}
	return nil
}

// Migrate brings the database of sqlTx to the last of ms, which run
// 1..len(ms), and commits: in one transaction, so a failed upgrade leaves
// it at its old version. createTable makes the engine's schema_migrations
// (version, applied_at) if it is missing.
func Migrate(ctx context.Context, sqlTx *sql.Tx, d *Dialect, engine, createTable string, ms []Migration) error {
	defer sqlTx.Rollback()
	if _, err := sqlTx.ExecContext(ctx, createTable); err != nil {
		return fmt.Errorf("create schema_migrations: %w", err)
	}
	var current int
	if err := sqlTx.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if err := CheckVersion(engine, current, len(ms)); err != nil {
		return err
	}
	record := `INSERT INTO schema_migrations (version, applied_at) VALUES (?, ?)`
	if d.Rebind != nil {
		record = d.Rebind(record)
	}
	for _, m := range ms[current:] {
		if _, err := sqlTx.ExecContext(ctx, m.SQL); err != nil {
			return fmt.Errorf("apply migration %s: %w", m.Name, err)
		}
		if _, err := sqlTx.ExecContext(ctx, record, m.Version, time.Now().UnixMilli()); err != nil {
			return fmt.Errorf("record migration %s: %w", m.Name, err)
		}
	}
	if err := sqlTx.Commit(); err != nil {
		return fmt.Errorf("commit migrations: %w", err)
	}
	return nil
}

// CheckSchema reports whether db's schema is at version known, the last
// migration this drover has: a database another, newer drover migrated
// since it was opened is not (the statements here may no longer fit it).
func CheckSchema(ctx context.Context, db *sql.DB, engine string, known int) error {
	var current int
	if err := db.QueryRowContext(ctx, `SELECT coalesce(max(version), 0) FROM schema_migrations`).Scan(&current); err != nil {
		return fmt.Errorf("read schema version: %w", err)
	}
	if current != known {
		return fmt.Errorf("%s database schema version %d, this drover's is %d", engine, current, known)
	}
	return nil
}
