package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"drover/internal/apitypes"
	"drover/internal/client"
	"drover/internal/fsutil"
)

func (a *app) usersCmd() *cobra.Command {
	list := func(ctx context.Context, c *client.Client, _ []string) (apitypes.UserList, error) {
		return c.Users(ctx)
	}
	text := func(w io.Writer, l apitypes.UserList) error { return printUsers(w, l.Users) }
	cmd := answerCmd(a, &cobra.Command{
		Use:   "users [--json]",
		Short: "List users (same as 'users list'); add and remove them (admin), rotate tokens",
		Long: `List users: an admin sees every user, anyone else themselves. An admin adds
and removes users; a user rotates their own token, an admin anyone's.`,
		Args: noArgs,
	}, list, text)
	cmd.AddCommand(answerCmd(a, &cobra.Command{
		Use:   "list [--json]",
		Short: "List users (an admin sees all, anyone else themselves)",
		Args:  noArgs,
	}, list, text), a.userAddCmd(), a.userRemoveCmd(), a.userTokenCmd())
	cmd.AddCommand(a.userLinkCmd())
	return cmd
}

const tokenOutHelp = `write the token to this new file instead of stdout (mode 0600; an existing file is refused; "-": stdout)`

func (a *app) userAddCmd() *cobra.Command {
	var admin bool
	var out string
	cmd := &cobra.Command{
		Use:   "add NAME [--admin] [--token-out FILE]",
		Short: "Add a user and print its token (admin only)",
		Long: `Add a user and print its token on stdout, and nothing else there, so a
script can capture it; or, with --token-out, write it to FILE, which must not
exist yet and is created readable by you only. The hub keeps only a hash:
this is the one time the token is shown.`,
		Args: exactArgs("NAME"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			if err := checkName("user", name); err != nil {
				return err
			}
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			dst, err := openTokenOut(out) // before the hub makes a token nobody could keep
			if err != nil {
				return err
			}
			r, err := c.AddUser(cmd.Context(), apitypes.NewUserRequest{Name: name, Admin: admin})
			if err == nil && !tokenOK(r.Token) {
				err = fmt.Errorf("add user %s: the hub answered without a usable token", name)
			}
			if err != nil {
				dst.abandon()
				return err
			}
			if err := dst.write(a.env.Stdout, r.Token); err != nil {
				return fmt.Errorf("user %s was added, but %w; give them a new one with 'drover users token rotate %s'", name, err, name)
			}
			if dst.path != "" {
				fprintf(a.env.Stderr, "added user %s; the token is in %s\n", name, dst.path)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&admin, "admin", false, "the user may add users and approve any runner")
	cmd.Flags().StringVar(&out, "token-out", "", tokenOutHelp)
	return cmd
}

func (a *app) userRemoveCmd() *cobra.Command {
	return answerCmd(a, &cobra.Command{
		Use:   "remove NAME [--json]",
		Short: "Remove a user: revoke their tokens and runners, cancel their unfinished jobs (admin only)",
		Args: func(cmd *cobra.Command, args []string) error {
			if err := exactArgs("NAME")(cmd, args); err != nil {
				return err
			}
			return checkName("user", args[0])
		},
	}, func(ctx context.Context, c *client.Client, args []string) (apitypes.UserView, error) {
		return c.RemoveUser(ctx, args[0])
	}, func(w io.Writer, v apitypes.UserView) error {
		_, err := fprintf(w, "removed user %s: their tokens and runners are revoked and their unfinished jobs cancelled\n", v.Name)
		return err
	})
}

func (a *app) userTokenCmd() *cobra.Command {
	var out string
	rotate := &cobra.Command{
		Use:   "rotate [NAME] [--token-out FILE]",
		Short: "Give a user a new token and revoke the old one (yours without NAME)",
		Long: `Give a user a new token and revoke their old one: without NAME your own (an
admin may name anyone). The new token is printed on stdout and nothing else
there, or with --token-out written to FILE, which must not exist yet and is
created readable by you only. When you rotate your own token and this
command used the one saved by 'drover login', the saved login gets the new
token too, so later commands keep working.`,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) > 1 {
				return usagef("want at most one NAME, got %d arguments", len(args))
			}
			if len(args) == 1 {
				return checkName("user", args[0])
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, s, err := a.clientSettings(cmd.Context())
			if err != nil {
				return err
			}
			who, err := c.Whoami(ctx)
			if err != nil {
				return err
			}
			name := who.Name
			if len(args) == 1 {
				name = args[0]
			} else if who.Kind != "user" {
				return fmt.Errorf("this is a %s token, not a user's: name the user whose token to rotate", who.Kind)
			}
			own := who.Kind == "user" && name == who.Name
			dst, err := openTokenOut(out)
			if err != nil {
				return err
			}
			r, err := c.RotateToken(ctx, name)
			if err == nil && !tokenOK(r.Token) {
				err = fmt.Errorf("rotate the token of user %s: the hub answered without a usable token", name)
			}
			if err != nil {
				dst.abandon()
				return err
			}
			if err := dst.write(a.env.Stdout, r.Token); err != nil {
				return fmt.Errorf("the token of user %s was rotated, but %w; rotate it again", name, err)
			}
			if dst.path != "" {
				fprintf(a.env.Stderr, "rotated the token of user %s; the new one is in %s\n", name, dst.path)
			}
			if own {
				return a.ownTokenRotated(s, r.Token)
			}
			return nil
		},
	}
	rotate.Flags().StringVar(&out, "token-out", "", tokenOutHelp)
	cmd := &cobra.Command{
		Use:   "token",
		Short: "Rotate user tokens",
		Args:  noArgs,
		RunE:  showHelp,
	}
	cmd.AddCommand(rotate)
	return cmd
}

// ownTokenRotated follows up a rotation of the caller's own token: the
// saved login it came from gets the new one; any other source is stale now.
func (a *app) ownTokenRotated(s settings, token string) error {
	if s.Saved == "" {
		fprintf(a.env.Stderr, "note: the token from %s was revoked; use the new one from now on\n", s.TokenFrom)
		return nil
	}
	cfg, err := loadConfig(s.Saved)
	if err != nil {
		return fmt.Errorf("your token was rotated, but the saved login was not updated (run 'drover login' with the new token): %w", err)
	}
	if cfg.Token != s.Token {
		fprintf(a.env.Stderr, "note: %s changed meanwhile and was left alone; run 'drover login' with the new token\n", s.Saved)
		return nil
	}
	cfg.Token = token
	if err := saveConfig(s.Saved, cfg); err != nil {
		return fmt.Errorf("your token was rotated, but the saved login was not updated (run 'drover login' with the new token): %w", err)
	}
	fprintf(a.env.Stderr, "updated the saved login in %s with the new token\n", s.Saved)
	return nil
}

// tokenOut is where a new token goes: stdout, or a file drover creates.
type tokenOut struct {
	path string
	f    *os.File
}

// openTokenOut creates path for a token, new and 0600 from the start, so
// that a token never lands in a file someone else can read or that held
// something else; "" and "-" mean stdout. It is opened before the hub is asked,
// so that a refusal here costs nothing there.
func openTokenOut(path string) (*tokenOut, error) {
	if path == "" || path == "-" {
		return &tokenOut{}, nil
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil, fmt.Errorf("--token-out %s: the file exists; a token goes only to a new file", path)
	}
	if err != nil {
		return nil, fmt.Errorf("--token-out: %w", err)
	}
	return &tokenOut{path: path, f: f}, nil
}

// write puts the token on stdout or, durably, in the file.
func (o *tokenOut) write(stdout io.Writer, token string) error {
	if o.f == nil {
		if _, err := fmt.Fprintln(stdout, token); err != nil { // raw: checked by tokenOK
			return fmt.Errorf("the token could not be printed: %w", err)
		}
		return nil
	}
	_, err := o.f.WriteString(token + "\n")
	if err == nil {
		err = o.f.Sync()
	}
	if cerr := o.f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = fsutil.SyncDir(filepath.Dir(o.path))
	}
	if err != nil {
		_ = os.Remove(o.path)
		return fmt.Errorf("the token could not be written to %s: %w", o.path, err)
	}
	return nil
}

// abandon removes the file opened for a token that did not come.
func (o *tokenOut) abandon() {
	if o.f != nil {
		_ = o.f.Close()
		_ = os.Remove(o.path)
	}
}

// tokenOK says whether the hub's answer is a token: printable ASCII without
// spaces, so that printing it raw shows nothing but the token.
func tokenOK(t string) bool {
	if t == "" || len(t) > maxTokenLen {
		return false
	}
	for i := 0; i < len(t); i++ {
		if t[i] <= ' ' || t[i] >= 0x7f {
			return false
		}
	}
	return true
}

func printUsers(w io.Writer, us []apitypes.UserView) error {
	t := newTable(w)
	fprintf(t, "NAME\tADMIN\tRUNNERS\tCREATED\tREMOVED\n")
	for _, u := range us {
		admin := "no"
		if u.Admin {
			admin = "yes"
		}
		removed := "-"
		if u.RemovedAt != nil {
			removed = day(*u.RemovedAt)
		}
		fprintf(t, "%s\t%s\t%d\t%s\t%s\n", u.Name, admin, u.Runners, day(u.CreatedAt), removed)
	}
	return t.Flush()
}

// day is a date and time to the minute, local: 2006-01-02 15:04.
func day(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.Local().Format("2006-01-02 15:04")
}
