package storetest

import (
	"testing"

	"drover/internal/job"
	"drover/internal/store"
)

// forgeThread has every field set; created and updated are its times.
func forgeThread(jobID string, number int, created, updated int64) store.ForgeThread {
	return store.ForgeThread{JobID: jobID, Project: "web", Forge: "gt", Repo: "acme/web", Number: number, IsPR: true,
		StatusID: 77, Shown: "running", Questions: map[string]int64{"q-1": 78, "q-2": 79},
		CreatedAt: at(created), UpdatedAt: at(updated)}
}

func testForgeThreads(t *testing.T, s store.Store) {
	seed(t, s)
	mustWrite(t, s, func(tx store.Tx) error {
		for _, id := range []string{"j-2", "j-3"} {
			if err := tx.InsertJob(newJob(id, "u-1", job.Queued, 0)); err != nil {
				return err
			}
		}
		return nil
	})
	one := func(jobID string) store.ForgeThread {
		return get(t, s, func(tx store.Tx) (store.ForgeThread, error) { return tx.ForgeThread(jobID) })
	}
	of := func(number int) []store.ForgeThread {
		return get(t, s, func(tx store.Tx) ([]store.ForgeThread, error) { return tx.ForgeThreadsOf("gt", "acme/web", number) })
	}
	unsettled := func() []store.ForgeThread {
		return get(t, s, func(tx store.Tx) ([]store.ForgeThread, error) { return tx.UnsettledForgeThreads() })
	}
	readErr(t, s, "ForgeThread of a job without one", store.ErrNotFound, func(tx store.Tx) error {
		_, err := tx.ForgeThread("j-1")
		return err
	})
	writeErr(t, s, "ForgeThread of a missing job", store.ErrNotFound, func(tx store.Tx) error {
		return tx.PutForgeThread(forgeThread("j-9", 1, 1, 1))
	})

	t1, t2, t3 := forgeThread("j-1", 5, 1, 6), forgeThread("j-2", 5, 2, 4), forgeThread("j-3", 6, 3, 5)
	t3.Questions, t3.IsPR, t3.StatusID = nil, false, 0 // none round-trips as none
	for _, f := range []store.ForgeThread{t1, t3, t2} {
		mustWrite(t, s, func(tx store.Tx) error { return tx.PutForgeThread(f) })
	}
	equal(t, "ForgeThread", one("j-1"), t1)
	equal(t, "ForgeThread without questions", one("j-3"), t3)
	equal(t, "a thread's jobs, newest first", of(5), []store.ForgeThread{t2, t1})
	equal(t, "another thread's", of(6), []store.ForgeThread{t3})
	equal(t, "a thread without jobs", of(7), nil)
	equal(t, "unsettled, oldest update first", unsettled(), []store.ForgeThread{t2, t3, t1})

	// Put again: replaced, its CreatedAt kept.
	done := t1
	done.Shown, done.Settled, done.Questions, done.CreatedAt, done.UpdatedAt = "done", true, map[string]int64{"q-3": 1}, at(50), at(60)
	mustWrite(t, s, func(tx store.Tx) error { return tx.PutForgeThread(done) })
	done.CreatedAt = t1.CreatedAt
	equal(t, "ForgeThread replaced", one("j-1"), done)
	equal(t, "unsettled after it settled", unsettled(), []store.ForgeThread{t2, t3})
}
