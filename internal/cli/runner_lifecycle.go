package cli

import (
	"time"

	"github.com/spf13/cobra"

	"drover/internal/runner"
)

// lifecycleFlags end a runner on its own (runner/lifecycle.go).
type lifecycleFlags struct {
	maxJobs     int
	idleTimeout time.Duration
	drain       bool
	drainGrace  time.Duration
	limits      runner.Limits
}

const lifecycleLong = `
--max-jobs N makes the runner ephemeral: it takes N attempts, reports zero
slots the moment it takes the Nth (so the hub offers it nothing more and it
accepts nothing more), and exits 0 once they are finished. --idle-timeout D
exits 0 after D without an attempt. --drain exits 0 once it holds nothing
and the hub has said for --drain-grace (default 5s) that nothing it may run
is queued; with --max-jobs and --drain together, whichever comes first.

Spend limits, enforced by the runner: --max-jobs-per-hour N and
--max-spend-per-day USD (from the cost agents report) make it decline
offers while it is at them, and 'drover runners' and the waiting jobs say
which limit and until when; the counts survive restarts (HOME/limits.json).
--max-turns N stops an attempt whose agent (native, claude) takes more model
turns: it fails with reason limit_turns, its work published. Each account
can have its own ('drover runner account limits').`

func (f *lifecycleFlags) add(cmd *cobra.Command) {
	cmd.Long += "\n" + lifecycleLong
	fl := cmd.Flags()
	fl.IntVar(&f.maxJobs, "max-jobs", 0, "exit 0 after taking this many attempts (0: no limit)")
	fl.DurationVar(&f.idleTimeout, "idle-timeout", 0, "exit 0 after this long without an attempt (0: never)")
	fl.BoolVar(&f.drain, "drain", false, "exit 0 once nothing this runner may run has been queued for --drain-grace")
	fl.DurationVar(&f.drainGrace, "drain-grace", runner.DefaultDrainGrace, "how long --drain waits with nothing queued for it")
	limitFlags(cmd, &f.limits)
}

func (f *lifecycleFlags) apply(cfg *runner.Config) error {
	switch {
	case f.maxJobs < 0:
		return usagef("--max-jobs must not be negative")
	case f.idleTimeout < 0:
		return usagef("--idle-timeout must not be negative")
	case f.drainGrace < 0:
		return usagef("--drain-grace must not be negative")
	}
	if err := f.limits.Check(); err != nil {
		return usagef("--max-jobs-per-hour, --max-turns, --max-spend-per-day: %v", err)
	}
	cfg.Limits = f.limits
	cfg.MaxJobs, cfg.IdleTimeout, cfg.Drain, cfg.DrainGrace = f.maxJobs, f.idleTimeout, f.drain, f.drainGrace
	return nil
}
