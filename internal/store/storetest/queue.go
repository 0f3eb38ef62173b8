package storetest

import (
	"errors"
	"testing"

	"drover/internal/job"
	"drover/internal/store"
)

// testQueuedHeads (seed's j-1 is running): the oldest jobs of every shape, however many jobs of
// another shape are older.
func testQueuedHeads(t *testing.T, s store.Store) {
	seed(t, s)
	shaped := func(id, requester, agent, label, project, account string, state job.State, created int64) store.Job {
		j := newJob(id, requester, state, created)
		j.Agent, j.Labels, j.Project, j.Account = agent, map[string]string{"gpu": label}, project, account
		return j
	}
	imaged := shaped("q-10", "u-1", "claude", "a100", "", "", job.Queued, 1000) // another image: another shape
	imaged.Image = "swebench/sweb.eval.x86_64.a-1"
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(
			tx.InsertUser(user("u-2", "bob")),
			// u-1's three claude jobs on a100 form one shape; older ones
			// ended and do not count.
			tx.InsertJob(shaped("q-0", "u-1", "claude", "a100", "", "", job.Completed, 50)),
			tx.InsertJob(shaped("q-1", "u-1", "claude", "a100", "", "", job.Queued, 100)),
			tx.InsertJob(shaped("q-2", "u-1", "claude", "a100", "", "", job.Queued, 200)),
			tx.InsertJob(shaped("q-3", "u-1", "claude", "a100", "", "", job.Queued, 300)),
			// each of these differs from that shape in one field
			tx.InsertJob(shaped("q-4", "u-2", "claude", "a100", "", "", job.Queued, 400)),
			tx.InsertJob(shaped("q-5", "u-1", "exec", "a100", "", "", job.Queued, 500)),
			tx.InsertJob(shaped("q-6", "u-1", "claude", "h100", "", "", job.Queued, 600)),
			tx.InsertJob(shaped("q-7", "u-1", "claude", "a100", "web", "", job.Queued, 700)),
			tx.InsertJob(shaped("q-8", "u-1", "claude", "a100", "", "acct", job.Queued, 800)),
			tx.InsertJob(shaped("q-9", "u-1", "claude", "a100", "", "", job.Running, 900)),
			tx.InsertJob(imaged),
		)
	})
	heads := func(n int) []string {
		return jobIDs(get(t, s, func(tx store.Tx) ([]store.Job, error) { return tx.QueuedHeads(n) }))
	}
	equal(t, "QueuedHeads(1)", heads(1), []string{"q-1", "q-4", "q-5", "q-6", "q-7", "q-8", "q-10"})
	equal(t, "QueuedHeads(2)", heads(2), []string{"q-1", "q-2", "q-4", "q-5", "q-6", "q-7", "q-8", "q-10"})
	equal(t, "QueuedHeads(0)", heads(0), []string{"q-1", "q-2", "q-3", "q-4", "q-5", "q-6", "q-7", "q-8", "q-10"})
	equal(t, "the image job", get(t, s, func(tx store.Tx) (store.Job, error) { return tx.Job("q-10") }), imaged)
	equal(t, "QueuedHeads(1)[0]", get(t, s, func(tx store.Tx) ([]store.Job, error) { return tx.QueuedHeads(1) })[0],
		shaped("q-1", "u-1", "claude", "a100", "", "", job.Queued, 100))
}

func testActiveByRequester(t *testing.T, s store.Store) {
	seed(t, s) // j-1 of u-1 is running
	mustWrite(t, s, func(tx store.Tx) error {
		return errors.Join(
			tx.InsertUser(user("u-2", "bob")),
			tx.InsertJob(newJob("c-1", "u-1", job.Offered, 10)),
			tx.InsertJob(newJob("c-2", "u-1", job.Queued, 20)),
			tx.InsertJob(newJob("c-3", "u-2", job.Running, 30)),
			tx.InsertJob(newJob("c-4", "u-2", job.Completed, 40)),
			tx.InsertJob(newJob("c-5", "u-2", job.Waiting, 50)),
		)
	})
	equal(t, "ActiveByRequester", get(t, s, func(tx store.Tx) (map[string]int, error) { return tx.ActiveByRequester() }),
		map[string]int{"u-1": 2, "u-2": 1})
}

// testClaims: only a queued job can be claimed, and a write at an epoch
// changes the job only while that is still its epoch.
func testClaims(t *testing.T, s store.Store) {
	seed(t, s) // j-1 is running
	mustWrite(t, s, func(tx store.Tx) error { return tx.InsertJob(newJob("q-1", "u-1", job.Queued, 10)) })
	var q store.Job
	mustWrite(t, s, func(tx store.Tx) (err error) { q, err = tx.ClaimQueued("q-1"); return err }) // a claim locks: it writes
	equal(t, "ClaimQueued", q, newJob("q-1", "u-1", job.Queued, 10))
	writeErr(t, s, "ClaimQueued of a running job", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.ClaimQueued("j-1"); return err })
	writeErr(t, s, "ClaimQueued of no job", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.ClaimQueued("nope"); return err })
	offered := q
	offered.State, offered.Epoch, offered.AttemptID = job.Offered, q.Epoch+1, "a-new"
	writeErr(t, s, "UpdateJobAt its epoch", nil, func(tx store.Tx) error { return tx.UpdateJobAt(offered, q.Epoch) })
	again := offered
	again.AttemptID, again.Epoch = "a-other", q.Epoch+1
	writeErr(t, s, "UpdateJobAt a passed epoch", store.ErrConflict, func(tx store.Tx) error { return tx.UpdateJobAt(again, q.Epoch) })
	writeErr(t, s, "ClaimQueued of an offered job", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.ClaimQueued("q-1"); return err })
	equal(t, "job after the fenced write", get(t, s, func(tx store.Tx) (store.Job, error) { return tx.Job("q-1") }), offered)
}
