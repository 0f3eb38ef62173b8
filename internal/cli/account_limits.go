package cli

import (
	"strconv"

	"github.com/spf13/cobra"

	"drover/internal/accounts"
)

// limitFlags are the spend-limit flags of `drover runner` and `drover
// runner account limits`.
func limitFlags(cmd *cobra.Command, l *accounts.Limits) {
	fl := cmd.Flags()
	fl.IntVar(&l.JobsPerHour, "max-jobs-per-hour", 0, "take at most this many attempts in any hour (0: no limit)")
	fl.IntVar(&l.TurnsPerJob, "max-turns", 0, "stop an attempt whose agent takes more model turns (native, claude; 0: no limit)")
	fl.Float64Var(&l.SpendPerDay, "max-spend-per-day", 0, "take no attempts once agents reported this many USD today, UTC (0: no limit)")
}

func (a *app) accountLimitsCmd(open openAccounts) *cobra.Command {
	var l accounts.Limits
	cmd := &cobra.Command{
		Use:   "limits ID|LABEL [--max-jobs-per-hour N] [--max-turns N] [--max-spend-per-day USD] [--home DIR]",
		Short: "Set an account's own spend limits, which the runner enforces alongside its own",
		Long: `Set the account's spend limits; a flag left out keeps its value, 0 removes
it. An account at its hourly or daily limit sits out until the limit resets
(limited, as for its provider's rate limit: 'drover runners' shows it), and
the runner runs other accounts' jobs meanwhile. An attempt under it that
takes more model turns than --max-turns (or the runner's, if lower) fails
with reason limit_turns, its work published. Counts survive restarts.`,
		Args: exactArgs("ID|LABEL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := l.Check(); err != nil {
				return usagef("%v", err)
			}
			s, _, err := open()
			if err != nil {
				return err
			}
			acct, err := s.Find(args[0])
			if err != nil {
				return err
			}
			set := acct.Limits
			fl := cmd.Flags()
			if fl.Changed("max-jobs-per-hour") {
				set.JobsPerHour = l.JobsPerHour
			}
			if fl.Changed("max-turns") {
				set.TurnsPerJob = l.TurnsPerJob
			}
			if fl.Changed("max-spend-per-day") {
				set.SpendPerDay = l.SpendPerDay
			}
			if acct, err = s.SetLimits(acct.ID, set); err != nil {
				return err
			}
			_, err = fprintf(a.env.Stdout, "account %s limits: jobs per hour %s, turns per job %s, spend per day %s\n", acct,
				orNone(set.JobsPerHour), orNone(set.TurnsPerJob), usdOrNone(set.SpendPerDay))
			return err
		},
	}
	limitFlags(cmd, &l)
	return cmd
}

func orNone(n int) string {
	if n == 0 {
		return "any"
	}
	return strconv.Itoa(n)
}

func usdOrNone(v float64) string {
	if v == 0 {
		return "any"
	}
	return "$" + strconv.FormatFloat(v, 'f', 2, 64)
}
