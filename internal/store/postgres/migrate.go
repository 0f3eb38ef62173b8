package postgres

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

	"drover/internal/store/sqlstore"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// migrationLock keys the advisory lock that makes hubs starting together
// migrate one at a time.
const migrationLock = 0x64726f766572 // "drover"

func migrate(ctx context.Context, s *Store) error {
	ms, err := sqlstore.Migrations(migrationFS, "migrations")
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	return applyMigrations(ctx, s.db, ms)
}

// applyMigrations brings db to the last of ms, one hub at a time.
func applyMigrations(ctx context.Context, db *sql.DB, ms []sqlstore.Migration) error {
	sqlTx, err := db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := sqlTx.ExecContext(ctx, `SELECT pg_advisory_xact_lock($1)`, int64(migrationLock)); err != nil {
		sqlTx.Rollback()
		return fmt.Errorf("migrate: lock: %w", err)
	}
	return sqlstore.Migrate(ctx, sqlTx, &dialect, "Postgres", `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    BIGINT PRIMARY KEY,
		applied_at BIGINT NOT NULL
	)`, ms)
}

// CheckSchema reports whether the database is still at this drover's
// schema version (the hub's readiness check).
func (s *Store) CheckSchema(ctx context.Context) error {
	ms, err := sqlstore.Migrations(migrationFS, "migrations")
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	return sqlstore.CheckSchema(ctx, s.db, "Postgres", len(ms))
}

// Shared says several hubs may use one Postgres database at once.
func (s *Store) Shared() bool { return true }
