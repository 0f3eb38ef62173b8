package hub

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"drover/internal/store/postgres"
	"drover/internal/store/sqlite"
	"drover/internal/store/sqlstore"
)

// CopyDB copies the whole state of a stopped SQLite hub (its database
// file at from) into the empty Postgres database at to, in one
// transaction. The source is brought to this drover's schema first, as a
// start of the hub would; a target with rows is refused
// (postgres.ErrNotEmpty). The hub's data directory (admin token, hosted
// repositories) stays where it is: run the hub on it with --db.
func CopyDB(ctx context.Context, from, to string) (sqlstore.Copied, error) {
	if !postgres.IsURL(to) {
		return nil, errors.New("the target must be a postgres:// URL")
	}
	if _, err := os.Stat(from); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("no SQLite database at %s", from)
	} else if err != nil {
		return nil, err
	}
	src, err := sqlite.Open(ctx, from)
	if err != nil {
		return nil, err
	}
	defer src.Close()
	dst, err := postgres.Open(ctx, to)
	if err != nil {
		return nil, err
	}
	defer dst.Close()
	var copied sqlstore.Copied
	err = src.Snapshot(ctx, func(tx *sql.Tx) (err error) {
		copied, err = dst.CopyFrom(ctx, tx)
		return err
	})
	return copied, err
}
