package bench

import (
	"errors"
	"time"

	"github.com/spf13/cobra"

	"drover/internal/childproc"
)

// Command returns the `bench` command; the CLI attaches it as `drover bench`.
func Command() *cobra.Command {
	var (
		o        Options
		markdown bool
		asJSON   bool

		profileName string
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Measure dispatch latency, hub memory and hub CPU against a local hub",
		Long: `Start a hub from this binary (drover hub, a separate process on a loopback
port with a temporary data directory), connect runners to it and measure:

  dispatch latency  from POST /api/v1/jobs returning to the agent process
                    running, one job at a time, with each --runners count
                    connected (one runner takes the jobs, the rest are idle);
  hub memory        VmRSS growth per idle connected runner (and Go heap,
                    stacks and goroutines, from the hub's --metrics-listen);
  hub CPU           over --idle with the largest count of idle runners;
  burst             with --burst N, N jobs submitted at once for the idle
                    runners to take: jobs dispatched and completed per second;

then the same hub memory and CPU for clients polling every --poll-interval
(a fresh hub), the design the runner gateway replaced.

With --owners N (and --sharing mixed, the default mix) it measures only
dispatch latency, at the largest --runners count, on two hubs side by side:
one whose runners all belong to the admin, who submits every job (the access
rules with nothing to decide), and one whose runners belong to N users who
approved them and shared them in a mix (private, with named users, with a
project, hub-wide), with the jobs submitted by users each of whom may use a
target runner one of those ways. Samples alternate between the hubs.

--profile NAME takes a published set of settings (docs/benchmarks.md,
"Issue 30"): quick (CI-sized), burst (2,000 jobs with 10 and with 1,000
runners connected, the ratio in one run), abuse (the API's latency while a
runner churns its connection and 1,000 slow clients hold connections) and
idle10k (10,000 idle runners, a hub restart they all come back from,
dispatch among them). A profile
measures the burst at every runner count and the statements per job, and
prints a summary table first.

The bench raises its open file limit to the hard limit; the largest
--runners count needs about that many descriptors in the bench and in the
hub. Progress goes to stderr, the report to stdout (--markdown: a section
for docs/benchmarks.md). Linux only: it reads /proc.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if markdown && asJSON {
				return errors.New("bench: --markdown and --json are two formats of one report: give one")
			}
			if profileName != "" {
				pr, err := profileNamed(profileName)
				if err != nil {
					return err
				}
				pr.apply(&o, cmd.Flags().Changed)
			}
			ctx, stop, err := childproc.Start(cmd, &o.Binary)
			if err != nil {
				return err
			}
			defer stop()
			o.Progress = cmd.ErrOrStderr()
			res, err := Run(ctx, o)
			if res == nil {
				return err
			}
			var werr error
			switch {
			case markdown:
				werr = res.WriteMarkdown(cmd.OutOrStdout())
			case asJSON:
				werr = res.WriteJSON(cmd.OutOrStdout())
			default:
				werr = res.WriteText(cmd.OutOrStdout())
			}
			return errors.Join(err, werr) // a failed run's report first, then its error
		},
	}
	f := cmd.Flags()
	f.IntSliceVar(&o.Runners, "runners", []int{1, 100, 1000}, "connected runner counts to measure at (comma-separated)")
	f.IntVar(&o.Jobs, "jobs", 200, "jobs per runner count (latency samples)")
	f.DurationVar(&o.Idle, "idle", 60*time.Second, "window of each hub CPU measurement")
	f.DurationVar(&o.PollInterval, "poll-interval", time.Second, "interval of the polling baseline")
	f.DurationVar(&o.Settle, "settle", 5*time.Second, "wait after connecting runners before reading the hub's memory")
	f.StringVar(&o.Binary, "binary", "", "drover binary to start the hub from (default: this binary)")
	f.StringVar(&o.Dir, "dir", "", "directory for the hubs' temporary data (its filesystem's fsync speed matters; default: the temp dir)")
	f.BoolVar(&o.NoPoll, "no-poll", false, "skip the polling baseline")
	f.StringVar(&o.Database, "db", "", "postgres:// URL of an empty database for the measured hub's state (default: SQLite in its data directory)")
	f.IntVar(&o.Owners, "owners", 0, "instead: compare dispatch latency at the largest --runners count with the runners owned by this many users (access rules deciding) against the same fleet owned by the admin")
	f.StringVar(&o.Sharing, "sharing", "", "with --owners, how the runners are shared: mixed (40% private, 30% with 1-3 users, 20% with a project, 10% hub-wide)")
	f.IntVar(&o.Burst, "burst", 0, "also submit this many jobs at once after the CPU window, for the idle runners to take (dispatch and completion rate)")
	f.IntVar(&o.Abuse, "abuse", 0, "also time GET /api/v1/jobs after the CPU window: quiet, while a runner opens and drops its connection in a loop, and while this many slow clients hold connections with unfinished headers")
	f.StringVar(&profileName, "profile", "", "a published set of settings (quick, burst, abuse, idle10k; docs/benchmarks.md): bursts at every runner count, a hub restart (quick, idle10k), no polling baseline; flags given as well override its counts and durations")
	f.BoolVar(&markdown, "markdown", false, "print the report as a Markdown section for docs/benchmarks.md")
	f.BoolVar(&asJSON, "json", false, "print the report as JSON (durations in nanoseconds, sizes in bytes), for scripts such as scripts/bench-compare")
	return cmd
}
