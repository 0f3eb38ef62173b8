package retry

import (
	"testing"
	"time"
)

func TestAtHeader(t *testing.T) {
	now := time.Date(2026, 12, 6, 7, 0, 0, 0, time.UTC)
	for _, c := range []struct {
		v    string
		at   time.Time
		isOK bool
	}{
		{"30", now.Add(30 * time.Second), true},
		{" 0 ", now, true},
		{"Sun, 06 Dec 2026 08:00:00 GMT", now.Add(time.Hour), true},
		{"99999999999999", now.Add(365 * 24 * time.Hour), true},
		{"-5", time.Time{}, false},
		{"soon", time.Time{}, false},
		{"", time.Time{}, false},
	} {
		at, ok := AtHeader(c.v, now)
		if ok != c.isOK || !at.Equal(c.at) {
			t.Errorf("AtHeader(%q) = %v, %v; want %v, %v", c.v, at, ok, c.at, c.isOK)
		}
	}
}
