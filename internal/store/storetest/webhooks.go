package storetest

import (
	"errors"
	"fmt"
	"testing"

	"drover/internal/job"
	"drover/internal/store"
)

// webhook has every field set.
func webhook(id, owner string, created int64) store.Webhook {
	return store.Webhook{
		ID: id, OwnerID: owner, URL: "https://hooks.example/" + id, Events: []string{"job.finished", "job.asked"},
		Project: "web", Format: "slack", Secret: "whsec-" + id, CreatedAt: at(created),
	}
}

// delivery has every field set.
func delivery(id, hook, jobID string, seq int64, state store.WebhookDeliveryState, next int64) store.WebhookDelivery {
	return store.WebhookDelivery{
		ID: id, HookID: hook, JobID: jobID, ChangeSeq: seq, Event: "job.finished", Payload: `{"job":"ünïcode"}`,
		State: state, Attempts: 2, Status: 503, Error: "busy", NextAt: at(next), CreatedAt: at(1), UpdatedAt: at(2),
	}
}

func testWebhooks(t *testing.T, s store.Store) {
	seed(t, s)
	mustWrite(t, s, func(tx store.Tx) error { return tx.InsertUser(user("u-2", "bob")) })
	list := func(owner string) []store.Webhook {
		return get(t, s, func(tx store.Tx) ([]store.Webhook, error) { return tx.Webhooks(owner) })
	}
	equal(t, "Webhooks of none", list(""), nil)
	w1, w2, w3 := webhook("w-1", "u-1", 10), webhook("w-2", "u-2", 20), webhook("w-3", "u-1", 30)
	for _, w := range []store.Webhook{w3, w1, w2} {
		mustWrite(t, s, func(tx store.Tx) error { return tx.InsertWebhook(w) })
	}
	equal(t, "Webhook", get(t, s, func(tx store.Tx) (store.Webhook, error) { return tx.Webhook("w-1") }), w1)
	writeErr(t, s, "InsertWebhook(dup)", store.ErrConflict, func(tx store.Tx) error { return tx.InsertWebhook(w1) })
	unsecret := func(ws ...store.Webhook) []store.Webhook {
		for i := range ws {
			ws[i].Secret = ""
		}
		return ws
	}
	equal(t, "Webhooks (no secrets)", list(""), unsecret(w1, w2, w3))
	equal(t, "Webhooks of u-1", list("u-1"), unsecret(w1, w3))

	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(tx.AddWebhookDelivery(delivery("d-1", "w-1", "j-1", 5, store.WebhookPending, 0)),
			tx.AddWebhookDelivery(delivery("d-2", "w-2", "j-1", 5, store.WebhookPending, 0)))
	})
	mustWrite(t, s, func(tx store.Tx) error { return tx.RemoveWebhook("w-1") })
	writeErr(t, s, "RemoveWebhook(missing)", store.ErrNotFound, func(tx store.Tx) error { return tx.RemoveWebhook("w-1") })
	readErr(t, s, "Webhook of a removed id", store.ErrNotFound, func(tx store.Tx) error {
		_, err := tx.Webhook("w-1")
		return err
	})
	equal(t, "deliveries of a removed hook", get(t, s, func(tx store.Tx) ([]store.WebhookDelivery, error) {
		return tx.WebhookDeliveries("w-1", 0)
	}), nil)
	equal(t, "the other hook's deliveries stay", len(get(t, s, func(tx store.Tx) ([]store.WebhookDelivery, error) {
		return tx.WebhookDeliveries("w-2", 0)
	})), 1)
}

// testJobChanges: a job's writes record its changes of state while any
// webhook exists, and only then; a write that did not happen records none.
func testJobChanges(t *testing.T, s store.Store) {
	seed(t, s)
	changes := func() []store.JobChange {
		return get(t, s, func(tx store.Tx) ([]store.JobChange, error) { return tx.JobChanges(0) })
	}
	j := newJob("j-2", "u-1", job.Queued, 10)
	mustWrite(t, s, func(tx store.Tx) error { return tx.InsertJob(j) })
	j.State = job.Running
	mustWrite(t, s, func(tx store.Tx) error { return tx.UpdateJob(j) })
	equal(t, "changes without hooks", changes(), nil)

	mustWrite(t, s, func(tx store.Tx) error { return tx.InsertWebhook(webhook("w-1", "u-1", 1)) })
	j3 := newJob("j-3", "u-1", job.Queued, 20)
	mustWrite(t, s, func(tx store.Tx) error { return tx.InsertJob(j3) })
	j.UpdatedAt = at(30)
	mustWrite(t, s, func(tx store.Tx) error { return tx.UpdateJob(j) }) // still running: no change
	j.State, j.UpdatedAt = job.Waiting, at(40)
	mustWrite(t, s, func(tx store.Tx) error { return tx.UpdateJob(j) })
	stale := j
	stale.State = job.Failed
	writeErr(t, s, "UpdateJobAt(stale epoch)", store.ErrConflict, func(tx store.Tx) error { return tx.UpdateJobAt(stale, j.Epoch+1) })
	j.State, j.UpdatedAt = job.Completed, at(50)
	mustWrite(t, s, func(tx store.Tx) error { return tx.UpdateJobAt(j, j.Epoch) })

	got := changes()
	var want []string
	for _, c := range got {
		want = append(want, fmt.Sprintf("%s %s %d", c.JobID, c.State, c.At.Sub(at(0)).Milliseconds()))
	}
	equal(t, "changes", want, []string{"j-3 queued 21", "j-2 waiting 40", "j-2 completed 50"})
	for i := 1; i < len(got); i++ {
		if got[i].Seq <= got[i-1].Seq {
			t.Errorf("changes out of order: %+v", got)
		}
	}
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(tx.DoneJobChange(got[0].Seq), tx.DoneJobChange(got[0].Seq))
	})
	equal(t, "changes after one is done", len(changes()), 2)
	equal(t, "JobChanges(1)", get(t, s, func(tx store.Tx) ([]store.JobChange, error) { return tx.JobChanges(1) }), got[1:2])
}

// testWebhookDeliveries: an expansion that runs twice adds nothing, and a
// job's deliveries to a hook are due one at a time, in order.
func testWebhookDeliveries(t *testing.T, s store.Store) {
	seed(t, s)
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(tx.InsertWebhook(webhook("w-1", "u-1", 1)), tx.InsertWebhook(webhook("w-2", "u-1", 2)))
	})
	due := func(now int64) []string {
		ds := get(t, s, func(tx store.Tx) ([]store.WebhookDelivery, error) { return tx.DueWebhookDeliveries(at(now), 0) })
		var ids []string
		for _, d := range ds {
			ids = append(ids, d.ID)
		}
		return ids
	}
	d1 := delivery("d-1", "w-1", "j-1", 5, store.WebhookPending, 10)
	for _, d := range []store.WebhookDelivery{
		d1,
		delivery("d-2", "w-1", "j-1", 7, store.WebhookPending, 0),  // after d-1: waits for it
		delivery("d-3", "w-2", "j-1", 7, store.WebhookPending, 5),  // another hook: its own order
		delivery("d-4", "w-1", "j-2", 6, store.WebhookPending, 20), // another job
		delivery("d-5", "w-1", "j-3", 3, store.WebhookDelivered, 0),
	} {
		mustWrite(t, s, func(tx store.Tx) error { return tx.AddWebhookDelivery(d) })
	}
	mustWrite(t, s, func(tx store.Tx) error {
		dup := delivery("d-9", "w-1", "j-1", 5, store.WebhookPending, 0) // the same change again
		gone := delivery("d-8", "w-7", "j-1", 5, store.WebhookPending, 0)
		return errors.Join(tx.AddWebhookDelivery(dup), tx.AddWebhookDelivery(gone))
	})
	equal(t, "due at 4", due(4), nil)
	equal(t, "due at 10", due(10), []string{"d-3", "d-1"})
	equal(t, "due at 100", due(100), []string{"d-3", "d-1", "d-4"})

	mustWrite(t, s, func(tx store.Tx) error { return tx.ClaimWebhookDelivery("d-4", at(100), at(200)) })
	equal(t, "due once d-4 is claimed", due(100), []string{"d-3", "d-1"})
	equal(t, "due once d-4's claim lapsed", due(200), []string{"d-3", "d-1", "d-4"})
	for _, c := range []struct {
		id  string
		now int64
	}{{"d-4", 100}, {"d-5", 100}, {"d-9", 100}} {
		writeErr(t, s, "ClaimWebhookDelivery("+c.id+") claimed, delivered or missing", store.ErrNotFound,
			func(tx store.Tx) error { return tx.ClaimWebhookDelivery(c.id, at(c.now), at(300)) })
	}
	d1.State, d1.Attempts, d1.Status, d1.Error, d1.NextAt, d1.UpdatedAt = store.WebhookDelivered, 3, 204, "", at(11), at(12)
	mustWrite(t, s, func(tx store.Tx) error { return tx.UpdateWebhookDelivery(d1) })
	equal(t, "due once d-1 was delivered", due(200), []string{"d-2", "d-3", "d-4"})
	writeErr(t, s, "UpdateWebhookDelivery(missing)", store.ErrNotFound, func(tx store.Tx) error {
		return tx.UpdateWebhookDelivery(delivery("d-9", "w-1", "j-1", 1, store.WebhookPending, 0))
	})
	log := get(t, s, func(tx store.Tx) ([]store.WebhookDelivery, error) { return tx.WebhookDeliveries("w-1", 0) })
	equal(t, "delivery log", len(log), 4)
	equal(t, "newest delivery", log[0].ID, "d-2")
	equal(t, "a delivery as updated", log[2], d1)
	prune := func(before int64) (n int64) {
		mustWrite(t, s, func(tx store.Tx) (err error) { n, err = tx.PruneWebhookDeliveries(at(before), 0); return err })
		return n
	}
	equal(t, "pruned before 5 (d-5: ended at 0)", prune(5), int64(1))
	equal(t, "pruned before 1000 (d-1: ended at 11; the rest pending)", prune(1000), int64(1))
	equal(t, "delivery log after pruning", len(get(t, s, func(tx store.Tx) ([]store.WebhookDelivery, error) {
		return tx.WebhookDeliveries("w-1", 0)
	})), 2)
	equal(t, "due after pruning", due(200), []string{"d-2", "d-3", "d-4"})
	equal(t, "WebhookDeliveries(2)", len(get(t, s, func(tx store.Tx) ([]store.WebhookDelivery, error) {
		return tx.WebhookDeliveries("w-1", 2)
	})), 2)
}
