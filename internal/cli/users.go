package cli

import (
	"fmt"

	"github.com/spf13/cobra"

	"drover/internal/protocol"
)

func (a *app) usersCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "users",
		Short: "Manage users (admin only)",
		Args:  noArgs,
		RunE:  showHelp,
	}
	var admin bool
	add := &cobra.Command{
		Use:   "add NAME [--admin]",
		Short: "Add a user and print its token",
		Long: `Add a user and print its token on stdout, and nothing else there, so a
script can capture it. The hub keeps only a hash: this is the one time the
token is shown.`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := checkName("user", args[0]); err != nil {
				return err
			}
			c, err := a.client()
			if err != nil {
				return err
			}
			r, err := c.AddUser(cmd.Context(), protocol.NewUserRequest{Name: args[0], Admin: admin})
			if err != nil {
				return err
			}
			_, err = fmt.Fprintln(a.env.Stdout, r.Token)
			return err
		},
	}
	add.Flags().BoolVar(&admin, "admin", false, "the user may add users and approve any runner")
	cmd.AddCommand(add)
	return cmd
}
