package tick

import (
	"context"
	"testing"
	"time"
)

func TestNext(t *testing.T) {
	at := func(s string) time.Time {
		v, err := time.Parse(time.RFC3339Nano, s)
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	for _, c := range []struct {
		now   string
		every time.Duration
		want  string
	}{
		{"2026-12-07T12:00:00.3Z", time.Second, "2026-12-07T12:00:01Z"},
		{"2026-12-07T12:00:01Z", time.Second, "2026-12-07T12:00:02Z"}, // on the instant: the next one
		{"2026-12-07T12:00:01.7Z", 500 * time.Millisecond, "2026-12-07T12:00:02Z"},
		{"2026-12-07T12:00:01.2Z", 500 * time.Millisecond, "2026-12-07T12:00:01.5Z"},
		{"2026-12-07T12:00:03.9Z", 5 * time.Second, "2026-12-07T12:00:05Z"},
		{"2026-12-07T12:00:31Z", 30 * time.Second, "2026-12-07T12:01:00Z"},
		{"2026-12-07T13:00:00.3+01:00", time.Second, "2026-12-07T12:00:01Z"}, // a zone changes nothing
	} {
		now := at(c.now)
		got := now.Add(Next(now, c.every))
		if !got.Equal(at(c.want)) {
			t.Errorf("Next(%s, %s) lands on %s, want %s", c.now, c.every, got.UTC().Format(time.RFC3339Nano), c.want)
		}
	}
}

func TestEveryStopsWhenFnSays(t *testing.T) {
	n := 0
	Every(context.Background(), time.Millisecond, func() bool { n++; return n < 3 })
	if n != 3 {
		t.Errorf("fn ran %d times, want 3", n)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	Every(ctx, time.Hour, func() bool { t.Error("fn ran after ctx ended"); return true })
}
