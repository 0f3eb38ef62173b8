package cli

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"drover/internal/accounts"
	"drover/internal/agent/catalog"
	"drover/internal/agent/facts"
	"drover/internal/agent/native"
	"drover/internal/model"
	"drover/internal/protocol"
	"drover/internal/rules"
	"drover/internal/runner"
)

// runnerAccountCmd is `drover runner account`: the agent accounts a runner
// runs vendor CLIs under, kept in its home.
func (a *app) runnerAccountCmd() *cobra.Command {
	var home string
	cmd := &cobra.Command{
		Use:     "account add|list|remove|login|reset",
		Aliases: []string{"accounts"},
		Short:   "Manage the agent accounts (vendor logins, API keys) this runner's agents use",
		Long: `A runner runs claude, codex, gemini and opencode under accounts kept in its
home: a login account holds the CLI's own login (you log in once, with the
command 'account add' prints), an api-key account a key read from stdin,
stored 0600 and never shown. A runner takes the oldest account of an agent
that is ready, and sees accounts added while it runs. An account is ready
unless a rate limit holds it back (limited), its vendor login is missing or
expired (needs login: 'account login' prints how to log in), or its provider
refused it (needs attention: fix its key or login, then 'account reset').`,
		Args: noArgs,
		RunE: showHelp,
	}
	cmd.PersistentFlags().StringVar(&home, "home", "", "runner home (default $XDG_STATE_HOME/drover/runner)")
	open := func() (*accounts.Store, string, error) {
		h := home
		if h == "" {
			var err error
			if h, err = a.runnerHome(); err != nil {
				return nil, "", err
			}
		}
		if err := os.MkdirAll(h, 0o700); err != nil {
			return nil, "", fmt.Errorf("create runner home: %w", err)
		}
		s, err := accounts.Open(h)
		return s, h, err
	}
	cmd.AddCommand(a.accountAddCmd(open), a.accountListCmd(open), a.accountRemoveCmd(open),
		a.accountLoginCmd(open), a.accountResetCmd(open), a.accountLimitsCmd(open))
	return cmd
}

type openAccounts func() (*accounts.Store, string, error)

func (a *app) accountAddCmd(open openAccounts) *cobra.Command {
	var agentName, label, baseURL, provider, modelName string
	var keyStdin, noKey, noProbe bool
	cmd := &cobra.Command{
		Use: "add --agent AGENT [--label LABEL] [--api-key-stdin [--base-url URL]] [--home DIR]\n" +
			"  add --agent native --provider anthropic|openai|openai-compatible [--base-url URL] [--model M] (--api-key-stdin | --no-key) [--no-probe]",
		Short: "Add an account: a login (default) or an API key read from stdin",
		Long: `Add an account for AGENT (` + strings.Join(accounts.Agents(), ", ") + `).

Without --api-key-stdin it is a login account: drover creates its config
directory and prints the vendor CLI's own login command to run once, as the
runner's user, with that directory as the CLI's config home.

With --api-key-stdin the key is read from stdin (never from an argument or a
flag value, which every local user can see), trimmed, and stored in a 0600
file of its own. --base-url points it at another API root (a gateway);
plain http is accepted for loopback addresses only.

A native account is drover's own agent on a model API: --provider names
its protocol (anthropic: Messages; openai: Responses; openai-compatible:
Chat Completions, on a server such as Ollama, vLLM or llama.cpp, which
needs --base-url, e.g. http://127.0.0.1:11434/v1, and --model). Its key,
if any, stays with the runner; --no-key is for a local server that takes
none. Before it is added, its endpoint is probed with tiny requests (as
'drover runner doctor' does): how its model takes tool calls is recorded,
a base URL without /v1 that answers 404 is stored with /v1 when that
answers, and an endpoint that refuses the key, the model or the request is
not added. --no-probe skips that (the doctor probes it later).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if agentName == "" {
				return usagef("--agent is required: one of %s", strings.Join(accounts.Agents(), ", "))
			}
			if !slices.Contains(accounts.Agents(), agentName) {
				return usagef("--agent %q: want one of %s", agentName, strings.Join(accounts.Agents(), ", "))
			}
			if err := accounts.ValidLabel(label); err != nil {
				return usagef("--label: %v", err)
			}
			isNative := agentName == native.Name
			switch {
			case !isNative && (provider != "" || modelName != "" || noKey):
				return usagef("--provider, --model and --no-key are for native accounts (--agent native)")
			case isNative && !keyStdin && !noKey:
				return usagef("a native account needs --api-key-stdin or --no-key")
			case keyStdin && noKey:
				return usagef("--api-key-stdin and --no-key exclude each other")
			case baseURL != "" && !keyStdin && !noKey:
				return usagef("--base-url is for api-key accounts (--api-key-stdin)")
			}
			if isNative {
				u, err := rules.CheckBaseURL(baseURL)
				if err != nil {
					return fmt.Errorf("--base-url: %w", err)
				}
				baseURL = u
			} else if baseURL != "" {
				// Stored as the root every CLI of the agent builds on, so
				// that the list shows what the runner will use.
				ad, _ := catalog.Adapter(agentName)
				u, err := ad.Endpoint.NormalizeBaseURL(baseURL)
				if err != nil {
					return fmt.Errorf("--base-url: %w", err)
				}
				baseURL = u
			}
			acct := accounts.Account{Agent: agentName, Label: label, Kind: accounts.KindLogin, BaseURL: baseURL,
				Provider: provider, Model: modelName}
			var key string
			if noKey {
				acct.Kind = accounts.KindNoKey
			}
			if keyStdin {
				var err error
				if key, err = a.readAPIKey(); err != nil {
					return err
				}
				acct.Kind = accounts.KindAPIKey
			}
			var found *probed
			note := ""
			if isNative && !noProbe {
				var err error
				if found, note, err = probeToAdd(cmd.Context(), &acct, key); err != nil {
					return err
				}
			}
			s, _, err := open()
			if err != nil {
				return err
			}
			acct, err = s.Add(acct, key)
			if err != nil {
				return err
			}
			a.log.Debug("account added", "account", acct.String())
			out := a.env.Stdout
			if found != nil {
				if err := s.SetCapabilities(acct.ID, found.capabilities()); err != nil {
					return err
				}
			}
			if acct.Kind != accounts.KindLogin {
				_, err = fprintf(out, "added account %s; it is ready%s\n", acct, note)
				return err
			}
			login := loginCommand(acct.Agent, s.Dir(acct.ID))
			_, err = fprintf(out, "added account %s\nlog in to it once, as the user the runner runs as:\n\n  %s\n\n%s\n",
				acct, login.command, login.after)
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&agentName, "agent", "", "the agent: "+strings.Join(accounts.Agents(), ", ")+" (required)")
	f.StringVar(&label, "label", "", "a name for the account, unique per agent: letters, digits, '.', '_', '-'")
	f.BoolVar(&keyStdin, "api-key-stdin", false, "an api-key account: read the key from stdin")
	f.StringVar(&baseURL, "base-url", "", "with --api-key-stdin: the provider's API root (default: the vendor's)")
	f.StringVar(&provider, "provider", "", "native: the model API, one of "+strings.Join(model.Providers(), ", "))
	f.StringVar(&modelName, "model", "", "native: the model (default: the provider's, if it has one)")
	f.BoolVar(&noKey, "no-key", false, "native: the model server takes no key (a local one)")
	f.BoolVar(&noProbe, "no-probe", false, "native: add the account without probing its endpoint")
	return cmd
}

// probeToAdd probes the endpoint of a native account about to be added
// with key (acct is checked first, as Add would): its model's way with
// tool calls, and the base URL that answers (stored in acct). An endpoint
// that refuses the key, the model or the request is an error, and nothing
// is added; one that cannot be reached, or is limited or failing now, is
// added unprobed, and note says so.
func probeToAdd(ctx context.Context, acct *accounts.Account, key string) (*probed, string, error) {
	if err := accounts.Validate(acct, key); err != nil {
		return nil, "", fmt.Errorf("add account: %w", err)
	}
	tried := acct.BaseURL
	if tried == "" {
		tried = "the provider's API"
	}
	p, err := probeNative(ctx, *acct, key)
	var me *model.Error
	switch {
	case err == nil:
		note := "; its model " + p.Found.String()
		if p.BaseURL != acct.BaseURL {
			note = fmt.Sprintf("; %s answered 404 and %s answers, so it uses that", acct.BaseURL, p.BaseURL) + note
			acct.BaseURL = p.BaseURL
		}
		return &p, note, nil
	case errors.As(err, &me) && (me.Kind == model.KindTransport || me.Kind == model.KindLimited || me.Kind == model.KindUnavailable):
		return nil, fmt.Sprintf(" (unprobed: %v; 'drover runner doctor' probes it)", err), nil
	}
	return nil, "", fmt.Errorf("add account: the probe of %s failed, so it is not added: %w", tried, err)
}

// readAPIKey reads the key from stdin: one line typed or pasted into a
// terminal, else the whole input; surrounding whitespace is trimmed.
func (a *app) readAPIKey() (string, error) {
	return a.readSecret("the API key", accounts.MaxKeyLen, "")
}

// readSecret reads what (an API key, a secret's value) from file, or from
// stdin when file is "" or "-" (one pasted line on a terminal): never
// from an argument, so it is in no process listing or shell history.
func (a *app) readSecret(what string, maxLen int, file string) (string, error) {
	var b []byte
	var err error
	from := "stdin"
	if file != "" && file != "-" {
		from = file
		var f *os.File
		if f, err = os.Open(file); err == nil {
			b, err = io.ReadAll(io.LimitReader(f, int64(maxLen)+2))
			f.Close()
		}
	} else if f, ok := a.env.Stdin.(*os.File); ok && isTerminal(f) {
		fprintf(a.env.Stderr, "Paste %s, then Enter: ", what)
		var line string
		line, err = bufio.NewReader(io.LimitReader(f, int64(maxLen)+1)).ReadString('\n')
		if errors.Is(err, io.EOF) {
			err = nil
		}
		b = []byte(line)
	} else if a.env.Stdin != nil {
		b, err = io.ReadAll(io.LimitReader(a.env.Stdin, int64(maxLen)+2))
	}
	if err != nil {
		return "", fmt.Errorf("read %s from %s: %w", what, from, err)
	}
	key := strings.TrimSpace(string(b))
	switch {
	case key == "":
		return "", fmt.Errorf("read %s from %s: it is empty", what, from)
	case len(key) > maxLen:
		return "", fmt.Errorf("read %s from %s: longer than %d bytes", what, from, maxLen)
	}
	return key, nil
}

// loginHelp is how an operator logs a login account in: the vendor CLI's
// own login, with the account's directory where the agent's adapter puts
// it (facts.Login).
type loginHelp struct {
	command string
	after   string
}

func loginCommand(agentName, dir string) loginHelp {
	l := facts.Of(agentName).Login
	if l.Command == "" {
		return loginHelp{"(no known login command for " + agentName + ")", ""}
	}
	if l.Sub != "" {
		dir = filepath.Join(dir, l.Sub)
	}
	return loginHelp{l.Env + "=" + shellQuote([]string{dir}) + " " + l.Command,
		l.After + " The account is ready after that; running runners pick it up without a restart."}
}

// accountView is an account as list --json prints it.
type accountView struct {
	accounts.Account
	State string `json:"state"`         // ready, limited, needs login or needs attention
	Why   string `json:"why,omitempty"` // what is wrong when it is not ready
	Fix   string `json:"fix,omitempty"` // the command that makes it ready again
}

func (a *app) accountListCmd(open openAccounts) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list [--json] [--home DIR]",
		Short: "List the runner's accounts, whether they are ready and how a native one's model takes tool calls; never keys",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, home, err := open()
			if err != nil {
				return err
			}
			as, err := s.List()
			if err != nil {
				return err
			}
			now := time.Now()
			if asJSON {
				vs := make([]accountView, 0, len(as))
				for _, acct := range as {
					st, why, fix := runner.AccountState(catalog.LoggedIn, acct, s.Dir(acct.ID), now)
					vs = append(vs, accountView{acct, st, why, fix})
				}
				return printJSON(a.env.Stdout, vs)
			}
			if len(as) == 0 {
				_, err := fprintf(a.env.Stdout, "no accounts in %s; add one with 'drover runner account add --agent AGENT'\n", home)
				return err
			}
			tw := newTable(a.env.Stdout)
			fprintf(tw, "ID\tAGENT\tLABEL\tKIND\tSTATE\tBASE URL\tTOOL CALLS\n")
			for _, acct := range as {
				mode := "-"
				if acct.Agent == native.Name {
					mode = toolMode(acct.Capabilities)
				}
				fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", acct.ID, acct.Agent, dash(acct.Label), acct.Kind,
					accountState(acct, s.Dir(acct.ID), now), dash(acct.BaseURL), mode)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			for _, acct := range as {
				if st, why, fix := runner.AccountState(catalog.LoggedIn, acct, s.Dir(acct.ID), now); fix != "" {
					fprintf(a.env.Stdout, "%s %s: %s\n  fix: %s\n", acct.ID, st, why, fix)
				}
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the accounts as JSON")
	return cmd
}

// accountState is "ready", "needs login", "needs attention", or "limited
// until T: message".
func accountState(acct accounts.Account, dir string, now time.Time) string {
	st, _, _ := runner.AccountState(catalog.LoggedIn, acct, dir, now)
	if st != protocol.AccountLimited {
		return st
	}
	s := "limited until " + acct.LimitedUntil.Local().Format("2006-01-02 15:04:05")
	if acct.LimitMessage != "" {
		s += ": " + acct.LimitMessage
	}
	return s
}

func (a *app) accountRemoveCmd(open openAccounts) *cobra.Command {
	return &cobra.Command{
		Use:   "remove ID|LABEL [--home DIR]",
		Short: "Remove an account with its key and its CLI's login and sessions",
		Args:  exactArgs("ID|LABEL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, _, err := open()
			if err != nil {
				return err
			}
			acct, err := s.Remove(args[0])
			if err != nil {
				return err
			}
			_, err = fprintf(a.env.Stdout, "removed account %s\n", acct)
			return err
		},
	}
}

func (a *app) accountLoginCmd(open openAccounts) *cobra.Command {
	return &cobra.Command{
		Use:   "login ID|LABEL [--home DIR]",
		Short: "Print the vendor CLI's login command for a login account, and whether it is logged in",
		Args:  exactArgs("ID|LABEL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			s, _, err := open()
			if err != nil {
				return err
			}
			acct, err := s.Find(args[0])
			if err != nil {
				return err
			}
			if acct.Kind != accounts.KindLogin {
				return fmt.Errorf("account %s has an API key, no login: replace the key with 'drover runner account reset %s --api-key-stdin'", acct, acct.ID)
			}
			st, why, _ := runner.AccountState(catalog.LoggedIn, acct, s.Dir(acct.ID), time.Now())
			if why == "" {
				why = "logged in"
			}
			login := loginCommand(acct.Agent, s.Dir(acct.ID))
			_, err = fprintf(a.env.Stdout, "account %s: %s (%s)\nto log in, as the user the runner runs as:\n\n  %s\n\n%s\n",
				acct, st, why, login.command, login.after)
			return err
		},
	}
}

func (a *app) accountResetCmd(open openAccounts) *cobra.Command {
	var keyStdin bool
	cmd := &cobra.Command{
		Use:   "reset ID|LABEL [--api-key-stdin] [--home DIR]",
		Short: "Make an account ready again after its owner fixed it: clear its limit and its need of attention",
		Long: `Clear an account's rate limit and the mark its provider's refusal
(auth_failed) left, so that runners use it again. With --api-key-stdin the
api-key account's key is replaced by the one read from stdin first. A login
account's login is its CLI's: log in again ('drover runner account login')
before resetting it.`,
		Args: exactArgs("ID|LABEL"),
		RunE: func(cmd *cobra.Command, args []string) error {
			var key string
			if keyStdin {
				var err error
				if key, err = a.readAPIKey(); err != nil {
					return err
				}
			}
			s, _, err := open()
			if err != nil {
				return err
			}
			acct, err := s.Reset(args[0], key)
			if err != nil {
				return err
			}
			st, why, fix := runner.AccountState(catalog.LoggedIn, acct, s.Dir(acct.ID), time.Now())
			if fix != "" {
				_, err = fprintf(a.env.Stdout, "reset account %s; it still %s (%s): %s\n", acct, st, why, fix)
				return err
			}
			_, err = fprintf(a.env.Stdout, "reset account %s; it is %s\n", acct, st)
			return err
		},
	}
	cmd.Flags().BoolVar(&keyStdin, "api-key-stdin", false, "replace the api-key account's key with one read from stdin")
	return cmd
}
