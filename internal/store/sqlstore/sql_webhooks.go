package sqlstore

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"drover/internal/job"
	"drover/internal/store"
)

// Webhooks, JobChanges and WebhookDeliveries are the tables of outbound
// webhooks (internal/webhook): the hooks, the outbox of jobs' changes and
// the deliveries it expands into.
var (
	Webhooks = Table{"webhooks", []string{
		"id", "owner_id", "url", "events", "project", "format", "secret", "created_at"}}
	WebhookDeliveries = Table{"webhook_deliveries", []string{
		"id", "hook_id", "job_id", "change_seq", "event", "payload", "state", "attempts", "status", "error",
		"next_at", "created_at", "updated_at"}}
)

// JobChangeCols are a job change's columns, for a SELECT scanned by
// scanJobChange.
const JobChangeCols = "seq, job_id, state, at"

var (
	webhooks          = newTable(Webhooks)
	webhookList       = "SELECT " + strings.Replace(webhooks.cols, "secret", "''", 1) + " FROM webhooks "
	webhookDeliveries = newTable(WebhookDeliveries)
	// addDelivery inserts nothing for a hook removed meanwhile, nor twice
	// for one change.
	addDelivery = fmt.Sprintf("INSERT INTO webhook_deliveries (%s) SELECT ?%s WHERE EXISTS (SELECT 1 FROM webhooks WHERE id = ?)"+onConflict,
		webhookDeliveries.cols, strings.Repeat(", ?", len(WebhookDeliveries.Cols)-1))
)

func scanWebhook(s Scanner) (w store.Webhook, err error) {
	err = s.Scan(&w.ID, &w.OwnerID, &w.URL, JSONCol{&w.Events}, &w.Project, &w.Format, &w.Secret, TimeCol{&w.CreatedAt})
	return w, err
}

func (t *tx) InsertWebhook(w store.Webhook) error {
	return t.insert(webhooks, "webhook "+w.ID, []any{
		w.ID, w.OwnerID, w.URL, JSONArg{w.Events}, w.Project, w.Format, w.Secret, Millis(w.CreatedAt)})
}

func (t *tx) Webhook(id string) (store.Webhook, error) {
	return one(t, "webhook "+id, scanWebhook, webhooks.query("WHERE id = ?"), id)
}

// Webhooks never reads the secrets: a listing cannot leak one.
func (t *tx) Webhooks(ownerID string) ([]store.Webhook, error) {
	if ownerID == "" {
		return all(t, "webhooks", scanWebhook, webhookList+"ORDER BY created_at, id")
	}
	return all(t, "webhooks of "+ownerID, scanWebhook, webhookList+"WHERE owner_id = ? ORDER BY created_at, id", ownerID)
}

func (t *tx) RemoveWebhook(id string) error {
	what := "remove webhook " + id
	if _, err := t.exec(what, `DELETE FROM webhook_deliveries WHERE hook_id = ?`, id); err != nil {
		return err
	}
	res, err := t.exec(what, `DELETE FROM webhooks WHERE id = ?`, id)
	if err != nil {
		return err
	}
	return affected(what, res)
}

// noteJobState records, while any webhook exists, a job's move from the
// state it has in the database (old; "" for a new job) to state: the
// outbox row of outbound webhooks, in the job's own transaction.
func (t *tx) noteJobState(id string, old, state job.State, at time.Time) error {
	if old == state {
		return nil
	}
	_, err := t.exec("record the change of job "+id,
		`INSERT INTO job_changes (job_id, state, at) SELECT ?, ?, ? WHERE EXISTS (SELECT 1 FROM webhooks)`,
		id, string(state), Millis(at))
	return err
}

// jobStateIfHooks reads a job's stored state while any webhook exists
// (what noteJobState compares with); ok is false when none does, or the
// job is not there.
func (t *tx) jobStateIfHooks(id string) (state job.State, ok bool, err error) {
	err = t.queryRow(`SELECT state FROM jobs WHERE id = ? AND EXISTS (SELECT 1 FROM webhooks)`, id).Scan(&state)
	if errors.Is(err, sql.ErrNoRows) {
		return "", false, nil
	}
	if err != nil {
		t.retryable(err)
		return "", false, fmt.Errorf("read the state of job %s: %w", id, t.d.Err(err))
	}
	return state, true, nil
}

func scanJobChange(s Scanner) (c store.JobChange, err error) {
	err = s.Scan(&c.Seq, &c.JobID, &c.State, TimeCol{&c.At})
	return c, err
}

func (t *tx) JobChanges(limit int) ([]store.JobChange, error) {
	return all(t, "job changes", scanJobChange, "SELECT "+JobChangeCols+" FROM job_changes ORDER BY seq LIMIT ?", noLimit(limit))
}

func (t *tx) DoneJobChange(seq int64) error {
	_, err := t.exec(fmt.Sprintf("forget job change %d", seq), `DELETE FROM job_changes WHERE seq = ?`, seq)
	return err
}

func scanWebhookDelivery(s Scanner) (d store.WebhookDelivery, err error) {
	err = s.Scan(&d.ID, &d.HookID, &d.JobID, &d.ChangeSeq, &d.Event, &d.Payload, &d.State, &d.Attempts, &d.Status,
		&d.Error, TimeCol{&d.NextAt}, TimeCol{&d.CreatedAt}, TimeCol{&d.UpdatedAt})
	return d, err
}

func (t *tx) AddWebhookDelivery(d store.WebhookDelivery) error {
	_, err := t.exec("add delivery "+d.ID+" of webhook "+d.HookID, addDelivery,
		d.ID, d.HookID, d.JobID, d.ChangeSeq, d.Event, d.Payload, string(d.State), d.Attempts, d.Status, d.Error,
		Millis(d.NextAt), Millis(d.CreatedAt), Millis(d.UpdatedAt), d.HookID)
	return err
}

func (t *tx) UpdateWebhookDelivery(d store.WebhookDelivery) error {
	what := "update delivery " + d.ID
	res, err := t.exec(what, `UPDATE webhook_deliveries SET state = ?, attempts = ?, status = ?, error = ?, next_at = ?, updated_at = ? WHERE id = ?`,
		string(d.State), d.Attempts, d.Status, d.Error, Millis(d.NextAt), Millis(d.UpdatedAt), d.ID)
	if err != nil {
		return err
	}
	return affected(what, res)
}

func (t *tx) ClaimWebhookDelivery(id string, now, until time.Time) error {
	what := "claim delivery " + id
	res, err := t.exec(what, `UPDATE webhook_deliveries SET next_at = ? WHERE id = ? AND state = 'pending' AND next_at <= ?`,
		Millis(until), id, Millis(now))
	if err != nil {
		return err
	}
	return affected(what, res)
}

func (t *tx) DueWebhookDeliveries(now time.Time, limit int) ([]store.WebhookDelivery, error) {
	return all(t, "due webhook deliveries", scanWebhookDelivery, webhookDeliveries.query(`d WHERE d.state = 'pending' AND d.next_at <= ?
		AND NOT EXISTS (SELECT 1 FROM webhook_deliveries e WHERE e.hook_id = d.hook_id AND e.job_id = d.job_id
			AND e.state = 'pending' AND e.change_seq < d.change_seq)
		ORDER BY d.next_at, d.change_seq LIMIT ?`), Millis(now), noLimit(limit))
}

func (t *tx) WebhookDeliveries(hookID string, limit int) ([]store.WebhookDelivery, error) {
	return all(t, "deliveries of webhook "+hookID, scanWebhookDelivery,
		webhookDeliveries.query("WHERE hook_id = ? ORDER BY change_seq DESC, id LIMIT ?"), hookID, noLimit(limit))
}

// PruneWebhookDeliveries finds what it removes by the due index: an ended
// delivery's next_at is when it ended.
func (t *tx) PruneWebhookDeliveries(before time.Time, limit int) (int64, error) {
	what := "prune webhook deliveries"
	res, err := t.exec(what, `DELETE FROM webhook_deliveries WHERE id IN (SELECT id FROM webhook_deliveries
		WHERE state IN ('delivered', 'failed') AND next_at < ? LIMIT ?)`, Millis(before), noLimit(limit))
	if err != nil {
		return 0, err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return 0, fmt.Errorf("%s: %w", what, err)
	}
	return n, nil
}
