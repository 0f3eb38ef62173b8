package sqlite

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"drover/internal/store"
)

// holdWriter starts a write that holds the writer's turn until release is
// closed, and waits until it does.
func holdWriter(t *testing.T, s *Store) (release func(), done <-chan error) {
	t.Helper()
	held, hold := make(chan struct{}), make(chan struct{})
	errc := make(chan error, 1)
	go func() {
		errc <- s.Write(context.Background(), func(tx store.Tx) error {
			close(held)
			<-hold
			return tx.SetMeta("held", "yes")
		})
	}()
	<-held
	return func() { close(hold) }, errc
}

// waitQueued waits until n writes wait for their group.
func waitQueued(t *testing.T, s *Store, n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		s.g.mu.Lock()
		q := len(s.g.queue)
		s.g.mu.Unlock()
		if q == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d writes queued, want %d", q, n)
		}
		time.Sleep(time.Millisecond)
	}
}

func meta(t *testing.T, s *Store, k string) string {
	t.Helper()
	var v string
	if err := s.Read(t.Context(), func(tx store.Tx) error {
		var err error
		v, err = tx.Meta(k)
		if errors.Is(err, store.ErrNotFound) {
			return nil
		}
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return v
}

// Writes that queue behind another commit together, and each still ends
// as it would alone: a failed one keeps nothing of its own, the others
// keep theirs, a writer whose context ended before its turn runs nothing.
func TestWritesWaitingCommitAsOneGroup(t *testing.T) {
	s := newTest(t)
	release, held := holdWriter(t, s)
	before := s.g.committed.Load()

	const n = 20
	errs := make([]error, n+1)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			errs[i] = s.Write(context.Background(), func(tx store.Tx) error {
				if err := tx.SetMeta(fmt.Sprint("k", i), "v"); err != nil {
					return err
				}
				if i%2 == 1 {
					return fmt.Errorf("write %d refused", i)
				}
				return nil
			})
		})
	}
	waitQueued(t, s, n)
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	wg.Go(func() {
		errs[n] = s.Write(gone, func(tx store.Tx) error { return tx.SetMeta("gone", "ran") })
	})
	waitQueued(t, s, n+1)
	release()
	wg.Wait()
	if err := <-held; err != nil {
		t.Fatal(err)
	}

	for i := range n {
		want := ""
		if i%2 == 0 {
			want = "v"
			if errs[i] != nil {
				t.Errorf("write %d: %v", i, errs[i])
			}
		} else if errs[i] == nil || errs[i].Error() != fmt.Sprintf("write %d refused", i) {
			t.Errorf("write %d: %v, want its own error as is", i, errs[i])
		}
		if got := meta(t, s, fmt.Sprint("k", i)); got != want {
			t.Errorf("k%d = %q, want %q", i, got, want)
		}
	}
	if !errors.Is(errs[n], context.Canceled) || meta(t, s, "gone") != "" {
		t.Errorf("a writer whose context ended before its turn: %v, meta %q", errs[n], meta(t, s, "gone"))
	}
	if got := s.g.committed.Load() - before; got != 1 {
		t.Errorf("%d groups committed for %d waiting writes, want 1", got, n+1)
	}
}

// A write that panics panics in its own caller; the writes of its group
// keep nothing and say why, and the writer goes on.
func TestPanicInAGroupedWrite(t *testing.T) {
	s := newTest(t)
	release, held := holdWriter(t, s)
	var wg sync.WaitGroup
	var panicked any
	var okErr error
	wg.Go(func() {
		okErr = s.Write(context.Background(), func(tx store.Tx) error { return tx.SetMeta("ok", "v") })
	})
	waitQueued(t, s, 1)
	wg.Go(func() {
		defer func() { panicked = recover() }()
		_ = s.Write(context.Background(), func(tx store.Tx) error {
			if err := tx.SetMeta("bad", "v"); err != nil {
				return err
			}
			panic("boom")
		})
	})
	waitQueued(t, s, 2)
	release()
	wg.Wait()
	<-held
	if panicked != "boom" {
		t.Errorf("the panicking write's caller recovered %v, want boom", panicked)
	}
	if okErr == nil || meta(t, s, "ok") != "" || meta(t, s, "bad") != "" {
		t.Errorf("the other write of the group: %v, ok=%q bad=%q; want an error and nothing kept", okErr, meta(t, s, "ok"), meta(t, s, "bad"))
	}
	if err := s.Write(t.Context(), func(tx store.Tx) error { return tx.SetMeta("after", "v") }); err != nil || meta(t, s, "after") != "v" {
		t.Fatalf("a write after the panic: %v", err)
	}
}
