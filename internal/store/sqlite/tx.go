package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"

	"drover/internal/store"
	"drover/internal/store/sqlrow"
)

// tx implements store.Tx. The interface's methods take no context, so the
// one given to Read or Write is kept here and used for every statement.
type tx struct {
	ctx context.Context
	tx  *sql.Tx
}

// table describes an entity table whose first column is its primary key and
// whose rows are written whole, so that inserts, updates and selects of one
// entity share one column list.
type table struct {
	name   string
	cols   string // comma-separated, for SELECT
	insert string
	update string
}

func newTable(tb sqlrow.Table) table {
	name, cols := tb.Name, tb.Cols
	set := make([]string, len(cols)-1)
	for i, c := range cols[1:] {
		set[i] = c + " = ?"
	}
	return table{
		name: name,
		cols: strings.Join(cols, ", "),
		insert: fmt.Sprintf("INSERT INTO %s (%s) VALUES (?%s)", name, strings.Join(cols, ", "),
			strings.Repeat(", ?", len(cols)-1)),
		update: fmt.Sprintf("UPDATE %s SET %s WHERE %s = ?", name, strings.Join(set, ", "), cols[0]),
	}
}

// query returns a SELECT of all columns followed by rest (WHERE, ORDER BY…).
func (t table) query(rest string) string {
	return "SELECT " + t.cols + " FROM " + t.name + " " + rest
}

func (t *tx) exec(what, query string, args ...any) (sql.Result, error) {
	res, err := t.tx.ExecContext(t.ctx, query, args...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, storeErr(err))
	}
	return res, nil
}

// insert writes a new row; args are in the table's column order.
func (t *tx) insert(tb table, what string, args []any) error {
	_, err := t.exec("insert "+what, tb.insert, args...)
	return err
}

// update rewrites the row whose key is args[0] and reports ErrNotFound if
// there is none.
func (t *tx) update(tb table, what string, args []any) error {
	res, err := t.exec("update "+what, tb.update, append(args[1:len(args):len(args)], args[0])...)
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

// one returns the single row of query, or ErrNotFound.
func one[T any](t *tx, what string, scan func(sqlrow.Scanner) (T, error), query string, args ...any) (T, error) {
	v, err := scan(t.tx.QueryRowContext(t.ctx, query, args...))
	if errors.Is(err, sql.ErrNoRows) {
		return v, fmt.Errorf("%s: %w", what, store.ErrNotFound)
	}
	if err != nil {
		return v, fmt.Errorf("read %s: %w", what, err)
	}
	return v, nil
}

// all returns every row of query, never nil.
func all[T any](t *tx, what string, scan func(sqlrow.Scanner) (T, error), query string, args ...any) ([]T, error) {
	rows, err := t.tx.QueryContext(t.ctx, query, args...)
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
		return nil, fmt.Errorf("list %s: %w", what, err)
	}
	return vs, nil
}

// noLimit turns a non-positive limit into SQLite's "no limit".
func noLimit(limit int) int {
	if limit <= 0 {
		return -1
	}
	return limit
}
