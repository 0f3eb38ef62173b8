package protocol

import "time"

// NextBeat is how long a runner waits from now for a heartbeat due every
// interval: about the interval, ending on the multiple of a grain of the
// runner's clock nearest to now+interval (a second, less for intervals
// under 16 s). A hub is woken by each frame, and each wakeup costs it far
// more than reading the frame (its runtime's scheduler and system calls);
// heartbeats that fall on the same second of synchronised clocks arrive
// together and are read in one wakeup, so an idle fleet's hub wakes about
// once a second rather than once per heartbeat (docs/reliability.md, A
// runner's liveness). Runners stay spread over the interval by the
// seconds of their phase. The nearest grain, not the next: a timer fires
// a little after its instant, and rounding that up would add a grain to
// every interval; this way a heartbeat is at most half a grain early or
// late (1/32 of the interval) and the intervals do not drift.
func NextBeat(now time.Time, interval time.Duration) time.Duration {
	return BeatAt(now.Add(interval-grain(interval)/2), interval).Sub(now)
}

// BeatAt is t rounded up to the grain of heartbeats every interval
// (NextBeat).
func BeatAt(t time.Time, interval time.Duration) time.Time {
	g := grain(interval)
	if g <= 0 {
		return t
	}
	if r := t.Sub(t.Truncate(g)); r > 0 {
		return t.Add(g - r)
	}
	return t
}

func grain(interval time.Duration) time.Duration { return min(time.Second, interval/16) }
