package cli

import (
	"context"
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"drover/internal/apitypes"
	"drover/internal/client"
)

func (a *app) loginCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "login --hub URL [--token-file F]",
		Short: "Save the hub URL and your token for later commands",
		Long: `Check a user token against the hub (GET /whoami) and save the hub URL and
the token to $XDG_CONFIG_HOME/drover/client.json (or ~/.config/drover/client.json),
readable by you only. The token comes from --token-file, else from stdin; never
from an argument.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			hub, err := a.hubURL(clientConfig{})
			if err != nil {
				return err
			}
			src := a.tokenFile
			if src == "" {
				src = "-"
				if f, ok := a.env.Stdin.(*os.File); ok && isTerminal(f) {
					fprintf(a.env.Stderr, "Paste your token, then Enter: ")
				}
			}
			token, err := a.readToken(src)
			if err != nil {
				return err
			}
			c, err := client.New(hub, token)
			if err != nil {
				return err
			}
			who, err := c.Whoami(cmd.Context())
			if err != nil {
				return fmt.Errorf("check the token with %s: %w", hub, err)
			}
			if who.Kind != "user" {
				return fmt.Errorf("that is a %s token; log in with a user token", who.Kind)
			}
			path, err := a.configPath()
			if err != nil {
				return err
			}
			if err := saveConfig(path, clientConfig{Hub: c.Hub(), Token: token}); err != nil {
				return err
			}
			fprintf(a.env.Stdout, "logged in to %s as %s; saved to %s\n", c.Hub(), describeWho(who), path)
			return nil
		},
	}
}

func isTerminal(f *os.File) bool {
	st, err := f.Stat()
	return err == nil && st.Mode()&os.ModeCharDevice != 0
}

func (a *app) whoamiCmd() *cobra.Command {
	var hub string
	return answerCmd(a, &cobra.Command{
		Use:   "whoami [--json]",
		Short: "Show who the token belongs to",
		Args:  noArgs,
	}, func(ctx context.Context, c *client.Client, _ []string) (apitypes.Whoami, error) {
		hub = c.Hub()
		return c.Whoami(ctx)
	}, func(w io.Writer, who apitypes.Whoami) error {
		_, err := fprintf(w, "%s on %s\n", describeWho(who), hub)
		return err
	})
}

func describeWho(w apitypes.Whoami) string {
	s := w.Kind + " " + w.Name
	if w.Runner != "" {
		s += " (runner " + w.Runner + ")"
	}
	if w.Admin {
		s += " (admin)"
	}
	return s
}
