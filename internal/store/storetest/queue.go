package storetest

import (
	"errors"
	"fmt"
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

	// QueuedHeadsWithRequesters is QueuedHeads with each requester's row.
	mustWrite(t, s, func(tx store.Tx) error {
		bob := user("u-2", "bob")
		bob.RemovedAt = ptr(at(5))
		return tx.UpdateUser(bob)
	})
	for _, n := range []int{1, 2, 0} {
		mustRead(t, s, func(tx store.Tx) error {
			js, us, err := tx.QueuedHeadsWithRequesters(n)
			want := get(t, s, func(tx store.Tx) ([]store.Job, error) { return tx.QueuedHeads(n) })
			equal(t, fmt.Sprintf("QueuedHeadsWithRequesters(%d): the jobs", n), js, want)
			bob := user("u-2", "bob")
			bob.RemovedAt = ptr(at(5))
			equal(t, fmt.Sprintf("QueuedHeadsWithRequesters(%d): the requesters", n), us, map[string]store.User{"u-1": user("u-1", "alice"), "u-2": bob})
			return err
		})
	}
	mustWrite(t, s, func(tx store.Tx) error {
		for _, id := range []string{"q-1", "q-2", "q-3", "q-4", "q-5", "q-6", "q-7", "q-8", "q-10"} {
			j, err := tx.Job(id)
			if err != nil {
				return err
			}
			j.State = job.Cancelled
			if err := tx.UpdateJob(j); err != nil {
				return err
			}
		}
		return nil
	})
	mustRead(t, s, func(tx store.Tx) error {
		js, us, err := tx.QueuedHeadsWithRequesters(1)
		if len(js) != 0 || len(us) != 0 {
			t.Errorf("QueuedHeadsWithRequesters with nothing queued: %v, %v", jobIDs(js), us)
		}
		return err
	})
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
	// ClaimQueuedFor is ClaimQueued and RunnerShares in one.
	sh := store.Share{RunnerID: "r-1", Kind: store.ShareUser, Subject: "u-2", CreatedAt: at(5)}
	mustWrite(t, s, func(tx store.Tx) error { return tx.PutShare(sh) })
	wantRunner := get(t, s, func(tx store.Tx) (store.Runner, error) { return tx.Runner("r-1") })
	wantRunner.Held = nil
	mustWrite(t, s, func(tx store.Tx) error {
		j, rn, shares, err := tx.ClaimQueuedFor("q-1", "r-1")
		equal(t, "ClaimQueuedFor: the job", j, q)
		equal(t, "ClaimQueuedFor: the runner", rn, wantRunner)
		equal(t, "ClaimQueuedFor: its shares", shares, []store.Share{sh})
		return err
	})
	for _, c := range []struct{ what, job, runner string }{
		{"a running job", "j-1", "r-1"}, {"no job", "nope", "r-1"}, {"a missing runner", "q-1", "r-9"},
	} {
		writeErr(t, s, "ClaimQueuedFor of "+c.what, store.ErrNotFound, func(tx store.Tx) error {
			_, _, _, err := tx.ClaimQueuedFor(c.job, c.runner)
			return err
		})
	}
	offered := q
	offered.State, offered.Epoch, offered.AttemptID = job.Offered, q.Epoch+1, "a-new"
	writeErr(t, s, "UpdateJobAt its epoch", nil, func(tx store.Tx) error { return tx.UpdateJobAt(offered, q.Epoch) })
	again := offered
	again.AttemptID, again.Epoch = "a-other", q.Epoch+1
	writeErr(t, s, "UpdateJobAt a passed epoch", store.ErrConflict, func(tx store.Tx) error { return tx.UpdateJobAt(again, q.Epoch) })
	writeErr(t, s, "ClaimQueued of an offered job", store.ErrNotFound, func(tx store.Tx) error { _, err := tx.ClaimQueued("q-1"); return err })
	equal(t, "job after the fenced write", get(t, s, func(tx store.Tx) (store.Job, error) { return tx.Job("q-1") }), offered)
}
