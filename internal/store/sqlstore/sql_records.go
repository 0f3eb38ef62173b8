package sqlstore

import (
	"errors"
	"fmt"
	"time"

	"drover/internal/store"
)

// AppendLog stores data as the chunk starting at offset. The caller has
// checked offset against the attempt's LogSize.
func (t *tx) AppendLog(attemptID string, offset int64, data []byte) error {
	if offset < 0 {
		return fmt.Errorf("append log of attempt %s: negative offset %d", attemptID, offset)
	}
	if len(data) == 0 {
		return nil
	}
	return t.insertNew(fmt.Sprintf("append log of attempt %s at %d", attemptID, offset),
		`INSERT INTO log_chunks (attempt_id, "offset", data) VALUES (?, ?, ?)`+onConflict, attemptID, offset, data)
}

// ReadLog returns up to maxBytes bytes of the attempt's log from offset, which
// may fall inside a chunk. At or past the end it returns an empty slice.
func (t *tx) ReadLog(attemptID string, offset int64, maxBytes int) ([]byte, error) {
	what := fmt.Sprintf("read log of attempt %s at %d", attemptID, offset)
	if offset < 0 {
		return nil, fmt.Errorf("%s: negative offset", what)
	}
	if maxBytes <= 0 {
		return []byte{}, nil
	}
	end := offset + int64(maxBytes)
	// Start at the chunk containing offset, found through the primary key,
	// rather than scanning every chunk before it.
	rows, err := t.query(`SELECT "offset", data FROM log_chunks
		WHERE attempt_id = ?1 AND "offset" < ?3 AND "offset" >= coalesce(
			(SELECT max("offset") FROM log_chunks WHERE attempt_id = ?1 AND "offset" <= ?2), 0)
		ORDER BY "offset"`, attemptID, offset, end)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	defer rows.Close()
	w := NewLogWindow(what, offset, maxBytes)
	for rows.Next() {
		var at int64
		var data []byte
		if err := rows.Scan(&at, &data); err != nil {
			return nil, fmt.Errorf("%s: %w", what, err)
		}
		if err := w.Add(at, data); err != nil {
			return nil, err
		}
	}
	if err := rows.Err(); err != nil {
		t.retryable(err)
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return w.Bytes(), nil
}

// DeleteLog removes the attempt's whole log, so it can be sent again from 0.
func (t *tx) DeleteLog(attemptID string) error {
	_, err := t.exec("delete log of attempt "+attemptID, `DELETE FROM log_chunks WHERE attempt_id = ?`, attemptID)
	return err
}

// AddEvent appends e (ignoring e.Seq) and returns its sequence number.
func (t *tx) AddEvent(e store.Event) (int64, error) {
	return t.insertSeq("add event to job "+e.JobID, eventInsert, eventArgs(e)...)
}

// eventInsert is AddEvent's statement, its placeholders eventArgs.
const eventInsert = `INSERT INTO events (job_id, at, kind, actor, message, data) VALUES (?, ?, ?, ?, ?, ?) RETURNING seq`

func eventArgs(e store.Event) []any {
	return []any{e.JobID, Millis(e.At), e.Kind, e.Actor, e.Message, e.Data}
}

// insertSeq runs query, an INSERT … RETURNING seq, and returns the number.
func (t *tx) insertSeq(what, query string, args ...any) (int64, error) {
	var seq int64
	if err := t.queryRow(query, args...).Scan(&seq); err != nil {
		t.retryable(err)
		return 0, fmt.Errorf("%s: %w", what, t.d.Err(err))
	}
	return seq, nil
}

// Events lists the job's events after afterSeq in order; limit <= 0 means
// all of them.
func (t *tx) Events(jobID string, afterSeq int64, limit int) ([]store.Event, error) {
	return all(t, "events of job "+jobID, ScanEvent,
		"SELECT "+EventCols+` FROM events
		WHERE job_id = ? AND seq > ? ORDER BY seq LIMIT ?`, jobID, afterSeq, noLimit(limit))
}

func (t *tx) Request(runnerID, requestID string) ([]byte, bool, error) {
	resp, err := one(t, fmt.Sprintf("request %s of runner %s", requestID, runnerID), Value[[]byte],
		`SELECT response FROM requests WHERE runner_id = ? AND request_id = ?`, runnerID, requestID)
	if errors.Is(err, store.ErrNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, err
	}
	if resp == nil {
		resp = []byte{}
	}
	return resp, true, nil
}

func (t *tx) PutRequest(runnerID, requestID string, response []byte, at time.Time) error {
	if response == nil {
		response = []byte{} // the column is NOT NULL; nil would bind as NULL
	}
	return t.insertNew(fmt.Sprintf("record request %s of runner %s", requestID, runnerID),
		`INSERT INTO requests (runner_id, request_id, response, created_at) VALUES (?, ?, ?, ?)`+onConflict,
		runnerID, requestID, response, Millis(at))
}

// PruneRequests forgets requests recorded before the given time.
func (t *tx) PruneRequests(before time.Time) error {
	_, err := t.exec("prune requests", `DELETE FROM requests WHERE created_at < ?`, Millis(before))
	return err
}

func (t *tx) Meta(key string) (string, error) {
	return one(t, "meta "+key, Value[string], `SELECT value FROM meta WHERE key = ?`, key)
}

func (t *tx) SetMeta(key, value string) error {
	_, err := t.exec("set meta "+key,
		`INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value`,
		key, value)
	return err
}
