package bench

import (
	"errors"
	"fmt"
	"syscall"
	"testing"

	"github.com/coder/websocket"
)

// Each refused dial of a restart counts under its kind, so that the
// report shows where the fleet's time went.
func TestRefusalKinds(t *testing.T) {
	for _, c := range []struct {
		name string
		err  error
		kind int
	}{
		{"nothing listening", fmt.Errorf("dial the runner gateway: %w", syscall.ECONNREFUSED), refusedNotListening},
		{"503 with a place", comeBack{after: 1, place: "p"}, refusedPlace},
		{"503 without", comeBack{after: 1}, refusedNoPlace},
		{"1013 after the upgrade", fmt.Errorf("wait for welcome: %w", websocket.CloseError{Code: websocket.StatusTryAgainLater}), refusedLater},
		{"other", errors.New("EOF"), refusedOther},
	} {
		var counts refusalCounts
		counts.count(c.err)
		var want [refusalKinds]int64
		want[c.kind] = 1
		if n := counts.load(); n != want {
			t.Errorf("%s: counted %v; want %v", c.name, n, want)
		}
	}
}
