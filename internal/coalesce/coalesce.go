// Package coalesce runs background work per key, one run of a key at a
// time: a key woken while its work runs is run once more after that run,
// however often it was woken meanwhile. The pipeline engine, evaluations
// and forge threads advance their records so.
package coalesce

import (
	"context"
	"sync"
)

// Runner runs its work for the keys it is woken for, until its context
// ends.
type Runner struct {
	ctx  context.Context
	work func(ctx context.Context, key string)
	wg   sync.WaitGroup
	mu   sync.Mutex
	busy map[string]bool // keys running → woken again meanwhile
}

// New is a Runner of work whose runs live as long as ctx.
func New(ctx context.Context, work func(ctx context.Context, key string)) *Runner {
	return &Runner{ctx: ctx, work: work, busy: map[string]bool{}}
}

// Wake runs key's work in the background now, or once more after the run
// in progress.
func (r *Runner) Wake(key string) {
	if r.ctx.Err() != nil {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, running := r.busy[key]; running {
		r.busy[key] = true
		return
	}
	r.busy[key] = false
	r.wg.Go(func() {
		for {
			r.work(r.ctx, key)
			r.mu.Lock()
			if !r.busy[key] || r.ctx.Err() != nil {
				delete(r.busy, key)
				r.mu.Unlock()
				return
			}
			r.busy[key] = false
			r.mu.Unlock()
		}
	})
}

// Wait waits for the runs in progress (once the context ended, no more
// start).
func (r *Runner) Wait() { r.wg.Wait() }
