package protocol

import "time"

// NextBeat is how long a runner waits from now for a heartbeat due every
// interval: the interval, rounded up so the heartbeat goes on a multiple of
// a grain of the runner's clock (a second, less for intervals under 16 s).
// A hub is woken by each frame, and each wakeup costs it far more than
// reading the frame (its runtime's scheduler and system calls); heartbeats
// that fall on the same second of synchronised clocks arrive together and
// are read in one wakeup, so an idle fleet's hub wakes about once a second
// rather than once per heartbeat (docs/reliability.md, A runner's
// liveness). Runners stay spread over the interval by the seconds of
// their phase; a heartbeat is late by less than a grain (1/16 of the
// interval at most), well inside the hub's window of three intervals.
func NextBeat(now time.Time, interval time.Duration) time.Duration {
	return BeatAt(now.Add(interval), interval).Sub(now)
}

// BeatAt is t rounded up to the grain of heartbeats every interval
// (NextBeat): when a heartbeat due at t goes.
func BeatAt(t time.Time, interval time.Duration) time.Time {
	grain := min(time.Second, interval/16)
	if grain <= 0 {
		return t
	}
	if r := t.Sub(t.Truncate(grain)); r > 0 {
		return t.Add(grain - r)
	}
	return t
}
