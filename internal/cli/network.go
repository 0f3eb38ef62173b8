package cli

import (
	"context"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"drover/internal/apitypes"
	"drover/internal/client"
	"drover/internal/netpolicy"
	"drover/internal/protocol"
)

// projectConfigCmds are `projects config|network|setup|caches`: what a
// project's owner chooses for its jobs.
func (a *app) projectConfigCmds() []*cobra.Command {
	project := func(cmd *cobra.Command, args []string) error {
		if err := exactArgs("PROJECT")(cmd, args); err != nil {
			return err
		}
		return checkName("project", args[0])
	}
	text := func(w io.Writer, c apitypes.ProjectConfig) error { return printProjectConfig(w, c) }
	var large bool
	var sparse string
	var ff forgeFlags
	var show *cobra.Command
	show = answerCmd(a, &cobra.Command{
		Use: "config PROJECT [--large[=false]] [--sparse PATH,...|none] [--forge NAME --forge-repo OWNER/REPO] " +
			"[--publish pr|branch|none] [--direct-push[=false]] [--publish-author requester|agent] [--publish-email TEMPLATE] " +
			"[--publish-sign[=false]] [--json]",
		Short: "Show a project's network policies, setup, caches and forge, and the hub's policies to choose from",
		Long: `Show a project's config; its owner or an admin changes it with the flags.
--large marks the project as too large to clone whole: runners then fetch it
as a partial clone (--filter=blob:none) and get each blob from the hub when a
checkout needs it. --large=false makes later clones whole again. --sparse
makes its jobs' worktrees cone-mode sparse checkouts of these folders (with
the files of the top level and of the folders on the way); none makes them
whole again.

--forge and --forge-repo map the project to repository OWNER/REPO on a forge
connection (drover forges list): its jobs' results are published there
(drover publish); --forge "" unmaps it. --publish is what a completed job
publishes by itself: pr (a pull request), branch, or none (only drover
publish does). --direct-push lets a publication push to the repository's
default branch or a pull request's base. --publish-author requester rewrites
a publication's commits with the job's requester as author (email
--publish-email, its {user} the requester's name; default
{user}@users.noreply.FORGE-HOST) and the agent in a Co-authored-by trailer;
agent keeps them as the agent made them. --publish-sign signs them with the
hub's key (the operator's signing_key), so rulesets that require signed
commits accept them.`,
		Args: project,
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.ProjectConfig, error) {
		var req apitypes.ProjectConfigRequest
		if err := forgeConfig(show, &req, ff); err != nil {
			return apitypes.ProjectConfig{}, err
		}
		if show.Flags().Changed("large") {
			req.Large = &large
		}
		if show.Flags().Changed("sparse") {
			paths := []string{}
			if sparse != "none" {
				paths = splitList(sparse)
			}
			if err := protocol.CheckSparsePaths(paths); err != nil {
				return apitypes.ProjectConfig{}, usagef("%v", err)
			}
			req.Sparse = &paths
		}
		if req.Large == nil && req.Sparse == nil && req.Forge == nil && req.ForgeRepo == nil && req.Publish == nil &&
			req.DirectPush == nil && req.PublishAuthor == nil && req.PublishEmail == nil && req.PublishSign == nil {
			return c.ProjectConfig(ctx, args[0])
		}
		return c.SetProjectConfig(ctx, args[0], req)
	}, text)
	show.Flags().BoolVar(&large, "large", false, "runners fetch the project as a partial clone (blobs on demand)")
	show.Flags().StringVar(&sparse, "sparse", "", "folders its jobs' worktrees hold (cone-mode sparse checkout), comma-separated, or none")
	show.Flags().StringVar(&ff.name, "forge", "", `the forge connection its jobs' results are published to ("" unmaps the project)`)
	show.Flags().StringVar(&ff.repo, "forge-repo", "", "the repository on that forge: OWNER/REPO (GROUP/SUB/REPO in a GitLab subgroup)")
	show.Flags().StringVar(&ff.publish, "publish", "", "what a completed job publishes by itself: "+strings.Join(publishChoices, ", "))
	show.Flags().BoolVar(&ff.directPush, "direct-push", false, "publications may push to the default branch or a pull request's base")
	show.Flags().StringVar(&ff.author, "publish-author", "", "who authors published commits: requester (rewritten, the agent co-author) or agent (as made)")
	show.Flags().StringVar(&ff.email, "publish-email", "", `the requester's email in rewritten commits, {user} their name ("" for {user}@users.noreply.FORGE-HOST)`)
	show.Flags().BoolVar(&ff.sign, "publish-sign", false, "sign published commits with the hub's key (the operator's signing_key)")

	var setupNet, agentNet string
	network := answerCmd(a, &cobra.Command{
		Use:   "network PROJECT [--setup POLICY,...|none] [--agent POLICY,...|none] [--json]",
		Short: "Choose the network policies of a project's setup and agent phases (its owner or an admin)",
		Long: `Choose, from the network policies the hub's operator defines (drover projects
config PROJECT lists them), what a project's setup commands and its agents may
reach. "none" is no network; "open" (every host) exists only when the operator
enables it. A job narrows its agent's policies (drover run --network), never
widens them.`,
		Args: project,
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.ProjectConfig, error) {
		var req apitypes.ProjectConfigRequest
		if setupNet != "" {
			req.SetupNetwork = ptrTo(splitList(setupNet))
		}
		if agentNet != "" {
			req.AgentNetwork = ptrTo(splitList(agentNet))
		}
		if req.SetupNetwork == nil && req.AgentNetwork == nil {
			return apitypes.ProjectConfig{}, usagef("name --setup or --agent policies (or none)")
		}
		return c.SetProjectConfig(ctx, args[0], req)
	}, text)
	network.Flags().StringVar(&setupNet, "setup", "", "policies of the setup phase, comma-separated, or none")
	network.Flags().StringVar(&agentNet, "agent", "", "policies of the agent phase, comma-separated, or none")

	var commands, keyFiles []string
	var timeout time.Duration
	var clear bool
	var fromRepo string
	var approve, approveFile, unapprove []string
	var setup *cobra.Command
	setup = answerCmd(a, &cobra.Command{
		Use: "setup PROJECT [--command CMD]... [--from-repo FILE] [--approve SHA256|--approve-file FILE|--unapprove SHA256]... " +
			"[--timeout D] [--key-file FILE]... [--clear] [--json]",
		Short: "Set the commands a project's jobs run before their agent (its owner or an admin)",
		Long: `Set the project's setup: shell commands run in order (sh -c) in each attempt's
sandbox, in its worktree, before the agent, under the setup network policy and
within --timeout for all of them (default 10m). Their output is a marked
section of the job's log; a failing, hanging or flooding setup fails the
attempt with reason setup_failed. --clear removes the setup.

--from-repo FILE enables a setup script of the repository itself (e.g.
.drover/setup.sh): each attempt runs it with sh, after the commands, in its
sandbox under the setup policy, as it is in the job's commit. It is off until
the project's owner names it; --from-repo "" turns it off again.

Any member's commit can change that script, so it gets the project's secrets
(drover projects secrets) only in a version the owner approved: --approve
takes its SHA-256 (sha256sum .drover/setup.sh; the job's log prints it when
it ran without them), --approve-file hashes a local copy the owner has read,
--unapprove takes an approval back. Any other version runs without the
secrets, and the job's log says why. The commands above always get them.

--key-file names the files the setup's result depends on (lockfiles: go.sum,
package-lock.json): a runner that already ran the same commands successfully
for the project, with the same contents of these files, skips the setup. Its
result must then live in the project's caches (drover projects caches).`,
		Args: project,
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.ProjectConfig, error) {
		var req apitypes.ProjectConfigRequest
		switch {
		case clear && len(commands) > 0:
			return apitypes.ProjectConfig{}, usagef("--clear or --command, not both")
		case clear:
			req.SetupCommands = ptrTo([]string{})
		case len(commands) > 0:
			req.SetupCommands = ptrTo(commands)
		}
		if clear && setup.Flags().Changed("from-repo") {
			return apitypes.ProjectConfig{}, usagef("--clear or --from-repo, not both")
		}
		if clear {
			req.SetupFile = ptrTo("")
		} else if setup.Flags().Changed("from-repo") {
			req.SetupFile = ptrTo(fromRepo)
		}
		if timeout != 0 {
			d := protocol.Duration(timeout)
			req.SetupTimeout = &d
		}
		if clear {
			req.SetupKeys = ptrTo([]string{})
		} else if len(keyFiles) > 0 {
			req.SetupKeys = ptrTo(keyFiles)
		}
		req.ApproveSetup, req.UnapproveSetup = approve, unapprove
		for _, f := range approveFile {
			b, err := os.ReadFile(f)
			if err != nil {
				return apitypes.ProjectConfig{}, usagef("--approve-file: %v", err)
			}
			req.ApproveSetup = append(req.ApproveSetup, protocol.SetupFileHash(b))
		}
		for _, h := range append(slices.Clone(req.ApproveSetup), req.UnapproveSetup...) {
			if _, err := protocol.CheckSetupHash(h); err != nil {
				return apitypes.ProjectConfig{}, usagef("%v", err)
			}
		}
		if req.SetupCommands == nil && req.SetupTimeout == nil && req.SetupKeys == nil && req.SetupFile == nil &&
			len(req.ApproveSetup) == 0 && len(req.UnapproveSetup) == 0 {
			return apitypes.ProjectConfig{}, usagef("name --command, --from-repo, --approve, --unapprove, --timeout, --key-file or --clear")
		}
		return c.SetProjectConfig(ctx, args[0], req)
	}, text)
	setup.Flags().StringArrayVar(&commands, "command", nil, "a setup command (repeatable, run in order)")
	setup.Flags().DurationVar(&timeout, "timeout", 0, "time for all setup commands together (default 10m)")
	setup.Flags().StringArrayVar(&keyFiles, "key-file", nil, "a worktree file the setup's result depends on, e.g. go.sum (repeatable): with the same commands and contents, a runner reuses its last successful setup")
	setup.Flags().BoolVar(&clear, "clear", false, "remove the project's setup")
	setup.Flags().StringVar(&fromRepo, "from-repo", "", `a setup script of the repository, relative to its root, run after the commands ("" turns it off)`)
	setup.Flags().StringArrayVar(&approve, "approve", nil, "the SHA-256 of a version of the repository's setup script that runs with the project's secrets (repeatable)")
	setup.Flags().StringArrayVar(&approveFile, "approve-file", nil, "approve the version of the setup script in this local file (repeatable)")
	setup.Flags().StringArrayVar(&unapprove, "unapprove", nil, "take back the approval of this SHA-256 (repeatable)")

	caches := answerCmd(a, &cobra.Command{
		Use:   "caches PROJECT [NAME...|none] [--json]",
		Short: "Set a project's dependency caches, kept per runner (its owner or an admin)",
		Long: `Set the caches each runner keeps for the project between its attempts and
mounts read-write into its sandbox only: go (module and build caches), npm,
pip, cargo, or a directory name of your own (its path is in
$DROVER_CACHE_DIR/NAME). "none" removes them all.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) < 2 {
				return usagef("name the project and its caches (or none)")
			}
			return checkName("project", args[0])
		},
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.ProjectConfig, error) {
		names := args[1:]
		if len(names) == 1 && names[0] == netpolicy.None {
			names = []string{}
		}
		return c.SetProjectConfig(ctx, args[0], apitypes.ProjectConfigRequest{Caches: &names})
	}, text)
	return []*cobra.Command{show, network, setup, caches, a.secretsCmd()}
}

// secretsCmd is `projects secrets list|set|remove`.
func (a *app) secretsCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secrets list|set|remove",
		Short: "Manage the credentials a project's setup sends to its registries (its owner or an admin)",
		Long: `A project secret is a credential (a private registry's token) for one host.
During the project's setup the egress proxy adds it to requests sent to
$DROVER_SECRET_NAME_URL that carry the placeholder held in $DROVER_SECRET_NAME
(NAME in capitals); the sandbox, the job's log and every answer of the hub only
ever hold the placeholder. The host must be one the project's setup network
reaches. Only runners owned by the project's owner or an admin receive a job
whose setup brings a secret; a repository setup script (--from-repo) gets it
only in a version the owner approved (drover projects setup --approve), and
the proxy masks it in every answer of the upstream. The value (at least 8
characters) is read from stdin or --value-file, never from an argument, and
no command shows it again.`,
		Args: noArgs,
		RunE: showHelp,
	}
	text := func(w io.Writer, l apitypes.SecretList) error { return printSecrets(w, l) }
	args := func(names ...string) cobra.PositionalArgs { return projectArgs(protocol.CheckSecretName, names...) }
	var host, header, prefix, valueFile string
	set := answerCmd(a, &cobra.Command{
		Use:   "set PROJECT NAME --host HOST[:PORT]|URL [--header H] [--prefix P] [--value-file F] [--json]",
		Short: "Set a project secret, its value read from stdin or --value-file",
		Args:  args("PROJECT", "NAME"),
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.SecretList, error) {
		if host == "" {
			return apitypes.SecretList{}, usagef("name the host the secret is for: --host HOST[:PORT] (https) or a base URL")
		}
		value, err := a.readSecret("the secret's value", protocol.MaxSecretLen, valueFile)
		if err != nil {
			return apitypes.SecretList{}, err
		}
		return c.SetSecret(ctx, args[0], args[1], apitypes.SecretRequest{Host: host, Header: header, Prefix: prefix, Value: value})
	}, text)
	set.Flags().StringVar(&host, "host", "", "the host (https) or base URL the secret's requests go to")
	set.Flags().StringVar(&header, "header", "", `the header that carries the secret (default Authorization, with prefix "Bearer ")`)
	set.Flags().StringVar(&prefix, "prefix", "", "what comes before the secret in the header")
	set.Flags().StringVar(&valueFile, "value-file", "", `a file holding the value (default: stdin)`)
	cmd.AddCommand(answerCmd(a, &cobra.Command{
		Use:   "list PROJECT [--json]",
		Short: "List a project's secrets: names, hosts and dates, never values",
		Args:  args("PROJECT"),
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.SecretList, error) {
		return c.Secrets(ctx, args[0])
	}, text), set, answerCmd(a, &cobra.Command{
		Use:   "remove PROJECT NAME [--json]",
		Short: "Remove a project secret",
		Args:  args("PROJECT", "NAME"),
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.SecretList, error) {
		return c.RemoveSecret(ctx, args[0], args[1])
	}, text))
	return cmd
}

func printSecrets(w io.Writer, l apitypes.SecretList) error {
	if len(l.Secrets) == 0 {
		_, err := fprintf(w, "project %s has no secrets\n", l.Project)
		return err
	}
	t := newTable(w)
	fprintf(t, "SECRET\tUPSTREAM\tHEADER\tVARIABLES\tCREATED\tBY\n")
	for _, s := range l.Secrets {
		fprintf(t, "%s\t%s\t%s\t$%s, $%s\t%s\t%s\n", s.Name, s.Upstream, s.Header, s.KeyEnv, s.BaseURLEnv,
			s.CreatedAt.Local().Format(time.DateTime), s.CreatedBy)
	}
	return t.Flush()
}

func ptrTo[T any](v T) *T { return &v }

// splitList splits a comma-separated list, dropping empty items.
func splitList(s string) []string {
	out := []string{}
	for _, item := range strings.Split(s, ",") {
		if item = strings.TrimSpace(item); item != "" {
			out = append(out, item)
		}
	}
	return out
}

func printProjectConfig(w io.Writer, c apitypes.ProjectConfig) error {
	t := newTable(w)
	fprintf(t, "Project:\t%s\n", c.Project)
	fprintf(t, "Setup network:\t%s\n", netpolicy.Describe(c.SetupNetwork))
	fprintf(t, "Agent network:\t%s\n", netpolicy.Describe(c.AgentNetwork))
	if len(c.SetupCommands) == 0 && c.SetupFile == "" {
		fprintf(t, "Setup:\t-\n")
	} else {
		d := c.SetupTimeout.D()
		if d == 0 {
			d = protocol.DefaultSetupTimeout
		}
		fprintf(t, "Setup:\t%d command(s) within %s\n", len(c.SetupCommands), d)
		if len(c.SetupKeys) > 0 {
			fprintf(t, "\treused while unchanged: %s\n", strings.Join(c.SetupKeys, ","))
		}
		for _, cmd := range c.SetupCommands {
			fprintf(t, "\t$ %s\n", oneLine(cmd))
		}
		if c.SetupFile != "" {
			fprintf(t, "\t$ sh %s (from the repository)\n", c.SetupFile)
		}
		for _, h := range c.SetupApproved {
			fprintf(t, "\tapproved with secrets: sha256 %s\n", h)
		}
	}
	fprintf(t, "Caches:\t%s\n", dash(strings.Join(c.Caches, ",")))
	if c.Large {
		fprintf(t, "Clone:\tpartial (large: blobs fetched as checkouts need them)\n")
	}
	if len(c.Sparse) > 0 {
		fprintf(t, "Sparse:\t%s\n", strings.Join(c.Sparse, ","))
	}
	if c.Forge != "" {
		fprintf(t, "Forge:\t%s on forge %s\n", c.ForgeRepo, c.Forge)
		fprintf(t, "Publishes:\t%s\n", publishesBy(c))
	}
	if err := t.Flush(); err != nil {
		return err
	}
	if len(c.Policies) == 0 && !c.AllowOpen {
		_, err := fprintf(w, "\nThe hub's operator defines no network policies.\n")
		return err
	}
	fprintf(w, "\nPolicies of this hub:\n")
	t = newTable(w)
	names := make([]string, 0, len(c.Policies))
	for n := range c.Policies {
		names = append(names, n)
	}
	slices.Sort(names)
	for _, n := range names {
		fprintf(t, "  %s\t%s\n", n, strings.Join(c.Policies[n], " "))
	}
	if c.AllowOpen {
		fprintf(t, "  %s\t%s\n", netpolicy.Open, "every host (enabled by the operator)")
	}
	return t.Flush()
}
