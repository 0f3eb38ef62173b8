package protocol

import (
	"testing"
	"time"
)

// TestNextBeat: a heartbeat goes on the grain of the clock (a second, or
// 1/16 of a shorter interval) nearest to the interval's end, so a timer
// that fires a little late does not stretch the next interval.
func TestNextBeat(t *testing.T) {
	base := time.Date(2026, 12, 7, 11, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		now      time.Time
		interval time.Duration
		want     time.Duration
	}{
		{base, 20 * time.Second, 20 * time.Second},
		// A timer 2 ms late: the next beat is on the next whole second
		// 20 s on, not 21 s (the intervals would drift by a second each).
		{base.Add(2 * time.Millisecond), 20 * time.Second, 20*time.Second - 2*time.Millisecond},
		{base.Add(300 * time.Millisecond), 20 * time.Second, 20*time.Second - 300*time.Millisecond},
		{base.Add(700 * time.Millisecond), 2 * time.Minute, 2*time.Minute + 300*time.Millisecond},
		{base.Add(500 * time.Millisecond), 20 * time.Second, 20*time.Second - 500*time.Millisecond},
		// Short intervals (tests, --heartbeat 1s) keep their pace.
		{base.Add(10 * time.Millisecond), 1600 * time.Millisecond, 1590 * time.Millisecond},
		{base.Add(3 * time.Millisecond), 160 * time.Millisecond, 157 * time.Millisecond},
		{base.Add(3 * time.Millisecond), 10 * time.Nanosecond, 10 * time.Nanosecond},
	} {
		got := NextBeat(c.now, c.interval)
		if got != c.want {
			t.Errorf("at %s, every %s: wait %s, want %s", c.now.Format("05.000000"), c.interval, got, c.want)
		}
		g := grain(c.interval)
		if at := c.now.Add(got); g > 0 && !at.Equal(at.Truncate(g)) {
			t.Errorf("at %s, every %s: the beat at %s is not on a grain of %s", c.now.Format("05.000000"), c.interval, at.Format("05.000000"), g)
		}
		if d := got - c.interval; d < -g/2 || d >= max(g/2, 1) {
			t.Errorf("at %s, every %s: wait %s, want within half a grain of the interval", c.now.Format("05.000000"), c.interval, got)
		}
	}
}
