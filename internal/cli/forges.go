package cli

import (
	"context"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"drover/internal/apitypes"
	"drover/internal/client"
	"drover/internal/forge"
)

// maxForgeCredential bounds a forge token or a GitHub App's private key
// (PEM) read from a file: both are a few KiB at most.
const maxForgeCredential = 64 << 10

// forgesCmd is `forges list|add|remove`: the hub's connections to code
// forges that jobs' results are published to.
func (a *app) forgesCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "forges list|add|remove|oauth",
		Short: "List, add and remove the hub's forge connections (GitHub, Gitea/Forgejo, GitLab)",
		Long: `A forge connection is a forge (GitHub, Gitea or Forgejo, GitLab) and the
credential the hub publishes jobs' results with: it pushes their branches and
opens their pull requests (drover publish). A project publishes to a
repository on one connection (drover projects config PROJECT --forge NAME
--forge-repo OWNER/REPO).

On GitHub a GitHub App is the recommended credential: the hub mints a
short-lived installation token for each use, scoped to the App's
installation, instead of holding a long-lived personal token. Elsewhere give
a token of a bot account with write access to the repositories.

Credentials stay in the hub: they are read from a file (or stdin), never
from an argument, and no command, page or runner ever sees them again.
Admins add and remove connections; every user may list them.`,
		Args: noArgs,
		RunE: showHelp,
	}
	names := func(cmd *cobra.Command, args []string) error {
		if err := exactArgs("NAME")(cmd, args); err != nil {
			return err
		}
		return checkName("forge", args[0])
	}
	list := answerCmd(a, &cobra.Command{
		Use:   "list [--json]",
		Short: "List the hub's forge connections and the projects mapped to them, never a credential",
		Args:  noArgs,
	}, func(ctx context.Context, c *client.Client, _ []string) (apitypes.ForgeList, error) {
		return c.Forges(ctx)
	}, func(w io.Writer, l apitypes.ForgeList) error { return printForges(w, l.Forges) })

	var kind, url, tokenFile, keyFile string
	var appID int64
	add := answerCmd(a, &cobra.Command{
		Use: "add NAME --kind " + strings.Join(forge.Kinds(), "|") +
			" --url URL (--forge-token-file F | --app-id ID --private-key-file F) [--json]",
		Short: "Add a forge connection, or replace the one of that name (admin only)",
		Long: `Add a forge connection, or replace the one of that name (admin only).

--url is the forge's root (https://github.com, https://gitea.example.com).
The credential is a token (--forge-token-file) or, on GitHub and
recommended there, a GitHub App: its id (--app-id) and its private key
(--private-key-file, the PEM file GitHub gave). A file of "-" is stdin.
The credential goes to the hub only and stays there.`,
		Args: names,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if a.tokenFile == "-" && (tokenFile == "-" || keyFile == "-") {
				return usagef("stdin can hold the API token (--token-file -) or the forge's credential, not both")
			}
			return checkFlagRules(cmd)
		},
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.ForgeView, error) {
		req := apitypes.ForgeRequest{Kind: kind, URL: url, AppID: appID}
		var err error
		if tokenFile != "" {
			req.Token, err = a.readSecret("the forge's token", maxForgeCredential, tokenFile)
		} else {
			if f, ok := a.env.Stdin.(*os.File); ok && keyFile == "-" && isTerminal(f) {
				return apitypes.ForgeView{}, usagef("pipe the private key in (--private-key-file -) or name its file")
			}
			req.PrivateKey, err = a.readSecret("the GitHub App's private key", maxForgeCredential, keyFile)
		}
		if err != nil {
			return apitypes.ForgeView{}, err
		}
		conn := forge.Conn{Kind: req.Kind, URL: req.URL, Token: req.Token, AppID: req.AppID, PrivateKey: []byte(req.PrivateKey)}
		if err := conn.Validate(); err != nil {
			return apitypes.ForgeView{}, usagef("%v", err)
		}
		return c.PutForge(ctx, args[0], req)
	}, func(w io.Writer, v apitypes.ForgeView) error {
		_, err := fprintf(w, "forge %s: %s at %s, with %s; the credential stays in the hub\n", v.Name, v.Kind, v.URL, credential(v))
		return err
	})
	f := add.Flags()
	f.StringVar(&kind, "kind", "", "the forge's kind: "+strings.Join(forge.Kinds(), ", ")+" (gitea for Forgejo too)")
	f.StringVar(&url, "url", "", "the forge's root URL, e.g. https://github.com")
	f.StringVar(&tokenFile, "forge-token-file", "", `a file holding the forge's token ("-": stdin)`)
	f.Int64Var(&appID, "app-id", 0, "a GitHub App's id (recommended on GitHub)")
	f.StringVar(&keyFile, "private-key-file", "", `the GitHub App's private key, a PEM file ("-": stdin)`)
	_ = add.MarkFlagRequired("kind")
	_ = add.MarkFlagRequired("url")
	add.MarkFlagsOneRequired("forge-token-file", "app-id")
	add.MarkFlagsMutuallyExclusive("forge-token-file", "app-id")
	add.MarkFlagsMutuallyExclusive("forge-token-file", "private-key-file")
	add.MarkFlagsRequiredTogether("app-id", "private-key-file")

	remove := answerCmd(a, &cobra.Command{
		Use:   "remove NAME [--json]",
		Short: "Remove a forge connection (admin only; refused while a project maps to it)",
		Args:  names,
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.ForgeView, error) {
		return c.RemoveForge(ctx, args[0])
	}, func(w io.Writer, v apitypes.ForgeView) error {
		_, err := fprintf(w, "forge %s removed\n", v.Name)
		return err
	})
	cmd.AddCommand(list, add, remove, a.forgeOAuthCmd(names))
	return cmd
}

// forgeOAuthCmd is drover forges oauth: signing in to the dashboard with
// the forge (internal/signin).
func (a *app) forgeOAuthCmd(names cobra.PositionalArgs) *cobra.Command {
	var clientID, secretFile string
	var off bool
	cmd := answerCmd(a, &cobra.Command{
		Use:   "oauth NAME (--client-id ID --client-secret-file F | --off) [--json]",
		Short: "Let users sign in to the dashboard with the forge, through its OAuth application (admin only)",
		Long: `Let users sign in to the dashboard with the forge (admin only): register
an OAuth application on the forge with the redirect URI this command prints
(the hub's --url + /auth/forge/NAME/callback), then give its client id and
secret here. The secret is read from a file (or stdin, "-"), never from an
argument, and stays in the hub. A forge account signs in only as the drover
user an admin linked it to (drover users link USER --forge NAME --login L).
--off turns it off.`,
		Args: names,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if a.tokenFile == "-" && secretFile == "-" {
				return usagef("stdin can hold the API token (--token-file -) or the client secret, not both")
			}
			return checkFlagRules(cmd)
		},
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.ForgeOAuthView, error) {
		req := apitypes.ForgeOAuthRequest{ClientID: clientID, Off: off}
		if !off {
			var err error
			if req.ClientSecret, err = a.readSecret("the OAuth application's client secret", maxForgeCredential, secretFile); err != nil {
				return apitypes.ForgeOAuthView{}, err
			}
		}
		return c.SetForgeOAuth(ctx, args[0], req)
	}, func(w io.Writer, v apitypes.ForgeOAuthView) error {
		switch {
		case !v.On:
			_, err := fprintf(w, "forge %s: sign-in off\n", v.Forge)
			return err
		case v.NoPublicURL:
			_, err := fprintf(w, "forge %s: sign-in set, but the hub has no public URL (drover hub --url), so the dashboard offers none\n", v.Forge)
			return err
		}
		_, err := fprintf(w, "forge %s: sign-in set; the application's redirect URI is %s\n", v.Forge, v.Callback)
		return err
	})
	f := cmd.Flags()
	f.StringVar(&clientID, "client-id", "", "the OAuth application's client id")
	f.StringVar(&secretFile, "client-secret-file", "", `a file holding its client secret ("-": stdin)`)
	f.BoolVar(&off, "off", false, "turn the forge's sign-in off")
	cmd.MarkFlagsRequiredTogether("client-id", "client-secret-file")
	cmd.MarkFlagsOneRequired("client-id", "off")
	cmd.MarkFlagsMutuallyExclusive("client-id", "off")
	return cmd
}

// checkFlagRules checks a command's required and grouped flags (cobra
// checks them after PreRunE, as errors of its own) as usage errors.
func checkFlagRules(cmd *cobra.Command) error {
	if err := cmd.ValidateRequiredFlags(); err != nil {
		return usagef("%v", err)
	}
	if err := cmd.ValidateFlagGroups(); err != nil {
		return usagef("%v", err)
	}
	return nil
}

// credential says what kind of credential a connection holds.
func credential(v apitypes.ForgeView) string {
	if v.AppID != 0 {
		return "GitHub App " + strconv.FormatInt(v.AppID, 10)
	}
	return "a token"
}

func printForges(w io.Writer, fs []apitypes.ForgeView) error {
	if len(fs) == 0 {
		_, err := fprintf(w, "no forge connections (drover forges add)\n")
		return err
	}
	t := newTable(w)
	fprintf(t, "FORGE\tKIND\tURL\tCREDENTIAL\tPROJECTS\tCREATED\tBY\n")
	for _, f := range fs {
		fprintf(t, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.Name, f.Kind, f.URL, credential(f), dash(strings.Join(f.Projects, ",")),
			day(f.CreatedAt), f.CreatedBy)
	}
	return t.Flush()
}

// publishCmd is `drover publish JOB`.
func (a *app) publishCmd() *cobra.Command {
	var pr, agit, draft, asJSON bool
	var branch, base, title string
	var toPR int
	cmd := &cobra.Command{
		Use:   "publish JOB [--pr | --branch NAME | --to-pr N | --agit] [--base B] [--draft] [--title T] [--json]",
		Short: "Publish a completed job's result to its project's forge, as a pull request or a branch",
		Long: `Publish a completed job's result to the repository its project maps to on a
forge (drover projects config PROJECT --forge NAME --forge-repo OWNER/REPO),
exactly once: publishing again answers with the job's publication.

  --pr (the default)  push the branch drover/JOB and open its pull request
                      (or find the one already open) into --base
  --branch NAME       push the result to branch NAME only, no pull request
  --to-pr N           push onto pull request N's head branch, fast-forward only
  --agit              Gitea/Forgejo: open a pull request by AGit (a push to
                      refs/for/BASE), without a branch

--base is the branch the pull request goes into (default: the repository's
default branch). --draft opens a draft, --title sets its title (default: one
the hub makes from the job). The requester, the project's owner or an admin
may publish. When the forge is unreachable or limits the hub, the
publication is pending and the hub carries it on by itself: 'drover show
JOB' shows how it went. A failed publication ends drover with exit status 1.`,
		Args: exactArgs("JOB"),
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := checkFlagRules(cmd); err != nil {
				return err
			}
			if cmd.Flags().Changed("branch") && branch == "" {
				return usagef("--branch needs a branch name")
			}
			if cmd.Flags().Changed("to-pr") && toPR <= 0 {
				return usagef("--to-pr needs a pull request's number")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			req := apitypes.PublishRequest{Branch: branch, ToPR: toPR, Base: base, Draft: draft, Title: title}
			switch {
			case pr:
				req.Mode = apitypes.PublishPR
			case branch != "":
				req.Mode = apitypes.PublishBranch
			case toPR != 0:
				req.Mode = apitypes.PublishToPR
			case agit:
				req.Mode = apitypes.PublishAGit
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			v, err := c.PublishJob(cmd.Context(), args[0], req)
			if err != nil {
				return err
			}
			if asJSON {
				err = printJSON(a.env.Stdout, v)
			} else {
				err = printPublication(a.env.Stdout, v)
				if err == nil && v.State == publicationPending {
					_, err = fprintf(a.env.Stdout, "\nThe hub carries the publication on by itself; see how it went with: drover show %s\n", args[0])
				}
			}
			if err == nil && v.State == publicationFailed {
				return exitCode(1) // printed above
			}
			return err
		},
	}
	f := cmd.Flags()
	f.BoolVar(&pr, "pr", false, "push the branch drover/JOB and open its pull request (the default)")
	f.StringVar(&branch, "branch", "", "push the result to this branch only, no pull request")
	f.IntVar(&toPR, "to-pr", 0, "push onto this open pull request's head branch (fast-forward only)")
	f.BoolVar(&agit, "agit", false, "Gitea/Forgejo: open the pull request by AGit (refs/for/BASE), without a branch")
	f.StringVar(&base, "base", "", "the branch the pull request goes into (default: the repository's default branch)")
	f.BoolVar(&draft, "draft", false, "open the pull request as a draft")
	f.StringVar(&title, "title", "", "the pull request's title (default: the hub's, from the job)")
	f.BoolVar(&asJSON, "json", false, "print the publication as JSON")
	cmd.MarkFlagsMutuallyExclusive("pr", "branch", "to-pr", "agit")
	cmd.MarkFlagsMutuallyExclusive("to-pr", "base") // the pull request has its base
	for _, prOnly := range []string{"draft", "title"} {
		cmd.MarkFlagsMutuallyExclusive("branch", prOnly)
		cmd.MarkFlagsMutuallyExclusive("to-pr", prOnly)
	}
	return cmd
}

// Publication states (PublicationView.State).
const (
	publicationPending = "pending"
	publicationFailed  = "failed"
)

// printPublication prints where a job's result went on its forge and how
// (drover publish, drover show). The URL and the reason come from the
// forge: fprintf escapes them.
func printPublication(w io.Writer, p apitypes.PublicationView) error {
	t := newTable(w)
	mode := p.Mode
	if mode == "" {
		mode = apitypes.PublishPR
	}
	fprintf(t, "Publication:\t%s (%s to %s on forge %s)\n", dash(p.State), mode, dash(p.Repo), dash(p.Forge))
	if p.PR != 0 || p.URL != "" {
		num := ""
		if p.PR != 0 {
			num = "#" + strconv.Itoa(p.PR) + " "
		}
		fprintf(t, "Pull request:\t%s%s\n", num, p.URL)
	}
	if p.Branch != "" || p.Base != "" {
		fprintf(t, "Branch:\t%s into %s\n", dash(p.Branch), dash(p.Base))
	}
	if p.Pushed != "" && p.Pushed != p.Commit && p.Commit != "" {
		fprintf(t, "Pushed:\t%s (the job's commit %s)\n", p.Pushed, p.Commit)
	} else if p.Pushed != "" {
		fprintf(t, "Pushed:\t%s\n", p.Pushed)
	} else if p.Commit != "" {
		fprintf(t, "Commit:\t%s (not pushed yet)\n", p.Commit)
	}
	if p.Code != "" || p.Reason != "" {
		label := "Failed"
		if p.State != publicationFailed {
			label = "Last error" // of a try the hub carries on after
		}
		fprintf(t, "%s:\t%s: %s\n", label, dash(p.Code), dash(p.Reason))
	}
	if p.State == publicationPending && p.Tries > 0 {
		fprintf(t, "Tries:\t%d\n", p.Tries)
	}
	return t.Flush()
}

// publishChoices are the values of projects config --publish (none: only
// drover publish publishes).
var publishChoices = []string{apitypes.PublishPR, apitypes.PublishBranch, "none"}

// forgeConfig adds to req the forge flags of `projects config` the user set.
// forgeFlags are the flags of drover projects config that say where and
// how a project's results publish.
type forgeFlags struct {
	name, repo, publish, author, email string
	directPush, sign                   bool
}

func forgeConfig(cmd *cobra.Command, req *apitypes.ProjectConfigRequest, f forgeFlags) error {
	name, repo, publish, directPush := f.name, f.repo, f.publish, f.directPush
	changed := cmd.Flags().Changed
	switch {
	case changed("forge") && name == "":
		if repo != "" {
			return usagef(`--forge "" unmaps the project: no --forge-repo with it`)
		}
		req.Forge, req.ForgeRepo = ptrTo(""), ptrTo("")
	case changed("forge") || changed("forge-repo"):
		if name == "" || repo == "" {
			return usagef("map the project with both --forge NAME and --forge-repo OWNER/REPO")
		}
		if err := checkName("forge", name); err != nil {
			return err
		}
		if _, err := forge.ParseRepo(repo); err != nil {
			return usagef("--forge-repo: %v", err)
		}
		req.Forge, req.ForgeRepo = &name, &repo
	}
	if changed("publish") {
		if !slices.Contains(publishChoices, publish) {
			return usagef("--publish %q: want one of %s", publish, strings.Join(publishChoices, ", "))
		}
		req.Publish = &publish
	}
	if changed("direct-push") {
		req.DirectPush = &directPush
	}
	if changed("publish-author") {
		author := f.author
		switch author {
		case "agent":
			author = ""
		case "requester":
		default:
			return usagef("--publish-author %q: want requester or agent", author)
		}
		req.PublishAuthor = &author
	}
	if changed("publish-email") {
		req.PublishEmail = &f.email
	}
	if changed("publish-sign") {
		req.PublishSign = &f.sign
	}
	return nil
}

// publishesBy says what a project's completed jobs publish by themselves.
func publishesBy(c apitypes.ProjectConfig) string {
	s := "only by drover publish"
	switch c.Publish {
	case apitypes.PublishPR:
		s = "a pull request of each completed job"
	case apitypes.PublishBranch:
		s = "a branch of each completed job"
	}
	if c.DirectPush {
		s += "; may push to the default branch or a pull request's base"
	}
	if c.PublishAuthor != "" {
		s += "; commits authored by the job's requester"
		if c.PublishEmail != "" {
			s += " (" + c.PublishEmail + ")"
		}
	}
	if c.PublishSign {
		s += "; commits signed with the hub's key"
	}
	return s
}
