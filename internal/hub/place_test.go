package hub

import (
	"strconv"
	"strings"
	"testing"
	"time"
)

// A place opens only for the runner it was given to, as signed, until its
// honour ends: another runner's, an altered, a foreign hub's, an expired
// or an oversize one reads as none.
func TestPlaceOpensOnlyAsGiven(t *testing.T) {
	t.Parallel()
	k, other := newPlaceKey(), newPlaceKey()
	now := time.UnixMilli(1_000_000_000)
	at, until := now.Add(3*time.Second), now.Add(time.Minute)
	p := k.sign("r1", at, until)
	for _, c := range []struct {
		name, runner, place string
		now                 time.Time
		ok                  bool
	}{
		{name: "as given", runner: "r1", place: p, now: now, ok: true},
		{name: "at its last honoured moment", runner: "r1", place: p, now: until, ok: true},
		{name: "past its honour", runner: "r1", place: p, now: until.Add(time.Millisecond)},
		{name: "another runner's", runner: "r2", place: p, now: now},
		{name: "an earlier time written in", runner: "r1", place: strings.Replace(p, strconv.FormatInt(at.UnixMilli(), 10), strconv.FormatInt(now.UnixMilli(), 10), 1), now: now},
		{name: "signed by another hub", runner: "r1", place: other.sign("r1", at, until), now: now},
		{name: "none", runner: "r1", place: "", now: now},
		{name: "no signature", runner: "r1", place: "1.2", now: now},
		{name: "oversize", runner: "r1", place: p + strings.Repeat("x", placeMax), now: now},
	} {
		got, ok := k.open(c.runner, c.place, c.now)
		if ok != c.ok || ok && !got.Equal(at) {
			t.Errorf("%s: open = %v, %v; want ok %v at %v", c.name, got, ok, c.ok, at)
		}
	}
}
