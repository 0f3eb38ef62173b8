package storetest

import (
	"errors"
	"fmt"
	"testing"

	"drover/internal/job"
	"drover/internal/store"
)

// BenchJobCycle measures one job's life as the hub writes it, three
// durable Write transactions an iteration: submit (the job and its
// event), offer (read the job, its attempt, the job's new epoch, an
// event) and finish (the log, the attempt, the job, an event). Engines
// are compared by running it on each in one run.
func BenchJobCycle(b *testing.B, s store.Store) {
	ctx := b.Context()
	if err := s.Write(ctx, func(tx store.Tx) error {
		return errors.Join(tx.InsertUser(user("u-1", "alice")), tx.InsertRunner(runner("r-1", "box-1", "u-1")))
	}); err != nil {
		b.Fatal(err)
	}
	log := []byte("a line of agent output, as runners send it in batches\n")
	n := 0
	for b.Loop() {
		n++
		id, aid := fmt.Sprintf("j-%d", n), fmt.Sprintf("a-%d", n)
		j := newJob(id, "u-1", job.Queued, int64(n))
		j.Key, j.AttemptID, j.Epoch, j.FinishedAt, j.ExitCode = "", "", 0, nil, nil
		steps := []func(tx store.Tx) error{
			func(tx store.Tx) error { // submit
				if err := tx.InsertJob(j); err != nil {
					return err
				}
				_, err := tx.AddEvent(store.Event{JobID: id, At: at(int64(n)), Kind: "submitted", Actor: "alice"})
				return err
			},
			func(tx store.Tx) error { // offer
				j, err := tx.Job(id)
				if err != nil {
					return err
				}
				j.State, j.Epoch, j.AttemptID = job.Offered, 1, aid
				a := attempt(aid, id, "r-1", 1, job.AttemptOffered, int64(n)+60_000)
				a.AcceptedAt, a.FinishedAt, a.ExitCode, a.LogSize = nil, nil, nil, 0
				_, err = tx.AddEvent(store.Event{JobID: id, At: at(int64(n)), Kind: "offered", Actor: "hub"})
				return errors.Join(tx.InsertAttempt(a), tx.UpdateJob(j), err)
			},
			func(tx store.Tx) error { // finish
				a, err := tx.Attempt(aid)
				if err != nil {
					return err
				}
				j, err := tx.Job(id)
				if err != nil {
					return err
				}
				a.State, a.LogSize, a.FinishedAt = job.AttemptCompleted, int64(len(log)), ptr(at(int64(n)))
				j.State, j.FinishedAt = job.Completed, ptr(at(int64(n)))
				_, err = tx.AddEvent(store.Event{JobID: id, At: at(int64(n)), Kind: "completed", Actor: "r-1"})
				return errors.Join(tx.AppendLog(aid, 0, log), tx.UpdateAttempt(a), tx.UpdateJob(j), err)
			},
		}
		for _, step := range steps {
			if err := s.Write(ctx, step); err != nil {
				b.Fatal(err)
			}
		}
	}
}
