package postgres

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"drover/internal/store/sqlstore"
)

// ErrNotEmpty: a copy goes only into a database without drover rows.
var ErrNotEmpty = errors.New("the target database is not empty")

// CopyFrom copies every row src reads (another store's database, at the
// same logical schema) into this one, in one transaction: all or nothing.
// The database must be empty; event numbers (jobs' and pipelines') carry
// on after the copied ones.
func (s *Store) CopyFrom(ctx context.Context, src *sql.Tx) (sqlstore.Copied, error) {
	dst, err := s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelSerializable})
	if err != nil {
		return nil, fmt.Errorf("begin copy: %w", err)
	}
	defer dst.Rollback()
	// No other writer (a hub started on it meanwhile) may slip rows in.
	if _, err := dst.ExecContext(ctx, `LOCK TABLE users, meta IN EXCLUSIVE MODE`); err != nil {
		return nil, fmt.Errorf("lock target: %w", err)
	}
	if table, err := sqlstore.Empty(ctx, dst); err != nil {
		return nil, err
	} else if table != "" {
		return nil, fmt.Errorf("%w: table %s has rows; copy into a new database", ErrNotEmpty, table)
	}
	copied, err := sqlstore.Copy(ctx, src, dst, &dialect)
	if err != nil {
		return nil, err
	}
	for _, table := range []string{"events", "pipeline_events", "job_changes"} {
		if _, err := dst.ExecContext(ctx, `SELECT setval(pg_get_serial_sequence('`+table+`', 'seq'), coalesce(max(seq), 0) + 1, false) FROM `+table); err != nil {
			return nil, fmt.Errorf("carry on the numbers of %s: %w", table, err)
		}
	}
	if err := dst.Commit(); err != nil {
		return nil, fmt.Errorf("commit copy: %w", storeErr(err))
	}
	return copied, nil
}
