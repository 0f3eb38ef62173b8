package cli

import (
	"context"
	"io"

	"github.com/spf13/cobra"

	"drover/internal/apitypes"
	"drover/internal/client"
)

// signinCmd is `drover signin oidc add|list|remove`: the OpenID Connect
// providers users sign in to the dashboard with (internal/signin).
func (a *app) signinCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "signin oidc",
		Short: "Set how users sign in to the dashboard (OpenID Connect providers)",
		Long: `Users sign in to the dashboard with a token, with a forge (drover forges
oauth) or with an OpenID Connect provider set here. An identity of a
provider (its issuer and the ID token's subject, never an email) signs in
only as the drover user an admin linked it to (drover users link USER
--oidc NAME --subject SUB).`,
		Args: noArgs,
		RunE: showHelp,
	}
	oidc := &cobra.Command{
		Use:   "oidc list|add|remove",
		Short: "List, add and remove the OpenID Connect providers users sign in with",
		Args:  noArgs,
		RunE:  showHelp,
	}
	names := func(cmd *cobra.Command, args []string) error {
		if err := exactArgs("NAME")(cmd, args); err != nil {
			return err
		}
		return checkName("provider", args[0])
	}
	list := answerCmd(a, &cobra.Command{
		Use:   "list [--json]",
		Short: "List the providers, never a secret",
		Args:  noArgs,
	}, func(ctx context.Context, c *client.Client, _ []string) (apitypes.OIDCProviderList, error) {
		return c.OIDCProviders(ctx)
	}, func(w io.Writer, l apitypes.OIDCProviderList) error {
		t := newTable(w)
		fprintf(t, "NAME\tISSUER\tCLIENT ID\tREDIRECT URI\n")
		for _, v := range l.Providers {
			fprintf(t, "%s\t%s\t%s\t%s\n", v.Name, v.Issuer, v.ClientID, v.Callback)
		}
		return t.Flush()
	})

	var req apitypes.OIDCProviderRequest
	var secretFile string
	add := answerCmd(a, &cobra.Command{
		Use:   "add NAME --issuer URL --client-id ID --client-secret-file F [--json]",
		Short: "Add a provider, or replace its client (admin only)",
		Long: `Add an OpenID Connect provider (admin only): register a client on it with
the redirect URI this command prints (the hub's --url + /auth/oidc/NAME/callback),
then give its issuer (the URL its /.well-known/openid-configuration is under,
exactly as the provider names itself), client id and secret here. The hub
reads the discovery document before it keeps anything. The secret is read
from a file (or stdin, "-"), never from an argument, and stays in the hub.
A provider's issuer does not change: remove it (and its links) first.`,
		Args: names,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if a.tokenFile == "-" && secretFile == "-" {
				return usagef("stdin can hold the API token (--token-file -) or the client secret, not both")
			}
			return checkFlagRules(cmd)
		},
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.OIDCProviderView, error) {
		var err error
		if req.ClientSecret, err = a.readSecret("the provider client's secret", maxForgeCredential, secretFile); err != nil {
			return apitypes.OIDCProviderView{}, err
		}
		return c.PutOIDCProvider(ctx, args[0], req)
	}, func(w io.Writer, v apitypes.OIDCProviderView) error {
		if v.NoPublicURL {
			_, err := fprintf(w, "provider %s set, but the hub has no public URL (drover hub --url), so the dashboard offers no sign-in\n", v.Name)
			return err
		}
		_, err := fprintf(w, "provider %s set; its client's redirect URI is %s\n", v.Name, v.Callback)
		return err
	})
	f := add.Flags()
	f.StringVar(&req.Issuer, "issuer", "", "the provider's issuer URL")
	f.StringVar(&req.ClientID, "client-id", "", "this hub's client id there")
	f.StringVar(&secretFile, "client-secret-file", "", `a file holding the client's secret ("-": stdin)`)
	for _, n := range []string{"issuer", "client-id", "client-secret-file"} {
		_ = add.MarkFlagRequired(n)
	}

	remove := answerCmd(a, &cobra.Command{
		Use:   "remove NAME [--json]",
		Short: "Remove a provider and the links of its identities (admin only)",
		Args:  names,
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.OIDCProviderView, error) {
		return c.RemoveOIDCProvider(ctx, args[0])
	}, func(w io.Writer, v apitypes.OIDCProviderView) error {
		_, err := fprintf(w, "provider %s removed, with its links\n", v.Name)
		return err
	})
	oidc.AddCommand(list, add, remove)
	cmd.AddCommand(oidc)
	return cmd
}
