package cli

import (
	"github.com/spf13/cobra"

	"drover/internal/buildinfo"
)

// droverVersion is what `drover version` and `drover --version` print.
func droverVersion() string { return "drover " + buildinfo.Version() + "\n" }

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print drover's version (runners report theirs to the hub: 'drover runners')",
		Args:  noArgs,
		RunE: func(*cobra.Command, []string) error {
			_, err := fprintf(a.env.Stdout, "drover %s\n", buildinfo.Version())
			return err
		},
	}
}
