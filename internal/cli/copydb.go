//go:build !drover_runner

package cli

import (
	"github.com/spf13/cobra"

	"drover/internal/hub"
)

func (a *app) copyDBCmd() *cobra.Command {
	var from, to, data string
	cmd := &cobra.Command{
		Use:   "copy-db --to postgres://USER@HOST:PORT/DB [--from DATA/drover.db]",
		Short: "Copy a stopped SQLite hub's whole state into an empty Postgres database",
		Long: `Copy every user, token, runner, project, job, attempt, log, event and
question of a SQLite hub into an empty Postgres database, in one transaction,
then run the hub with --db on the same data directory (it keeps the admin
token and hosted repositories). Stop the hub first. A target that has rows
is refused. Give the password with PGPASSWORD or ~/.pgpass rather than in
the URL, which other users of the machine may see in the process list.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if to == "" {
				return usagef("--to is required: the Postgres database to copy into")
			}
			if from == "" {
				if data == "" {
					d, err := a.dataDir()
					if err != nil {
						return err
					}
					data = d
				}
				from = hub.StorePath(data)
			}
			copied, err := hub.CopyDB(cmd.Context(), from, to)
			if err != nil {
				return err
			}
			fprintf(a.env.Stdout, "copied %s: %s\n", safe(from), copied)
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&from, "from", "", "the SQLite database (default DATA/drover.db)")
	f.StringVar(&data, "data", "", "the hub's data directory, for the default --from")
	f.StringVar(&to, "to", "", "the empty Postgres database (postgres://...)")
	return cmd
}
