// Package cli is the drover command line: cobra commands over the hub's HTTP
// API (internal/client) and the hub and runner packages. Each invocation
// builds its own command tree, so nothing is shared between runs.
package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"drover/internal/client"
)

// Env is what a command may touch of its process; tests substitute it.
type Env struct {
	Stdin  io.Reader
	Stdout io.Writer
	Stderr io.Writer
	Getenv func(string) string
}

// Main runs drover with the process's arguments and returns its exit code.
func Main() int {
	return Run(context.Background(), os.Args[1:], Env{Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr, Getenv: os.Getenv})
}

// Run runs one drover command line and returns its exit code: 0 on success,
// 2 for a usage error, the job's code for `run --wait`, 1 otherwise.
func Run(ctx context.Context, args []string, env Env) int {
	a := newApp(env)
	root := a.newRoot()
	root.SetArgs(args)
	cmd, err := root.ExecuteContextC(ctx)
	return a.exit(cmd, err)
}

// app holds one invocation's streams, global flags and logger.
type app struct {
	env       Env
	hubFlag   string // --hub
	tokenFile string // --token-file
	logLevel  string // --log-level
	level     *slog.LevelVar
	log       *slog.Logger
}

func newApp(env Env) *app {
	if env.Getenv == nil {
		env.Getenv = func(string) string { return "" }
	}
	lv := new(slog.LevelVar)
	return &app{env: env, level: lv, log: slog.New(slog.NewTextHandler(env.Stderr, &slog.HandlerOptions{Level: lv}))}
}

const rootLong = `drover queues jobs on a hub; runners on other machines dial out to it,
claim jobs and run agents. A job is never lost and never run twice.

Client settings, first found wins:
  hub URL: --hub, $DROVER_HUB, the saved login (drover login), ` + defaultHub + `
  token:   --token-file (a path, "-" for stdin), $DROVER_TOKEN, the saved login
           (used only with the hub it was saved for); with no token and the default
           local hub URL, the admin.token in the default hub data directory, so a
           single machine needs no login at all.
Tokens are never accepted as flag values: argv is visible to every local user.`

func (a *app) newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "drover",
		Short:         "Queue jobs on a hub and run them on runners that dial in",
		Long:          rootLong,
		SilenceErrors: true,
		SilenceUsage:  true,
		Args:          noArgs,
		RunE:          showHelp,
		Version:       droverVersion(),
		PersistentPreRunE: func(*cobra.Command, []string) error {
			if err := a.level.UnmarshalText([]byte(a.logLevel)); err != nil {
				return usagef("--log-level %q: want debug, info, warn or error", a.logLevel)
			}
			return nil
		},
	}
	root.SetIn(a.env.Stdin)
	root.SetOut(a.env.Stdout)
	root.SetErr(a.env.Stderr)
	root.SetVersionTemplate("{{.Version}}")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err.Error()} })
	pf := root.PersistentFlags()
	pf.StringVar(&a.hubFlag, "hub", "", "hub URL (default: $DROVER_HUB, the saved login, "+defaultHub+")")
	pf.StringVar(&a.tokenFile, "token-file", "", `file holding the API token ("-": stdin)`)
	pf.StringVar(&a.logLevel, "log-level", "info", "log level on stderr: debug, info, warn, error")

	root.AddCommand(
		a.loginCmd(), a.whoamiCmd(), a.usersCmd(),
		a.runnerCmd(), a.runnersCmd(), a.hubsCmd(), a.accountsCmd(), a.fleetCmd(),
		a.runCmd(), a.jobsCmd(), a.showCmd(), a.logsCmd(), a.cancelCmd(), a.retryCmd(),
		a.questionsCmd(), a.answerJobCmd(), a.approveCmd(), a.restartCmd(),
		a.fetchCmd(), a.diffCmd(), a.publishCmd(), a.projectsCmd(), a.forgesCmd(),
		a.pipelineCmd(), a.pipelinesCmd(),
		a.evalCmd(),
		a.webhooksCmd(),
		a.signinCmd(),
		a.compareCmd(), a.pickCmd(),
		a.sandboxInitCmd(), a.toolCmd(), a.versionCmd(),
	)
	root.AddCommand(a.hubRoleCmds()...)
	return root
}

// usageError is a command line drover cannot make sense of (exit 2).
type usageError struct{ msg string }

func (e usageError) Error() string { return e.msg }

func usagef(format string, args ...any) error { return usageError{fmt.Sprintf(format, args...)} }

// exitCode ends drover with a code after the command already said why.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit status %d", int(e)) }

// exit reports err on stderr as one line and returns the exit code.
func (a *app) exit(cmd *cobra.Command, err error) int {
	if err == nil {
		return 0
	}
	var code exitCode
	if errors.As(err, &code) {
		return int(code)
	}
	var ue usageError
	if errors.As(err, &ue) {
		help := "drover --help"
		if cmd != nil {
			help = cmd.CommandPath() + " --help"
		}
		fprintf(a.env.Stderr, "drover: %v (see '%s')\n", err, help)
		return 2
	}
	if errors.Is(err, context.Canceled) {
		err = errors.New("interrupted") // by a signal: the only canceller of a command's context
	}
	// A message may quote another program (git's stderr) over several
	// lines: those after the first are indented, each line made safe.
	lines := strings.Split(strings.TrimRight(err.Error(), "\n"), "\n")
	fprintf(a.env.Stderr, "drover: %s\n", lines[0])
	for _, l := range lines[1:] {
		fprintf(a.env.Stderr, "  %s\n", l)
	}
	return 1
}

// noArgs refuses arguments; on a command with subcommands an argument is an
// unknown subcommand (cobra would otherwise print help and succeed).
func noArgs(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	if cmd.HasSubCommands() {
		return usagef("unknown command %q for %q", args[0], cmd.CommandPath())
	}
	return usagef("unexpected argument %q", args[0])
}

// exactArgs wants one argument per name.
func exactArgs(names ...string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != len(names) {
			return usagef("want %s, got %d argument(s)", strings.Join(names, " "), len(args))
		}
		return nil
	}
}

func showHelp(cmd *cobra.Command, _ []string) error { return cmd.Help() }

// signalContext is cancelled by the first SIGINT or SIGTERM, which asks a
// daemon (hub, runner, up) for a graceful stop, logged; a second signal exits
// at once, for when that stop hangs.
func (a *app) signalContext(parent context.Context) (context.Context, func()) {
	return a.onSignal(parent, true)
}

// interruptContext is signalContext for a client command (run --wait, logs
// -f, demo): a Ctrl-C ends it with its own words, not a daemon's log line.
func (a *app) interruptContext(parent context.Context) (context.Context, func()) {
	return a.onSignal(parent, false)
}

func (a *app) onSignal(parent context.Context, logged bool) (context.Context, func()) {
	ctx, cancel := context.WithCancel(parent)
	ch := make(chan os.Signal, 2)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		select {
		case s := <-ch:
			if logged {
				a.log.Info("stopping; signal again to exit at once", "signal", s.String())
			}
			cancel()
		case <-done:
			return
		}
		select {
		case <-ch:
			fprintf(a.env.Stderr, "drover: second signal, exiting at once\n")
			os.Exit(1)
		case <-done:
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		close(done)
		cancel()
	}
}

// answerCmd completes cmd as a command that asks the hub one thing and
// prints the answer: as the protocol's JSON with --json, else with text.
func answerCmd[T any](a *app, cmd *cobra.Command, ask func(context.Context, *client.Client, []string) (T, error),
	text func(io.Writer, T) error) *cobra.Command {
	var asJSON bool
	cmd.RunE = func(cmd *cobra.Command, args []string) error {
		c, err := a.client(cmd.Context())
		if err != nil {
			return err
		}
		v, err := ask(cmd.Context(), c, args)
		if err != nil {
			return err
		}
		if asJSON {
			return printJSON(a.env.Stdout, v)
		}
		return text(a.env.Stdout, v)
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the answer as JSON")
	return cmd
}

// printJSON prints v as indented JSON: the protocol types as they are, so
// field names stay stable for scripts, with the characters a terminal may
// act on escaped (jsonSafe).
func printJSON(w io.Writer, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return fmt.Errorf("encode JSON: %w", err)
	}
	_, err = fmt.Fprintf(w, "%s\n", jsonSafe(b))
	return err
}

func newTable(w io.Writer) *tabwriter.Writer { return tabwriter.NewWriter(w, 0, 4, 2, ' ', 0) }
