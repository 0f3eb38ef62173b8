package cli

import (
	"context"

	"github.com/spf13/cobra"

	"drover/internal/client"
	"drover/internal/job"
)

func (a *app) logsCmd() *cobra.Command {
	var follow bool
	var attempt, offset int64
	cmd := &cobra.Command{
		Use:   "logs [-f] [--attempt N] [--offset X] JOB",
		Short: "Print a job's log",
		Long: `Print the log of a job's latest attempt (or of --attempt N) from byte
--offset on. With -f, follow it as it grows; without --attempt, go on with
the job's later attempts until the job ends or waits for an answer (drover
questions), a separator line on stderr before each. While following, the job's events (questions, answers, deliveries,
state changes) are printed on stderr as they happen.`,
		Args: exactArgs("JOB"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if attempt < 0 || offset < 0 {
				return usagef("--attempt and --offset must not be negative")
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			id := args[0]
			if !follow {
				return a.printLog(cmd.Context(), c, id, attempt, offset)
			}
			ctx, stop := a.interruptContext(cmd.Context())
			defer stop()
			opts := []client.FollowOption{client.OnAttempt(a.attemptSeparator), client.OnEvent(a.printEvent), client.UntilWaiting()}
			if attempt > 0 {
				opts = append(opts, client.OnlyAttempt())
			}
			err = c.FollowLog(ctx, id, attempt, offset, a.env.Stdout, opts...)
			if ctx.Err() != nil {
				return nil // interrupted by the user: following has no other end
			}
			if err != nil || attempt > 0 {
				return err
			}
			if j, err := c.Job(ctx, id); err == nil && j.State == job.Waiting {
				fprintf(a.env.Stderr, "job %s waits for an answer: drover questions, then drover answer %s TEXT\n", id, id)
			}
			return nil
		},
	}
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "follow the log as it grows")
	cmd.Flags().Int64Var(&attempt, "attempt", 0, "attempt number (default: the latest)")
	cmd.Flags().Int64Var(&offset, "offset", 0, "first byte to print")
	return cmd
}

// printLog prints what the hub holds of one attempt's log now.
func (a *app) printLog(ctx context.Context, c *client.Client, id string, attempt, offset int64) error {
	if attempt == 0 {
		j, err := c.Job(ctx, id)
		if err != nil {
			return err
		}
		for _, at := range j.Attempts {
			attempt = max(attempt, at.Number)
		}
		if attempt == 0 {
			fprintf(a.env.Stderr, "job %s has no attempts yet\n", id)
			return nil
		}
	}
	for {
		// One answer carries at most protocol.MaxLogChunk bytes.
		ch, err := c.ReadLog(ctx, id, client.LogRequest{Attempt: attempt, Offset: offset}, a.env.Stdout)
		if err != nil {
			return err
		}
		if ch.Complete || ch.Next == offset || (ch.Size >= 0 && ch.Next >= ch.Size) {
			return nil
		}
		offset = ch.Next
	}
}
