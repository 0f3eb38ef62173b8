package protocol

import (
	"testing"
	"time"
)

// TestNextBeat: a heartbeat goes on a whole grain of the clock (a second,
// or 1/16 of a shorter interval), never early and less than a grain late.
func TestNextBeat(t *testing.T) {
	base := time.Date(2026, 12, 7, 11, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		now      time.Time
		interval time.Duration
		want     time.Duration
	}{
		{base, 20 * time.Second, 20 * time.Second},
		{base.Add(300 * time.Millisecond), 20 * time.Second, 20*time.Second + 700*time.Millisecond},
		{base.Add(999 * time.Millisecond), 2 * time.Minute, 2*time.Minute + time.Millisecond},
		{base.Add(1500 * time.Millisecond), 20 * time.Second, 20*time.Second + 500*time.Millisecond},
		// Short intervals (tests, --heartbeat 1s) keep their pace.
		{base.Add(10 * time.Millisecond), 1600 * time.Millisecond, 1690 * time.Millisecond},
		{base.Add(3 * time.Millisecond), 160 * time.Millisecond, 167 * time.Millisecond},
		{base.Add(3 * time.Millisecond), 10 * time.Nanosecond, 10 * time.Nanosecond},
	} {
		got := NextBeat(c.now, c.interval)
		if got != c.want {
			t.Errorf("at %s, every %s: wait %s, want %s", c.now.Format("05.000000"), c.interval, got, c.want)
		}
		grain := min(time.Second, c.interval/16)
		if at := c.now.Add(got); grain > 0 && !at.Equal(at.Truncate(grain)) {
			t.Errorf("at %s, every %s: the beat at %s is not on a grain of %s", c.now.Format("05.000000"), c.interval, at.Format("05.000000"), grain)
		}
		if got < c.interval || got-c.interval >= max(grain, 1) {
			t.Errorf("at %s, every %s: wait %s, want within a grain after the interval", c.now.Format("05.000000"), c.interval, got)
		}
	}
}
