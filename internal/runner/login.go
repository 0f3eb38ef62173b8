package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"drover/internal/auth"
	"drover/internal/fsutil"
	"drover/internal/protocol"
)

// Login is what `drover runner login` saves under the runner home (0600).
type Login struct {
	Hub   string `json:"hub"`
	Name  string `json:"name"`
	Token string `json:"token"`
}

const loginFile = "login.json"

// namePattern is what runner names (and, since they become file names,
// attempt ids) must look like.
var namePattern = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)

// ValidName reports whether s can name a runner.
func ValidName(s string) bool { return namePattern.MatchString(s) }

// SaveLogin writes the login to home/login.json with mode 0600.
func SaveLogin(home string, l Login) error {
	if err := l.check(); err != nil {
		return err
	}
	if err := os.MkdirAll(home, 0o700); err != nil {
		return fmt.Errorf("make runner home: %w", err)
	}
	b, err := json.MarshalIndent(l, "", "  ")
	if err != nil {
		return err
	}
	if err := fsutil.WriteFileAtomic(filepath.Join(home, loginFile), append(b, '\n')); err != nil {
		return fmt.Errorf("save login: %w", err)
	}
	return nil
}

// LoadLogin reads home/login.json.
func LoadLogin(home string) (Login, error) {
	p := filepath.Join(home, loginFile)
	fi, err := os.Stat(p)
	if errors.Is(err, fs.ErrNotExist) {
		return Login{}, fmt.Errorf("no runner login in %s: run `drover runner login --hub URL --name NAME` first", home)
	}
	if err != nil {
		return Login{}, fmt.Errorf("read login: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return Login{}, fmt.Errorf("%s holds a token but is readable by others (mode %04o): chmod 600 it", p, fi.Mode().Perm())
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return Login{}, fmt.Errorf("read login: %w", err)
	}
	var l Login
	if err := json.Unmarshal(b, &l); err != nil {
		return Login{}, fmt.Errorf("read login %s: %w", p, err)
	}
	if err := l.check(); err != nil {
		return Login{}, fmt.Errorf("login %s: %w", p, err)
	}
	return l, nil
}

func (l Login) check() error {
	if _, err := hubBase(l.Hub); err != nil {
		return err
	}
	if !ValidName(l.Name) {
		return fmt.Errorf("runner name %q is invalid: use 1-64 letters, digits, '.', '_' or '-', starting with a letter or digit", l.Name)
	}
	if !strings.HasPrefix(l.Token, auth.PrefixRunner) {
		return errors.New("the login holds no runner token")
	}
	return nil
}

// hubBase checks a hub URL and returns it without a trailing slash.
func hubBase(hub string) (string, error) {
	u, err := url.Parse(hub)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("hub URL %q must look like https://host[:port]", hub)
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return "", fmt.Errorf("hub URL %q must not carry a query or fragment", hub)
	}
	return strings.TrimRight(hub, "/"), nil
}

// LoginFlow makes a runner token on this machine, prints the approval code
// (which carries only the token's SHA-256) to out, waits until a user approves
// it, then saves the login.
func LoginFlow(ctx context.Context, hubURL, name, home string, out io.Writer) error {
	return loginFlow(ctx, hubURL, name, home, out, 1500*time.Millisecond)
}

func loginFlow(ctx context.Context, hubURL, name, home string, out io.Writer, every time.Duration) error {
	hub, err := hubBase(hubURL)
	if err != nil {
		return err
	}
	l := Login{Hub: hub, Name: name, Token: auth.NewToken(auth.PrefixRunner)}
	if err := l.check(); err != nil {
		return err
	}
	link := hub + "/approve?name=" + url.QueryEscape(name) + "&key=" + auth.Hash(l.Token)
	fmt.Fprintf(out, "To let runner %s work for you, open this link while logged in to the hub:\n\n  %s\n\n"+
		"or run, as a user of the hub:\n\n  drover runner approve '%s'\n\nWaiting for approval (Ctrl-C to give up)...\n",
		name, link, link)

	client := &http.Client{Timeout: 30 * time.Second}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		approved, err := pollLogin(ctx, client, hub, l.Token)
		if err != nil {
			return err
		}
		if approved != "" {
			l.Name = approved
			break
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for approval of runner %s: %w", name, ctx.Err())
		case <-t.C:
		}
	}
	if l.Name != name {
		// The hub's name is the runner's: saving the asked one would leave
		// the two disagreeing.
		fmt.Fprintf(out, "The hub approved this runner as %s, not %s as asked; it is %s from now on.\n", l.Name, name, l.Name)
	}
	if err := SaveLogin(home, l); err != nil {
		return err
	}
	fmt.Fprintf(out, "Runner %s approved; login saved to %s.\n", l.Name, filepath.Join(home, loginFile))
	return nil
}

// pollLogin asks the hub once whether the token was approved and returns
// the runner's name if so. Unreachable hubs and server errors count as "not
// yet": the user may be restarting it.
func pollLogin(ctx context.Context, client *http.Client, hub, token string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, hub+protocol.APIPrefix+"/runner/login", nil)
	if err != nil {
		return "", fmt.Errorf("poll login: %w", err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("waiting for approval: %w", ctx.Err())
		}
		return "", nil
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch {
	case resp.StatusCode == http.StatusOK:
		var v protocol.RunnerView
		if err := json.Unmarshal(body, &v); err != nil || !ValidName(v.Name) {
			return "", fmt.Errorf("hub %s approved the login but named no valid runner name", hub)
		}
		return v.Name, nil
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode >= 500:
		return "", nil
	}
	var e protocol.ErrorBody
	if json.Unmarshal(body, &e) == nil && e.Error.Code != "" {
		return "", fmt.Errorf("hub refused the runner login: %s", e.Error.Error())
	}
	return "", fmt.Errorf("hub refused the runner login: HTTP %s", resp.Status)
}
