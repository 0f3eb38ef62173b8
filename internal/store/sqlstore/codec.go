// Package sqlstore is what drover's SQL stores (sqlite, postgres) share
// besides their SQL: every entity's columns in table order, the arguments
// written for them and the scan reading them back, and the column codecs
// (times as unix milliseconds, maps and slices as JSON text). Both engines
// keep the same logical schema, so one row means the same in either, and
// a rule about a column lives here once.
package sqlstore

import (
	"database/sql/driver"
	"encoding/json"
	"fmt"
	"time"
)

// Scanner is a row: *sql.Row, *sql.Rows, pgx.Row and pgx.Rows all are.
type Scanner interface{ Scan(dest ...any) error }

// Value scans a single-column row.
func Value[T any](s Scanner) (v T, err error) {
	err = s.Scan(&v)
	return v, err
}

// Millis is how a time is stored: unix milliseconds.
func Millis(t time.Time) int64 { return t.UnixMilli() }

// OptMillis stores an optional time (NULL when unset).
func OptMillis(t *time.Time) any {
	if t == nil {
		return nil
	}
	return t.UnixMilli()
}

// OptInt stores an optional integer (NULL when unset).
func OptInt(p *int) any {
	if p == nil {
		return nil
	}
	return int64(*p)
}

// FromMillis reads a stored time back, in UTC.
func FromMillis(v int64) time.Time { return time.UnixMilli(v).UTC() }

// TimeCol scans a time column into p.
type TimeCol struct{ P *time.Time }

func (c TimeCol) Scan(src any) error {
	v, ok := src.(int64)
	if !ok {
		return fmt.Errorf("time column holds %T, want an integer", src)
	}
	*c.P = FromMillis(v)
	return nil
}

// OptTimeCol scans an optional time column into p.
type OptTimeCol struct{ P **time.Time }

func (c OptTimeCol) Scan(src any) error {
	*c.P = nil
	if src == nil {
		return nil
	}
	var t time.Time
	if err := (TimeCol{&t}).Scan(src); err != nil {
		return err
	}
	*c.P = &t
	return nil
}

// OptIntCol scans an optional integer column into p.
type OptIntCol struct{ P **int }

func (c OptIntCol) Scan(src any) error {
	*c.P = nil
	switch v := src.(type) {
	case nil:
		return nil
	case int64:
		n := int(v)
		*c.P = &n
		return nil
	}
	return fmt.Errorf("integer column holds %T", src)
}

// JSONArg stores a map or slice as JSON text.
type JSONArg struct{ V any }

func (a JSONArg) Value() (driver.Value, error) {
	b, err := json.Marshal(a.V)
	if err != nil {
		return nil, err
	}
	return string(b), nil
}

// JSONCol decodes JSON text into p, a pointer to a map or slice.
type JSONCol struct{ P any }

func (c JSONCol) Scan(src any) error {
	switch v := src.(type) {
	case string:
		return json.Unmarshal([]byte(v), c.P)
	case []byte:
		return json.Unmarshal(v, c.P)
	}
	return fmt.Errorf("JSON column holds %T, want text", src)
}
