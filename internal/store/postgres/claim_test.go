package postgres

import (
	"context"
	"errors"
	"testing"
	"time"

	"drover/internal/job"
	"drover/internal/store"
)

// TestClaimForLocksTheJobAlone: ClaimQueuedFor holds the job's row as
// ClaimQueued does (another hub's claim skips it at once), but not the
// runner's, which the runner's heartbeats on its own hub write meanwhile.
func TestClaimForLocksTheJobAlone(t *testing.T) {
	url := migratedURL(t)
	a, b := openTest(t, url), openTest(t, url)
	now := time.Now()
	rn := store.Runner{ID: "r-1", Name: "box-1", OwnerID: "u-1", Slots: 1, CreatedAt: now}
	if err := a.Write(t.Context(), func(tx store.Tx) error {
		return errors.Join(
			tx.InsertUser(store.User{ID: "u-1", Name: "alice", CreatedAt: now}),
			tx.InsertRunner(rn),
			tx.InsertJob(store.Job{ID: "q-1", State: job.Queued, Agent: "exec", RequesterID: "u-1", CreatedAt: now, UpdatedAt: now}),
		)
	}); err != nil {
		t.Fatal(err)
	}
	release := holding(t, a, func(tx store.Tx) error { _, _, _, err := tx.ClaimQueuedFor("q-1", "r-1"); return err })
	claim := b.Write(t.Context(), func(tx store.Tx) error { _, _, _, err := tx.ClaimQueuedFor("q-1", "r-1"); return err })
	c, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	seen := now.Add(time.Second)
	rn.LastSeen = &seen
	beat := b.Write(c, func(tx store.Tx) error { return tx.UpdateRunner(rn) })
	if !errors.Is(claim, store.ErrNotFound) {
		t.Errorf("claim of a row another transaction holds: %v; want it skipped (not found)", claim)
	}
	if beat != nil {
		t.Errorf("a runner's write while an offer claimed a job for it: %v; want it done, not waiting", beat)
	}
	if err := release(); err != nil {
		t.Fatal(err)
	}
}

// holding runs claim in a Write of s and holds that transaction open until
// release, which ends it and returns the Write's error.
func holding(t *testing.T, s *Store, claim func(store.Tx) error) (release func() error) {
	held, done := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- s.Write(t.Context(), func(tx store.Tx) error {
			if err := claim(tx); err != nil {
				return err
			}
			select {
			case <-held:
			default:
				close(held) // a retried Write comes here again
			}
			<-done
			return nil
		})
	}()
	select {
	case <-held:
	case err := <-errc:
		t.Fatalf("the holding write: %v", err)
	}
	return func() error {
		close(done)
		return <-errc
	}
}
