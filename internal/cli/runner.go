package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"drover/internal/agent/catalog"
	"drover/internal/apitypes"
	"drover/internal/auth"
	"drover/internal/client"
	"drover/internal/rules"
	"drover/internal/runner"
	"drover/internal/workspace"
)

func (a *app) runnerCmd() *cobra.Command {
	var home, labels, regFile string
	var stdio bool
	var slots int
	var minFree, cacheSize, projectCacheSize int64
	var models []string
	var sb sandboxOptions
	var lf lifecycleFlags
	cmd := &cobra.Command{
		Use:   "runner [--hub URL[,URL...]] [--home DIR] [--slots N] [--min-free BYTES] [--cache-size BYTES] [--project-cache-size BYTES] [--labels k=v,...] [--sandbox KIND [--images PATTERN,...]] [--agent-model AGENT=MODEL]... [--max-jobs N] [--idle-timeout D] [--drain]",
		Short: "Run a runner: dial the hub, claim jobs and run them",
		Long: `Run a runner logged in with 'drover runner login' until SIGINT or SIGTERM,
then stop gracefully: agents get a grace period, their output reaches the hub
and unfinished attempts go back to the queue. A second signal exits at once.
--hub overrides the hub URL saved at login; it may list several hubs of one
deployment (on one database), URL1,URL2,...: the runner starts at a random
one and, when its connection fails or that hub goes away, reconnects to the
next with the usual backoff. The home defaults to
$XDG_STATE_HOME/drover/runner (or ~/.local/state/drover/runner).

While the home's file system has less than --min-free bytes free (default
256 MiB) the runner takes no jobs and 'drover runners' says why; it takes
them again once space returns. An attempt whose output the runner cannot
write fails with reason runner_disk_full.

--cache-size is the most bytes the runner's pooled and kept worktrees and
its clones' objects may take (0, the default: no budget). Past it the
runner's periodic collection first deletes the clones' unreferenced objects
(older than an hour), then removes pooled worktrees, least recently used
first, and logs what it freed; a worktree kept for a job or in use is never
removed for it.
--project-cache-size does the same for the projects' dependency caches
(HOME/caches): past it whole projects' caches go, least recently used first,
never those of a project the runner is running a job of.

Vendor agent CLIs (claude, codex, opencode, gemini) are found on PATH and run
under the runner's accounts ('drover runner account add'). The vendors' own
endpoint variables in the runner's environment (ANTHROPIC_BASE_URL for
claude, OPENAI_BASE_URL for codex and opencode, GOOGLE_GEMINI_BASE_URL for
gemini) send API-key accounts without a base URL of their own to a gateway
or a local model; the sandbox's egress rules follow. --agent-model picks the
model per agent (a custom endpoint for opencode needs one).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if slots < 1 {
				return usagef("--slots must be at least 1")
			}
			if cacheSize < 0 || projectCacheSize < 0 {
				return usagef("--cache-size and --project-cache-size must not be negative")
			}
			if err := sb.check(); err != nil {
				return err
			}
			lm, err := parseLabelList(labels)
			if err != nil {
				return err
			}
			cfg := runner.Config{Home: home, Slots: slots, Labels: lm, Logger: a.log, Sandbox: sb.policy(), Images: sb.images, MinFree: minFree, CacheSize: cacheSize,
				ProjectCacheSize: projectCacheSize,
				RemoteGitEnv:     workspace.OwnCredentialEnv(a.env.Getenv)}
			ac := catalog.Config{Path: a.env.Getenv("PATH"), Env: map[string]string{}, Models: map[string]string{}}
			if err := lf.apply(&cfg); err != nil {
				return err
			}
			for _, ad := range catalog.Adapters() {
				if v := a.env.Getenv(ad.Endpoint.UpstreamEnv); v != "" {
					if _, err := ad.Endpoint.NormalizeBaseURL(v); err != nil {
						return usagef("%s in the environment (for %s): %v", ad.Endpoint.UpstreamEnv, ad.Name, err)
					}
					ac.Env[ad.Endpoint.UpstreamEnv] = v
				}
			}
			for _, m := range models {
				name, model, ok := strings.Cut(m, "=")
				if !ok || name == "" || model == "" {
					return usagef("--agent-model %q: want AGENT=MODEL", m)
				}
				ac.Models[name] = model
			}
			// The runner's command composes its agents' code; the runner
			// itself knows them only as runner.Agents.
			if cfg.Agents, err = catalog.New(ac); err != nil {
				return fmt.Errorf("start runner: %w", err)
			}
			if cfg.Home == "" {
				if cfg.Home, err = a.runnerHome(); err != nil {
					return err
				}
			}
			if a.hubFlag != "" {
				if cfg.Hubs, err = rules.HubURLs(a.hubFlag); err != nil {
					return usagef("--hub: %v", err)
				}
			}
			ctx, stop := a.signalContext(cmd.Context())
			defer stop()
			ctx, done, err := a.fleetRunner(ctx, stdio, regFile, &cfg)
			defer done()
			if err != nil {
				return err
			}
			r, err := runner.New(cfg)
			if err != nil {
				return fmt.Errorf("start runner: %w", err)
			}
			return a.runnerEnded(r.Run(ctx))
		},
	}
	cmd.Flags().StringVar(&home, "home", "", "runner home (login, journal, work directories)")
	cmd.Flags().BoolVar(&stdio, "stdio", false, "speak to the hub through a tunnel over stdin/stdout (what the ssh fleet target runs)")
	cmd.Flags().StringVar(&regFile, "registration-token-file", "", "register with the fleet launch's single-use token in this 0600 file (or $"+registrationTokenEnv+") when the home has no login")
	cmd.Flags().IntVar(&slots, "slots", 1, "jobs to run at once")
	cmd.Flags().StringVar(&labels, "labels", "", "labels jobs can select, k=v,k2=v2")
	cmd.Flags().StringArrayVar(&models, "agent-model", nil, "model of a vendor agent, AGENT=MODEL (repeatable)")
	addMinFreeFlag(cmd, &minFree)
	cmd.Flags().Int64Var(&cacheSize, "cache-size", 0, "bytes the pooled and kept worktrees and the clones' objects may take: past it unreferenced objects go, then pooled worktrees, least recently used first (0: no budget)")
	cmd.Flags().Int64Var(&projectCacheSize, "project-cache-size", 0, "bytes the projects' dependency caches may take together: past it the least recently used projects' caches go, never one in use (0: no budget)")
	sb.addFlags(cmd)
	lf.add(cmd)
	cmd.AddCommand(a.runnerLoginCmd(), a.runnerApproveCmd(), a.withAgentChecks(a.runnerDoctorCmd()),
		a.runnerAccountCmd(), a.runnerServiceCmd())
	return cmd
}

func (a *app) runnerLoginCmd() *cobra.Command {
	var name, home string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "login --hub URL --name NAME [--home DIR] [--timeout D]",
		Short: "Log this machine's runner in; a user approves it with the printed code",
		Long: `Make a runner token on this machine (it never leaves it), check that URL is
a drover hub, print an approval link that carries only the token's hash, and
wait (up to --timeout) until a user approves it, on the hub's page at that
link or with 'drover runner approve LINK'. The login is saved under the
runner home, with the name the hub approved.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !runner.ValidName(name) {
				return usagef("runner name %q: want 1 to 64 letters, digits, '.', '_' or '-', starting with a letter or digit", name)
			}
			hub, err := a.hubURL(a.savedConfig())
			if err != nil {
				return err
			}
			if home == "" {
				if home, err = a.runnerHome(); err != nil {
					return err
				}
			}
			if err := os.MkdirAll(home, 0o700); err != nil {
				return fmt.Errorf("create runner home: %w", err)
			}
			ctx, stop := a.signalContext(cmd.Context())
			defer stop()
			o := runner.LoginOptions{Hub: hub, Name: name, Home: home, Out: a.env.Stdout, Timeout: timeout}
			if err := runner.LoginFlow(ctx, o); err != nil {
				return fmt.Errorf("runner login: %w", err)
			}
			fprintf(a.env.Stdout, "start it with: drover runner --home %s\n", home)
			return nil
		},
	}
	cmd.Flags().StringVar(&name, "name", "", "runner name, unique on the hub (required)")
	cmd.Flags().StringVar(&home, "home", "", "runner home (default $XDG_STATE_HOME/drover/runner)")
	cmd.Flags().DurationVar(&timeout, "timeout", runner.DefaultLoginTimeout, "how long to wait for approval")
	return cmd
}

// savedConfig is client.json, or nothing when it cannot be read: a runner
// login only borrows the hub URL from it.
func (a *app) savedConfig() clientConfig {
	p, err := a.configPath()
	if err != nil {
		return clientConfig{}
	}
	c, err := loadConfig(p)
	if err != nil {
		a.log.Warn("ignoring the client config", "err", err)
	}
	return c
}

func (a *app) runnerApproveCmd() *cobra.Command {
	var replace bool
	cmd := &cobra.Command{
		Use:   "approve [--replace] CODE",
		Short: "Approve a runner login; CODE is the link or NAME:KEY it printed",
		Long: `Approve a runner login: the runner becomes yours, under the name in CODE
(the runner takes the name the hub approved). Approve only links you made
yourself: approving connects that machine as a runner of yours.

A name already used by another of your runners is refused unless --replace:
that revokes the old runner's token and disconnects it.`,
		Args: exactArgs("CODE"),
		RunE: func(cmd *cobra.Command, args []string) error {
			req, err := parseApproveCode(args[0])
			if err != nil {
				return err
			}
			req.Replace = replace
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			v, err := c.ApproveRunner(cmd.Context(), req)
			if err != nil {
				return err
			}
			if v.Replaced {
				fprintf(a.env.Stdout, "revoked the old runner %s's token and disconnected it\n", v.Name)
			}
			_, err = fprintf(a.env.Stdout, "approved runner %s (owner %s)\n", v.Name, v.Owner)
			return err
		},
	}
	cmd.Flags().BoolVar(&replace, "replace", false, "give the name to this login even if another runner of yours has it (revokes that runner's token)")
	return cmd
}

// parseApproveCode reads what `drover runner login` prints: the link
// URL/approve?name=N&key=K, or NAME:KEY. KEY is the SHA-256 of the runner's
// token, never the token.
func parseApproveCode(code string) (apitypes.ApproveRequest, error) {
	code = strings.Trim(strings.TrimSpace(code), `'"`) // as pasted from the login's quoted command
	var req apitypes.ApproveRequest
	if strings.Contains(code, "://") {
		u, err := url.Parse(code)
		if err != nil {
			return req, usagef("approval link %q: %v", code, err)
		}
		q := u.Query()
		req.Name, req.Key = q.Get("name"), q.Get("key")
	} else if i := strings.LastIndexByte(code, ':'); i >= 0 {
		req.Name, req.Key = code[:i], code[i+1:]
	}
	req.Key = strings.ToLower(req.Key)
	if req.Name == "" || !auth.ValidHash(req.Key) {
		return req, usagef("approval code %q: want the link URL/approve?name=NAME&key=KEY or NAME:KEY, KEY being 64 hex digits", code)
	}
	return req, nil
}

func (a *app) runnersCmd() *cobra.Command {
	list := func(ctx context.Context, c *client.Client, _ []string) (apitypes.RunnerList, error) {
		return c.Runners(ctx)
	}
	text := func(w io.Writer, l apitypes.RunnerList) error { return printRunners(w, l.Runners, time.Now()) }
	cmd := answerCmd(a, &cobra.Command{
		Use:   "runners [--json]",
		Short: "List the runners you own or may use, whom they run jobs for (same as 'runners list')",
		Args:  noArgs,
	}, list, text)
	cmd.AddCommand(answerCmd(a, &cobra.Command{
		Use:   "list [--json]",
		Short: "List the runners you own or may use (an admin: all), whom they run jobs for",
		Args:  noArgs,
	}, list, text), answerCmd(a, &cobra.Command{
		Use:   "revoke NAME [--json]",
		Short: "Revoke a runner's token; the hub disconnects it",
		Args:  exactArgs("NAME"),
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.RunnerView, error) {
		return c.RevokeRunner(ctx, args[0])
	}, func(w io.Writer, v apitypes.RunnerView) error {
		_, err := fprintf(w, "revoked runner %s\n", v.Name)
		return err
	}), a.runnerShareCmd("share"), a.runnerShareCmd("unshare"), a.runnerAnswerCmd(true), a.runnerAnswerCmd(false))
	return cmd
}

// runnerNameThen wants one argument, a runner's name, then checks flags.
func runnerNameThen(flags func(*cobra.Command) error) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := exactArgs("NAME")(cmd, args); err != nil {
			return err
		}
		if err := checkName("runner", args[0]); err != nil {
			return err
		}
		return flags(cmd)
	}
}

// runnerAnswerCmd is `runners accept` or `runners decline`.
func (a *app) runnerAnswerCmd(accept bool) *cobra.Command {
	var project string
	action, short, long := "accept", "Accept a share of another's runner with you (or, --project, with a project you own)",
		`Accept a share of another user's runner: from then on it may run your jobs
(with --project, the jobs of that project's members; its owner or an admin
only). A shared runner runs nothing until its recipient accepts: whoever runs
a job reads its repository and reports its result. 'drover runners' lists the
shares that wait for you. Your own runners still come first for your jobs.`
	if !accept {
		action, short, long = "decline", "Decline a share of another's runner with you (or, --project, with a project you own)",
			`Decline a share of another user's runner, pending or accepted: it is
removed, and the runner runs none of your jobs (with --project, of that
project's members) unless its owner shares it again and you accept.`
	}
	cmd := answerCmd(a, &cobra.Command{
		Use:   action + " NAME [--project PROJECT] [--json]",
		Short: short,
		Long:  long,
		Args: runnerNameThen(func(cmd *cobra.Command) error {
			if cmd.Flags().Changed("project") {
				return checkName("project", project)
			}
			return nil
		}),
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.RunnerView, error) {
		req := apitypes.AnswerShareRequest{Project: project}
		if accept {
			return c.AcceptShare(ctx, args[0], req)
		}
		return c.DeclineShare(ctx, args[0], req)
	}, func(w io.Writer, v apitypes.RunnerView) error {
		whom := "you"
		if project != "" {
			whom = "project " + project
		}
		done := "accepted"
		if !accept {
			done = "declined"
		}
		_, err := fprintf(w, "%s the share of runner %s with %s\n", done, v.Name, whom)
		return err
	})
	cmd.Flags().StringVar(&project, "project", "", "the project (you own) the runner is shared with")
	return cmd
}

// runnerShareCmd is `runners share` or `runners unshare`.
func (a *app) runnerShareCmd(action string) *cobra.Command {
	var sf shareFlags
	short, long := "Let a user, or the members of a project, run jobs on your runner; --hub-wide: everyone (admin only)",
		`Share a runner you own: with --user, that user's jobs may run on it; with
--project, the jobs on that project of its members; with --hub-wide (admin
only), everyone's jobs. Exactly one of them. A runner is private to its owner
until it is shared.`
	if action == "unshare" {
		short, long = "Take a share of your runner back; --hub-wide makes a hub-wide runner private again",
			`Take back what 'drover runners share' gave: exactly one of --user, --project
and --hub-wide (admin only), which makes the runner private again.`
	}
	cmd := answerCmd(a, &cobra.Command{
		Use:   action + " NAME --user USER | --project PROJECT | --hub-wide [--json]",
		Short: short,
		Long:  long,
		Args:  runnerNameThen(sf.check),
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.RunnerView, error) {
		req := apitypes.ShareRequest{User: sf.user, Project: sf.project, Hub: sf.hub}
		if action == "unshare" {
			return c.UnshareRunner(ctx, args[0], req)
		}
		return c.ShareRunner(ctx, args[0], req)
	}, func(w io.Writer, v apitypes.RunnerView) error {
		_, err := fprintf(w, "runner %s access: %s\n", v.Name, formatAccess(v))
		return err
	})
	sf.addFlags(cmd, true)
	return cmd
}

// shareFlags name whom a runner or an account is shared with: exactly one
// of --user, --project and (runners only) --hub-wide. (--hub is the hub's
// URL everywhere.)
type shareFlags struct {
	user, project string
	hub           bool
	withHub       bool
}

func (f *shareFlags) addFlags(cmd *cobra.Command, withHub bool) {
	f.withHub = withHub
	cmd.Flags().StringVar(&f.user, "user", "", "the user to share with")
	cmd.Flags().StringVar(&f.project, "project", "", "the project whose members to share with")
	if withHub {
		cmd.Flags().BoolVar(&f.hub, "hub-wide", false, "everyone on the hub (admin only)")
	}
}

// check wants exactly one of the flags, with a name that can be one.
func (f *shareFlags) check(cmd *cobra.Command) error {
	names := []string{"user", "project"}
	want := "--user USER or --project PROJECT"
	if f.withHub {
		names, want = append(names, "hub-wide"), "--user USER, --project PROJECT or --hub-wide"
	}
	n := 0
	for _, name := range names {
		if cmd.Flags().Changed(name) {
			n++
		}
	}
	switch {
	case n != 1:
		return usagef("want exactly one of %s", want)
	case cmd.Flags().Changed("user"):
		return checkName("user", f.user)
	case cmd.Flags().Changed("project"):
		return checkName("project", f.project)
	case !f.hub:
		return usagef("--hub-wide=false shares with nobody: want exactly one of %s", want)
	}
	return nil
}

// addMinFreeFlag adds --min-free, the runner's free-space floor.
func addMinFreeFlag(cmd *cobra.Command, v *int64) {
	cmd.Flags().Int64Var(v, "min-free", runner.DefaultMinFree,
		"free bytes the runner's home must keep: below it the runner takes no jobs until space returns (0: no floor)")
}

// exitRunnerEnded is drover runner's exit code when the hub ended the
// runner (refused its hello, revoked or replaced it): the service unit
// tells systemd not to restart it (RestartPreventExitStatus).
const exitRunnerEnded = 3

// runnerEnded is what drover runner returns for Run's error: nil for a
// graceful stop, exit 3 with the reason when the hub ended the runner.
func (a *app) runnerEnded(err error) error {
	switch {
	case err == nil || errors.Is(err, context.Canceled):
		return nil
	case errors.Is(err, runner.ErrEnded):
		fprintf(a.env.Stderr, "drover: runner: %s\n", err)
		return exitCode(exitRunnerEnded)
	}
	return fmt.Errorf("runner: %w", err)
}
