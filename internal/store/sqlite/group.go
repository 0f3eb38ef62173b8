package sqlite

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"

	"drover/internal/store"
	"drover/internal/store/sqlstore"
)

// Group commit. Every commit waits for an fsync (synchronous=FULL), and
// writes are serialized on one connection, so a burst of small writes
// (a submission, an offer, a finish each) waited its turn for one fsync
// each. Writes that queue while another commits now go in together: one
// transaction, each write in a savepoint of its own (its error undoes
// only its writes), one commit for all. A Write still returns only after
// the commit that holds it, so every durability promise stands.

// maxGroup bounds a group, and so the wait of its last writer.
const maxGroup = 64

// writeReq is one Write waiting for its group.
type writeReq struct {
	ctx  context.Context
	fn   func(store.Tx) error
	done chan writeDone
}

// writeDone is how a Write ended: its error, or its fn's panic; lead hands
// the writer the turn to commit the next group.
type writeDone struct {
	err      error
	panicked any
	lead     bool
}

// groups queues Writes and passes the turn to commit between them.
type groups struct {
	mu        sync.Mutex
	queue     []*writeReq
	leading   bool         // a writer is committing a group
	committed atomic.Int64 // groups of more than one committed (tests)
}

// Write runs fn in a write transaction and commits it durably. If fn returns
// an error its writes are rolled back and that error returned as is.
// fn runs at most once. Do not call Write from inside fn: it waits for the
// commit of the group fn belongs to, forever (until ctx ends).
func (s *Store) Write(ctx context.Context, fn func(store.Tx) error) error {
	r := &writeReq{ctx: ctx, fn: fn, done: make(chan writeDone, 1)}
	s.g.mu.Lock()
	s.g.queue = append(s.g.queue, r)
	lead := !s.g.leading
	s.g.leading = true
	s.g.mu.Unlock()
	if !lead {
		// Not abandoned on ctx: fn may be running in the leader's group.
		d := <-r.done
		if !d.lead {
			return d.result()
		}
	}
	s.commitGroups(r)
	return (<-r.done).result()
}

func (d writeDone) result() error {
	if d.panicked != nil {
		panic(d.panicked)
	}
	return d.err
}

// commitGroups commits the queued writes as one group, then hands the
// turn to the first writer still waiting, or ends it. It returns once
// mine is done.
func (s *Store) commitGroups(mine *writeReq) {
	s.g.mu.Lock()
	n := min(len(s.g.queue), maxGroup)
	group := s.g.queue[:n:n]
	s.g.queue = s.g.queue[n:]
	s.g.mu.Unlock()

	s.commitGroup(group)

	s.g.mu.Lock()
	defer s.g.mu.Unlock()
	if len(s.g.queue) == 0 {
		s.g.leading = false
		return
	}
	s.g.queue[0].done <- writeDone{lead: true}
}

// commitGroup runs the group's fns in one transaction and commits it,
// telling each writer how its write ended.
func (s *Store) commitGroup(group []*writeReq) {
	if len(group) == 1 {
		r := group[0]
		r.done <- s.writeAlone(r.ctx, r.fn)
		return
	}
	// The transaction outlives any one writer's context: a writer that
	// gives up must not roll back the others (database/sql rolls a
	// transaction back when the context it began with ends).
	sqlTx, err := beginWrite(context.WithoutCancel(group[0].ctx), s.w)
	if err != nil {
		for _, r := range group {
			r.done <- writeDone{err: err}
		}
		return
	}
	res := make([]writeDone, len(group))
	ran := make([]bool, len(group))
	failed := func(err error) {
		_ = sqlTx.Rollback()
		for i, r := range group {
			if res[i].panicked == nil && (ran[i] || res[i].err == nil) {
				res[i].err = err
			}
			r.done <- res[i]
		}
	}
	for i, r := range group {
		if err := r.ctx.Err(); err != nil {
			res[i].err = fmt.Errorf("begin write: %w", err)
			continue
		}
		var broken bool
		panicked := func() (p any) {
			defer func() { p = recover() }()
			// Once begun, a writer's fn runs to its end: SQLite undoes a
			// whole transaction whose statement is interrupted.
			res[i].err, broken = sqlstore.RunPart(context.WithoutCancel(r.ctx), sqlTx, &dialect, s.ws, r.fn)
			return nil
		}()
		if panicked != nil {
			res[i].panicked = panicked
			failed(errors.New("write not kept: another write of its group panicked"))
			return
		}
		if broken {
			failed(res[i].err)
			return
		}
		ran[i] = res[i].err == nil
	}
	if err := sqlTx.Commit(); err != nil {
		failed(fmt.Errorf("commit: %w", dialect.Err(err)))
		return
	}
	s.g.committed.Add(1)
	for i, r := range group {
		r.done <- res[i]
	}
}

// writeAlone is a group of one: its own transaction, as without groups.
func (s *Store) writeAlone(ctx context.Context, fn func(store.Tx) error) (d writeDone) {
	defer func() {
		if p := recover(); p != nil {
			d = writeDone{panicked: p}
		}
	}()
	sqlTx, err := beginWrite(ctx, s.w)
	if err != nil {
		return writeDone{err: err}
	}
	_, err = sqlstore.Run(ctx, sqlTx, &dialect, s.ws, fn)
	return writeDone{err: err}
}
