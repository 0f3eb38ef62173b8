package hub

import (
	"testing"
	"time"

	"drover/internal/forgethread"
	"drover/internal/forgework"
	"drover/internal/pipeline"
)

// TestPeriodicWorkOnWholeSeconds: the hub's periodic work runs on whole
// multiples of its interval (internal/tick), so every interval must be a
// whole number of seconds for it to fall in the wakeup the runners'
// whole-second heartbeats cause. The stall check ran every half second:
// its look on the half second woke an idle hub once a second on its own.
func TestPeriodicWorkOnWholeSeconds(t *testing.T) {
	t.Parallel()
	var cfg Config
	cfg.defaults()
	for _, c := range []struct {
		what  string
		every time.Duration
	}{
		{"the stall check", stallTick},
		{"the safety sweep", cfg.Sweep},
		{"the cross sweep", cfg.CrossSweep},
		{"the descriptor check", nofileEvery},
		{"the forge triggers' sweep", forgework.DefaultSweep},
		{"the forge threads' sweep", forgethread.DefaultSweep},
		{"the pipelines' sweep", pipeline.DefaultSweep},
	} {
		if c.every <= 0 || c.every%time.Second != 0 {
			t.Errorf("%s runs every %s: not a whole number of seconds", c.what, c.every)
		}
	}
}
