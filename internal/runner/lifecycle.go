package runner

import (
	"context"
	"fmt"
	"time"
)

// Lifecycle flags end a runner on its own, for ephemeral and scale-to-zero
// hosts: after MaxJobs attempts, after IdleTimeout without one, or, with
// Drain, once the hub has had nothing for it for DrainGrace. Each ends like
// a signal does (attempts finished and acknowledged, the connection closed
// normally) and Run returns nil.

// DefaultDrainGrace is how long a draining runner waits, holding nothing
// and told by the hub that nothing it may run is queued, before it exits.
const DefaultDrainGrace = 5 * time.Second

// lifeState is what the lifecycle flags watch; under Runner.mu.
type lifeState struct {
	kick    chan struct{} // something the watcher looks at changed
	started time.Time
	// lastHeld is when the runner last stopped holding an attempt.
	lastHeld time.Time
	// taken counts the attempts taken (for MaxJobs); ending says why the
	// runner takes no more ("": it does), reported as zero slots.
	taken  int
	ending string
	// queue is what the current connection's hub said of its queue
	// (waitUntold before it did); queueSince when it last changed.
	queue      int
	queueSince time.Time
}

// What the hub last said of the queue (protocol.Queue).
const (
	queueUntold = iota
	queueWaiting
	queueEmpty
)

func (c Config) checkLifecycle() error {
	switch {
	case c.MaxJobs < 0:
		return fmt.Errorf("--max-jobs is %d; want 0 (no limit) or more", c.MaxJobs)
	case c.IdleTimeout < 0:
		return fmt.Errorf("--idle-timeout is %v; want 0 (none) or more", c.IdleTimeout)
	case c.DrainGrace < 0:
		return fmt.Errorf("--drain-grace is %v; want 0 or more", c.DrainGrace)
	}
	return nil
}

func (r *Runner) lifeKickLocked() {
	select {
	case r.lc.kick <- struct{}{}:
	default:
	}
}

// takeLocked counts an offer the runner holds now; the one that reaches
// MaxJobs ends the runner's taking at once, so no later offer is accepted.
func (r *Runner) takeLocked() {
	r.countStartLocked()
	r.lc.taken++
	if r.cfg.MaxJobs > 0 && r.lc.taken >= r.cfg.MaxJobs {
		r.lc.ending = fmt.Sprintf("runner took its %d job(s) (--max-jobs) and is ending", r.cfg.MaxJobs)
	}
}

// untake gives back a take whose accept the hub refused: nothing ran.
func (r *Runner) untake() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.uncountStartLocked()
	r.lc.taken--
	if r.cfg.MaxJobs > 0 && r.lc.taken < r.cfg.MaxJobs && r.lc.ending != "" {
		r.lc.ending = ""
		r.markDirtyLocked()
	}
}

func (r *Runner) setQueueLocked(q int) {
	if r.lc.queue != q {
		r.lc.queue, r.lc.queueSince = q, r.now()
		r.lifeKickLocked()
	}
}

// watchLifecycle sends why the runner should end on the returned channel,
// once, when a lifecycle flag says so. It does nothing without one.
func (r *Runner) watchLifecycle(ctx context.Context) <-chan string {
	out := make(chan string, 1)
	if r.cfg.MaxJobs == 0 && r.cfg.IdleTimeout == 0 && !r.cfg.Drain {
		return out
	}
	r.wg.Go(func() {
		t := time.NewTimer(time.Hour)
		defer t.Stop()
		for {
			why, after := r.lifeCheck()
			if why != "" {
				out <- why
				return
			}
			t.Reset(after)
			select {
			case <-ctx.Done():
				return
			case <-r.lc.kick:
			case <-t.C:
			}
		}
	})
	return out
}

// lifeCheck says why the runner should end now, or how long until it
// should look again.
func (r *Runner) lifeCheck() (why string, after time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	after = time.Hour
	if len(r.attempts) > 0 {
		return "", after // every flag waits for held attempts; forgetting one kicks
	}
	now := r.now()
	if r.lc.ending != "" {
		return fmt.Sprintf("took its %d job(s) (--max-jobs)", r.cfg.MaxJobs), 0
	}
	idle := r.lc.started
	if r.lc.lastHeld.After(idle) {
		idle = r.lc.lastHeld
	}
	if d := r.cfg.IdleTimeout; d > 0 {
		left := idle.Add(d).Sub(now)
		if left <= 0 {
			return fmt.Sprintf("no attempt for %v (--idle-timeout)", d), 0
		}
		after = min(after, left)
	}
	if r.cfg.Drain && r.lc.queue == queueEmpty {
		since := r.lc.queueSince
		if since.Before(idle) {
			since = idle
		}
		left := since.Add(r.cfg.DrainGrace).Sub(now)
		if left <= 0 {
			return fmt.Sprintf("nothing it may run was queued for %v (--drain)", r.cfg.DrainGrace), 0
		}
		after = min(after, left)
	}
	return "", after
}
