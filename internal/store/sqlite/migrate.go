package sqlite

import (
	"context"
	"database/sql"
	"embed"
	"fmt"

	"drover/internal/store/sqlstore"
)

//go:embed migrations/*.sql
var migrationFS embed.FS

type migration = sqlstore.Migration

func migrations() ([]migration, error) { return sqlstore.Migrations(migrationFS, "migrations") }

// migrate applies the pending migrations in one transaction, so a failed
// upgrade leaves the database at its old version.
func migrate(ctx context.Context, db *sql.DB) error {
	ms, err := migrations()
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	return applyMigrations(ctx, db, ms)
}

// applyMigrations brings db to the last of ms, which run 1..len(ms); tests
// pass a prefix to build a database of an older version.
func applyMigrations(ctx context.Context, db *sql.DB, ms []migration) error {
	sqlTx, err := beginWrite(ctx, db)
	if err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	return sqlstore.Migrate(ctx, sqlTx, &dialect, "SQLite", `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		applied_at INTEGER NOT NULL
	) STRICT`, ms)
}

// CheckSchema reports whether the database is still at this drover's
// schema version (the hub's readiness check).
func (s *Store) CheckSchema(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return fmt.Errorf("load migrations: %w", err)
	}
	return sqlstore.CheckSchema(ctx, s.r, "SQLite", len(ms))
}
