package chaos

import (
	"fmt"
	"io"
	"os"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"drover/internal/childproc"
	"drover/internal/job"
)

// Command returns the `chaos` command; the CLI attaches it as `drover chaos`.
func Command() *cobra.Command {
	var o Options
	var faults string
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Run a replayable fault campaign against a local hub and runners, then check what they kept",
		Long: `Start a hub and --runners runners from this binary (separate processes on
loopback, files under --dir), the runners connected through a proxy, and for
--duration submit --jobs exec jobs (half with an idempotency key) while
injecting faults: cut (every connection through the proxy), delay, duplicate,
drop (a WebSocket frame, and its connection), drop-reply (a hub reply after
the hub applied the request), kill and term (SIGKILL or SIGTERM a runner,
restarted later), hub-kill (SIGKILL the hub, restarted on its data), pause
(SIGSTOP a runner for 1-22 s, then SIGCONT), hub-pause (the same to the
hub), and
with --faults naming it, disk (as root: the hub's data directory and each
runner's home are small tmpfs mounts, filled to the last block for a few
seconds, then freed).

With --db and --hubs N, N hubs share that Postgres database, each behind its
own proxy; the runners are given them all, submissions and hub faults are
spread over them, and --db's password reaches the hubs as PGPASSWORD, never
in their argv.

Everything random comes from one seed, printed first; --seed replays the same
jobs and schedule of faults. Once faults stop and every job has ended, the
hub's store and the runners' journals are checked: every acknowledged
submission exists once, nothing ran twice unless retried (or released by a
stopping runner), completed logs are byte-exact, no attempt is active for a
job that ended, and every unknown outcome is explained by a killed (or
stopped) runner.
The summary gives outcomes, throughput and the count of each fault; the
exit status is non-zero when the checker found anything.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop, err := childproc.Start(cmd, &o.Binary)
			if err != nil {
				return err
			}
			defer stop()
			if faults != "" {
				o.Faults = strings.Split(faults, ",")
			}
			if o.Dir == "" {
				d, err := os.MkdirTemp("", "drover-chaos-")
				if err != nil {
					return fmt.Errorf("make the campaign directory: %w", err)
				}
				o.Dir = d
			}
			o.Progress = cmd.ErrOrStderr()
			res, err := Run(ctx, o)
			if err != nil {
				return err
			}
			res.WriteSummary(cmd.OutOrStdout())
			if !res.OK() {
				return fmt.Errorf("the campaign with seed %d broke %d promises; replay it with drover chaos --seed %d (files in %s)", res.Seed, len(res.Violations)+len(res.Stuck), res.Seed, o.Dir)
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.Uint64Var(&o.Seed, "seed", 0, "seed of everything random (default: a new one, printed)")
	f.IntVar(&o.Jobs, "jobs", 60, "jobs to submit")
	f.IntVar(&o.Runners, "runners", 3, "runner processes")
	f.IntVar(&o.Slots, "slots", 2, "slots per runner")
	f.DurationVar(&o.Duration, "duration", 45*time.Second, "how long to inject faults (jobs are submitted in its first 80%)")
	f.DurationVar(&o.Settle, "settle", 2*time.Minute, "longest wait for every job to end once faults stop")
	f.StringVar(&faults, "faults", strings.Join(DefaultFaults(), ","), "faults to inject, comma-separated; disk (root: small tmpfs disks filled and freed) is not in the default")
	f.StringVar(&o.Dir, "dir", "", "directory for the hub's and runners' files, kept afterwards (default: a new temporary one)")
	f.StringVar(&o.Binary, "binary", "", "drover binary to run the hub and runners from (default: this binary)")
	f.IntVar(&o.Hubs, "hubs", 1, "hub processes on the --db database, each behind its own proxy; runners are given them all and hub faults spread over them")
	f.StringVar(&o.DB, "db", "", "keep the campaign hub's state in this empty Postgres database (postgres://...); default SQLite in its data directory")
	return cmd
}

// WriteSummary prints the campaign's numbers and findings.
func (r *Result) WriteSummary(w io.Writer) {
	p := func(format string, args ...any) { fmt.Fprintf(w, format+"\n", args...) }
	p("seed           %d", r.Seed)
	p("jobs           %d planned, %d acknowledged, %d unanswered (%d keyed); %d in the store", r.Planned, r.Acked, r.Unacked, r.Keyed, r.Jobs)
	var outs []string
	for _, s := range job.States {
		if n := r.Outcomes[s]; n > 0 {
			outs = append(outs, fmt.Sprintf("%s %d", s, n))
		}
	}
	p("outcomes       %s", strings.Join(outs, ", "))
	p("launches       %d attempts launched; jobs launched more than once (after a retry or a release): %d", r.Launched, r.Relaunched)
	p("time           %s of faults, %s in all", r.Faulting.Round(time.Second), r.Wall.Round(time.Second))
	p("throughput     %.1f jobs completed per minute", r.PerMinute())
	keys := make([]string, 0, len(r.Injected))
	for k := range r.Injected {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var fs []string
	for _, k := range keys {
		fs = append(fs, fmt.Sprintf("%s %d", k, r.Injected[k]))
	}
	p("faults         %s", strings.Join(fs, ", "))
	if r.OK() {
		p("checks         all held")
		return
	}
	p("checks         %d violations, %d jobs not ended", len(r.Violations), len(r.Stuck))
	vs := slices.Clone(r.Violations)
	sort.SliceStable(vs, func(i, j int) bool { return vs[i].Rule < vs[j].Rule })
	for _, v := range vs {
		p("  %s", v)
	}
	for _, s := range r.Stuck {
		p("  %s: %s", RuleSettled, s)
	}
}
