package cli

import (
	"context"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"drover/internal/apitypes"
	"drover/internal/client"
	"drover/internal/protocol"
)

// accountsCmd shows and orders the caller's agent accounts as the hub knows
// them, across all their runners. (`drover runner account` manages the
// accounts of the runner on this machine.)
func (a *app) accountsCmd() *cobra.Command {
	list := func(ctx context.Context, c *client.Client, _ []string) (apitypes.AccountList, error) {
		return c.Accounts(ctx)
	}
	text := func(w io.Writer, l apitypes.AccountList) error { return printAccounts(w, l.Accounts) }
	const long = `List your agent accounts across all your runners, in your order of
preference: a job of a vendor agent (claude, codex, opencode, gemini) that
runs on one of your runners gets your best account there that is ready.
Runners report their accounts when they connect and when they change (add
them with 'drover runner account add' on the runner's machine). The
accounts others shared with you follow yours (POSITION is then their
place in their owner's order); SHARED says whom you shared yours with.`
	cmd := answerCmd(a, &cobra.Command{
		Use:   "accounts [--json]",
		Short: "List your agent accounts in order of preference (same as 'accounts list')",
		Long:  long,
		Args:  noArgs,
	}, list, text)
	cmd.AddCommand(answerCmd(a, &cobra.Command{
		Use:   "list [--json]",
		Short: "List your agent accounts in order of preference",
		Long:  long,
		Args:  noArgs,
	}, list, text), answerCmd(a, &cobra.Command{
		Use:   "move RUNNER ACCOUNT POSITION [--json]",
		Short: "Put an account at a position in your order (1 is the best)",
		Long: `Put an account at a position in your order of preference and print the
new order. ACCOUNT is the account's id, or its label when that is unique
among the runner's accounts. 1 is the best position; a position past the
end puts the account last.`,
		Args: moveAccountArgs,
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.AccountList, error) {
		pos, _ := strconv.Atoi(args[2]) // checked by moveAccountArgs
		return c.MoveAccount(ctx, apitypes.MoveAccountRequest{Runner: args[0], ID: args[1], Position: pos})
	}, text), a.accountShareCmd("share"), a.accountShareCmd("unshare"))
	return cmd
}

// accountShareCmd is `accounts share` or `accounts unshare`.
func (a *app) accountShareCmd(action string) *cobra.Command {
	var sf shareFlags
	short, long := "Let a user, or the members of a project, run under an account of your runner",
		`Share one account of a runner you own: with --user, that user's jobs on the
runner may run under it; with --project, the jobs on that project of its
members. Exactly one of them. ACCOUNT is the account's id, or its label when
that is unique among the runner's accounts. Prints your accounts afterwards.`
	if action == "unshare" {
		short, long = "Take a share of an account back",
			`Take back what 'drover accounts share' gave: exactly one of --user and
--project. Prints your accounts afterwards.`
	}
	cmd := answerCmd(a, &cobra.Command{
		Use:   action + " RUNNER ACCOUNT --user USER | --project PROJECT [--json]",
		Short: short,
		Long:  long,
		Args: func(cmd *cobra.Command, args []string) error {
			if err := exactArgs("RUNNER", "ACCOUNT")(cmd, args); err != nil {
				return err
			}
			if err := checkName("runner", args[0]); err != nil {
				return err
			}
			if args[1] == "" {
				return usagef("an account id or label is required")
			}
			return sf.check(cmd)
		},
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.AccountList, error) {
		req := apitypes.AccountShareRequest{Runner: args[0], Account: args[1], User: sf.user, Project: sf.project}
		if action == "unshare" {
			return c.UnshareAccount(ctx, req)
		}
		return c.ShareAccount(ctx, req)
	}, func(w io.Writer, l apitypes.AccountList) error { return printAccounts(w, l.Accounts) })
	sf.addFlags(cmd, false)
	return cmd
}

func moveAccountArgs(cmd *cobra.Command, args []string) error {
	if err := exactArgs("RUNNER", "ACCOUNT", "POSITION")(cmd, args); err != nil {
		return err
	}
	if err := checkName("runner", args[0]); err != nil {
		return err
	}
	if args[1] == "" {
		return usagef("an account id or label is required")
	}
	if pos, err := strconv.Atoi(args[2]); err != nil || pos < 1 {
		return usagef("position %q: want a whole number from 1 (the best)", args[2])
	}
	return nil
}

func printAccounts(w io.Writer, vs []apitypes.AccountView) error {
	if len(vs) == 0 {
		_, err := fprintf(w, "No accounts: add one with 'drover runner account add' on a runner's machine.\n")
		return err
	}
	t := newTable(w)
	fprintf(t, "POSITION\tRUNNER\tOWNER\tACCOUNT\tAGENT\tKIND\tSTATE\tCONNECTED\tSHARED\n")
	for _, v := range vs {
		name := v.Label
		if name == "" {
			name = v.ID
		}
		connected := "no"
		if v.Connected {
			connected = "yes"
		}
		fprintf(t, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", v.Position, v.Runner, dash(v.Owner), name, v.Agent, dash(v.Kind),
			hubAccountState(v), connected, dash(formatShares(v.SharedWith)))
	}
	if err := t.Flush(); err != nil {
		return err
	}
	for _, v := range vs {
		if fix := hubAccountFix(v); fix != "" {
			fprintf(w, "%s/%s %s: %s\n", v.Runner, v.ID, v.State, fix)
		}
	}
	return nil
}

// hubAccountState is "ready", "needs login", "needs attention" or "limited
// until T" (local time).
func hubAccountState(v apitypes.AccountView) string {
	if v.State == protocol.AccountLimited && v.LimitedUntil != nil {
		return "limited until " + v.LimitedUntil.Local().Format("2006-01-02 15:04:05")
	}
	return dash(v.State)
}

// hubAccountFix is the command, run on the account's runner, that makes an
// account that needs a login or attention ready again; "" for the others.
func hubAccountFix(v apitypes.AccountView) string {
	switch v.State {
	case protocol.AccountNeedsLogin:
		return "on runner " + v.Runner + ", 'drover runner account login " + v.ID + "' prints how to log in"
	case protocol.AccountNeedsAttention:
		return "its provider refused it; on runner " + v.Runner + ", 'drover runner account list' says why, then fix its key or login and run 'drover runner account reset " + v.ID + "'"
	}
	return ""
}
