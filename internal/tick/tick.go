// Package tick times a process's periodic work on the instants that are
// whole multiples of its interval: whole seconds for an interval of one or
// more seconds. Every wakeup of an idle hub costs it far more than the work
// it wakes for (its runtime's scheduler and sysmon, a few system calls);
// runners heartbeat on whole seconds (protocol.NextBeat), so the hub's own
// timers on the same instants are served in the wakeup the heartbeats
// cause anyway, not in one each (docs/reliability.md, A runner's liveness).
package tick

import (
	"context"
	"time"
)

// Next is how long from now until the next instant that is a whole
// multiple of every (counted from the zero time, so whole seconds for
// whole-second intervals and for intervals that divide a second); every
// must be positive. It is never zero: work that ran late waits for the
// next instant rather than running twice.
func Next(now time.Time, every time.Duration) time.Duration {
	return now.Truncate(every).Add(every).Sub(now)
}

// Every calls fn at each such instant until ctx ends or fn returns false.
func Every(ctx context.Context, every time.Duration, fn func() bool) {
	t := time.NewTimer(Next(time.Now(), every))
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if !fn() {
			return
		}
		t.Reset(Next(time.Now(), every))
	}
}
