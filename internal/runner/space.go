package runner

import (
	"context"
	"fmt"
	"time"

	"drover/internal/fsutil"
)

// spaceCheck is how often the runner looks at its free space.
const spaceCheck = 2 * time.Second

// watchSpace checks the free space of the runner's home until ctx ends.
func (r *Runner) watchSpace(ctx context.Context) {
	t := time.NewTicker(spaceCheck)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.checkSpace()
		}
	}
}

// checkSpace compares the free space of the runner's home with the floor
// and, when that changes whether the runner is ready, says so in the next
// status: below the floor the hub offers it nothing.
func (r *Runner) checkSpace() {
	if r.cfg.MinFree <= 0 {
		return
	}
	why := ""
	free, err := fsutil.FreeBytes(r.cfg.Home)
	switch {
	case err != nil:
		why = clip(fmt.Sprintf("cannot tell the free space of the runner's home: %v", err), 256)
	case free < r.cfg.MinFree:
		why = fmt.Sprintf("disk full: %s free in the runner's home, below its floor of %s (--min-free)", formatBytes(free), formatBytes(r.cfg.MinFree))
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if why == r.notReady {
		return
	}
	// The free bytes change all the time: only the change of readiness is
	// news (and a status), not every new figure.
	if (why == "") == (r.notReady == "") && why != "" {
		return
	}
	if why != "" {
		r.log.Warn("not taking jobs", "reason", why)
	} else {
		r.log.Info("free space is back above the floor; taking jobs again", "free", free, "floor", r.cfg.MinFree)
	}
	r.notReady = why
	r.markDirtyLocked()
}

// formatBytes is n in the largest binary unit that keeps it at least 1.
func formatBytes(n int64) string {
	const unit = 1 << 10
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	v, i := float64(n), -1
	for v >= unit && i < 4 {
		v /= unit
		i++
	}
	return fmt.Sprintf("%.1f %ciB", v, "KMGTP"[i])
}
