package cli

import (
	"context"
	"errors"
	"io"

	"github.com/spf13/cobra"

	"drover/internal/apitypes"
	"drover/internal/client"
)

// projectTriggersCmd is `drover projects triggers`: what on a project's
// forge repository starts its jobs.
func (a *app) projectTriggersCmd() *cobra.Command {
	var req apitypes.ForgeTriggersRequest
	var off bool
	cmd := answerCmd(a, &cobra.Command{
		Use:   "triggers PROJECT [--label L] [--command /drover] [--reviews] [--assign BOT] [--off] [--json]",
		Short: "Show, turn on or off what on the project's forge starts its jobs (owner or admin to change)",
		Long: `Without flags, show the project's forge triggers. With any, turn them on (or
change them): the hub registers a webhook on the project's forge repository
(drover projects config P --forge F --forge-repo OWNER/REPO) with a secret it
makes and keeps, delivered to its public URL.

  --label L       a label L added to an issue starts a job on it
  --command /X    a comment starting with "/X run [--agent A] PROMPT", "/X retry"
                  or "/X cancel" starts, retries or cancels the thread's job
  --reviews       a review asking for changes on a pull request (or "/X address")
                  starts a job from its head that publishes back onto it
  --assign BOT    an issue assigned to the forge login BOT starts a job
  --off           remove the webhook from the forge and the triggers

Jobs start as the drover user linked to the forge login that acted (drover
users link), who must have write access to the repository on the forge and
may use the project; anyone else starts nothing and the bot says so once in
the thread.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := exactArgs("PROJECT")(cmd, args); err != nil {
				return err
			}
			return checkName("project", args[0])
		},
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.ForgeTriggersView, error) {
		set := req.Label != "" || req.Command != "" || req.Reviews || req.Assign != ""
		switch {
		case off && set:
			return apitypes.ForgeTriggersView{}, errors.New("--off takes no other trigger flag")
		case off:
			return c.RemoveTriggers(ctx, args[0])
		case set:
			return c.SetTriggers(ctx, args[0], req)
		}
		return c.Triggers(ctx, args[0])
	}, func(w io.Writer, v apitypes.ForgeTriggersView) error {
		if off {
			_, err := fprintf(w, "triggers of %s off; the webhook is removed from %s on %s\n", v.Project, v.Repo, v.Forge)
			return err
		}
		t := newTable(w)
		fprintf(t, "project\t%s\nforge\t%s %s\nhook\t%s\n", v.Project, v.Forge, v.Repo, dash(v.HookURL))
		fprintf(t, "label\t%s\ncommand\t%s\nreviews\t%t\nassign\t%s\n", dash(v.Label), dash(v.Command), v.Reviews, dash(v.Assign))
		return t.Flush()
	})
	cmd.Flags().StringVar(&req.Label, "label", "", "a label added to an issue starts a job (drover:fix)")
	cmd.Flags().StringVar(&req.Command, "command", "", "the comment command's prefix (/drover)")
	cmd.Flags().BoolVar(&req.Reviews, "reviews", false, "a review asking for changes starts a round on the pull request")
	cmd.Flags().StringVar(&req.Assign, "assign", "", "the bot's forge login: an issue assigned to it starts a job")
	cmd.Flags().BoolVar(&off, "off", false, "turn the triggers off and remove the webhook")
	return cmd
}

// userLinks is what drover users link answers: forge logins and provider
// identities.
type userLinks struct {
	Links []apitypes.ForgeLinkView `json:"links"`
	OIDC  []apitypes.OIDCLinkView  `json:"oidc_links,omitempty"`
}

// userLinkCmd is `drover users link`: which forge logins act as a user,
// and which identities of sign-in providers sign in as them.
func (a *app) userLinkCmd() *cobra.Command {
	var req apitypes.ForgeLinkRequest
	var oreq apitypes.OIDCLinkRequest
	var unlink bool
	cmd := answerCmd(a, &cobra.Command{
		Use:   "link NAME [--forge F --login L | --oidc P --subject S] [--unlink] [--json]",
		Short: "List a user's forge logins and sign-in identities; link or unlink one (admin only)",
		Long: `Without --forge and --login, list the forge logins linked to user NAME (an
admin, or the user themself). With them, link login L on forge connection F
to NAME, or with --unlink remove that link (admin only): what L does on the
forge that starts or acts on jobs, drover does as NAME.

With --oidc and --subject, link the identity S (the ID token's "sub") of
sign-in provider P (drover signin oidc list) to NAME, or with --unlink
remove that link (admin only): that identity signs in to the dashboard as
NAME.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := exactArgs("NAME")(cmd, args); err != nil {
				return err
			}
			return checkName("user", args[0])
		},
		PreRunE: func(cmd *cobra.Command, _ []string) error { return checkFlagRules(cmd) },
	}, func(ctx context.Context, c *client.Client, args []string) (userLinks, error) {
		switch {
		case (req.Forge == "") != (req.Login == ""):
			return userLinks{}, errors.New("give both --forge and --login")
		case (oreq.Provider == "") != (oreq.Subject == ""):
			return userLinks{}, errors.New("give both --oidc and --subject")
		case req.Forge == "" && oreq.Provider == "" && unlink:
			return userLinks{}, errors.New("--unlink needs --forge and --login, or --oidc and --subject")
		case oreq.Provider != "":
			var v apitypes.OIDCLinkView
			var err error
			if unlink {
				v, err = c.UnlinkOIDC(ctx, args[0], oreq.Provider, oreq.Subject)
			} else {
				v, err = c.LinkOIDC(ctx, args[0], oreq)
			}
			return userLinks{Links: []apitypes.ForgeLinkView{}, OIDC: []apitypes.OIDCLinkView{v}}, err
		case req.Forge == "":
			l, err := c.Links(ctx, args[0])
			if err != nil {
				return userLinks{}, err
			}
			o, err := c.OIDCLinks(ctx, args[0])
			return userLinks{Links: l.Links, OIDC: o.Links}, err
		}
		var v apitypes.ForgeLinkView
		var err error
		if unlink {
			v, err = c.UnlinkUser(ctx, args[0], req.Forge, req.Login)
		} else {
			v, err = c.LinkUser(ctx, args[0], req)
		}
		return userLinks{Links: []apitypes.ForgeLinkView{v}}, err
	}, func(w io.Writer, l userLinks) error {
		switch {
		case unlink && len(l.Links) == 1:
			_, err := fprintf(w, "unlinked %s on %s from %s\n", l.Links[0].Login, l.Links[0].Forge, l.Links[0].User)
			return err
		case unlink && len(l.OIDC) == 1:
			_, err := fprintf(w, "unlinked %s of %s from %s\n", l.OIDC[0].Subject, l.OIDC[0].Provider, l.OIDC[0].User)
			return err
		}
		t := newTable(w)
		if len(l.Links) > 0 || len(l.OIDC) == 0 {
			fprintf(t, "USER\tFORGE\tLOGIN\tLINKED\n")
			for _, v := range l.Links {
				fprintf(t, "%s\t%s\t%s\t%s\n", v.User, v.Forge, v.Login, day(v.CreatedAt))
			}
		}
		if len(l.OIDC) > 0 {
			fprintf(t, "USER\tOIDC PROVIDER\tSUBJECT\tLINKED\n")
			for _, v := range l.OIDC {
				fprintf(t, "%s\t%s\t%s\t%s\n", v.User, v.Provider, v.Subject, day(v.CreatedAt))
			}
		}
		return t.Flush()
	})
	f := cmd.Flags()
	f.StringVar(&req.Forge, "forge", "", "the forge connection's name (drover forges list)")
	f.StringVar(&req.Login, "login", "", "the user's login on that forge")
	f.StringVar(&oreq.Provider, "oidc", "", "the sign-in provider's name (drover signin oidc list)")
	f.StringVar(&oreq.Subject, "subject", "", "the identity's subject there (the ID token's sub)")
	f.BoolVar(&unlink, "unlink", false, "remove the link instead")
	cmd.MarkFlagsMutuallyExclusive("forge", "oidc")
	cmd.MarkFlagsMutuallyExclusive("login", "subject")
	return cmd
}
