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
	"strings"
	"time"

	"drover/internal/apitypes"
	"drover/internal/auth"
	"drover/internal/fsutil"
	"drover/internal/retry"
	"drover/internal/rules"
)

// Login is what `drover runner login` saves under the runner home (0600).
type Login struct {
	Hub   string `json:"hub"`
	Name  string `json:"name"`
	Token string `json:"token"`
}

const loginFile = "login.json"

// ValidName reports whether s can name a runner (or, since they become
// file names, an attempt): protocol.ValidName.
func ValidName(s string) bool { return rules.ValidName(s) }

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

// hubBase checks a hub URL and returns it normalized (protocol.HubURL).
func hubBase(hub string) (string, error) { return rules.HubURL(hub) }

// DefaultLoginTimeout bounds the wait for approval when none is given.
const DefaultLoginTimeout = 15 * time.Minute

// LoginOptions is what `drover runner login` asks for.
type LoginOptions struct {
	Hub  string // the hub's URL
	Name string // the name asked for; the hub's approval decides
	Home string // the runner home the login is saved in
	Out  io.Writer
	// Timeout bounds the wait for approval (DefaultLoginTimeout if 0).
	Timeout time.Duration
}

// loginTiming is the poll's pacing, short in tests.
type loginTiming struct {
	every     time.Duration // between polls
	request   time.Duration // one request, dial included
	maxOutage time.Duration // how long the hub may fail after the first contact
	maxDelay  time.Duration // longest pause between retries during an outage
}

func defaultLoginTiming() loginTiming {
	return loginTiming{every: 1500 * time.Millisecond, request: 10 * time.Second,
		maxOutage: 2 * time.Minute, maxDelay: 15 * time.Second}
}

// LoginFlow makes a runner token on this machine, checks that the hub is a
// drover hub, prints the approval link (which carries only the token's
// SHA-256) to o.Out, waits until a user approves it, then saves the login
// under the name the hub approved.
func LoginFlow(ctx context.Context, o LoginOptions) error {
	return loginFlow(ctx, o, defaultLoginTiming())
}

func loginFlow(ctx context.Context, o LoginOptions, tm loginTiming) error {
	hub, err := hubBase(o.Hub)
	if err != nil {
		return err
	}
	l := Login{Hub: hub, Name: o.Name, Token: auth.NewToken(auth.PrefixRunner)}
	if err := l.check(); err != nil {
		return err
	}
	if o.Timeout <= 0 {
		o.Timeout = DefaultLoginTimeout
	}
	p := &loginPoll{url: hub + apitypes.APIPrefix + "/runner/login", token: l.Token,
		client: &http.Client{Timeout: tm.request,
			// A redirect would carry the token elsewhere and leave the login
			// with a URL the runner cannot connect to.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}}

	// A wrong or unreachable hub fails now, not after a wait for an
	// approval that cannot come.
	res := p.once(ctx)
	if res.err != nil {
		if ctx.Err() != nil {
			return fmt.Errorf("contact hub %s: %w", hub, ctx.Err())
		}
		return res.err
	}

	link := hub + "/approve?name=" + url.QueryEscape(o.Name) + "&key=" + auth.Hash(l.Token)
	fmt.Fprintf(o.Out, "To let runner %s work for you, approve it on the hub's page at:\n\n  %s\n\n"+
		"or run, as a user of the hub:\n\n  drover runner approve '%s'\n\nWaiting for approval for up to %s (Ctrl-C to give up)...\n",
		o.Name, link, link, o.Timeout)

	wctx, cancel := context.WithTimeout(ctx, o.Timeout)
	defer cancel()
	var (
		outage time.Time // when the hub started failing; zero while it answers
		fails  int       // transient failures in a row
		pol    = retry.Policy{First: tm.every, Max: tm.maxDelay}
	)
	for res.name == "" {
		if retry.Sleep(wctx, pol.Delay(fails)) != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("waiting for approval of runner %s: %w", o.Name, ctx.Err())
			}
			return fmt.Errorf("runner %s was not approved within %s: run `drover runner login` again for a new link", o.Name, o.Timeout)
		}
		res = p.once(wctx)
		switch {
		case res.err == nil:
			outage, fails = time.Time{}, 0
		case wctx.Err() != nil:
			// Handled at the top of the loop.
		case !res.transient:
			return res.err
		default:
			// The hub answered before: it may be restarting. Back off, but
			// not forever.
			now := time.Now()
			if outage.IsZero() {
				outage = now
			}
			if now.Sub(outage) > tm.maxOutage {
				return fmt.Errorf("lost the hub for over %s while waiting for approval: %w", tm.maxOutage, res.err)
			}
			fails++
		}
	}
	l.Name = res.name
	if l.Name != o.Name {
		// The hub's name is the runner's: saving the asked one would leave
		// the two disagreeing.
		fmt.Fprintf(o.Out, "The hub approved this runner as %s, not %s as asked; it is %s from now on.\n", l.Name, o.Name, l.Name)
	}
	if err := SaveLogin(o.Home, l); err != nil {
		return err
	}
	fmt.Fprintf(o.Out, "Runner %s approved; login saved to %s.\n", l.Name, filepath.Join(o.Home, loginFile))
	return nil
}

// loginPoll asks a hub about one runner token.
type loginPoll struct {
	client *http.Client
	url    string
	token  string
}

// pollResult is one answer: the approved name, nothing yet (both with a nil
// err), or an error that may be transient (no answer, or a server error).
type pollResult struct {
	name      string
	err       error
	transient bool
}

// once asks the hub whether the token was approved. Only a drover hub's
// own "not approved" (401 with a JSON unauthorized error) means "wait".
func (p *loginPoll) once(ctx context.Context) pollResult {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.url, nil)
	if err != nil {
		return pollResult{err: fmt.Errorf("ask %s: %w", p.url, err)}
	}
	req.Header.Set("Authorization", "Bearer "+p.token)
	resp, err := p.client.Do(req)
	if err != nil {
		// url.Error names the method and URL; the token is in a header.
		return pollResult{err: fmt.Errorf("no drover hub answered: %w", err), transient: true}
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	notHub := func(why string) pollResult {
		return pollResult{err: fmt.Errorf("%s is not a drover hub's runner login (%s): check --hub", p.url, why)}
	}
	var e apitypes.ErrorBody
	isJSON := strings.HasPrefix(resp.Header.Get("Content-Type"), "application/json")
	droverErr := isJSON && json.Unmarshal(body, &e) == nil && e.Error.Code != ""
	switch {
	case resp.StatusCode == http.StatusOK:
		var v apitypes.RunnerView
		if !isJSON || json.Unmarshal(body, &v) != nil || !ValidName(v.Name) {
			return notHub("HTTP 200 without a runner")
		}
		return pollResult{name: v.Name}
	case resp.StatusCode == http.StatusUnauthorized && droverErr && e.Error.Code == rules.ErrUnauthorized:
		return pollResult{}
	case resp.StatusCode >= 300 && resp.StatusCode < 400:
		return notHub(fmt.Sprintf("HTTP %s to %s; use that address", resp.Status, resp.Header.Get("Location")))
	case resp.StatusCode >= 500:
		why := "HTTP " + resp.Status
		if droverErr {
			why += ": " + e.Error.Message
		}
		return pollResult{err: fmt.Errorf("hub %s answered %s", p.url, why), transient: true}
	case droverErr:
		return pollResult{err: fmt.Errorf("hub %s refused the runner login: %s", p.url, e.Error.Error())}
	}
	ct := resp.Header.Get("Content-Type")
	if ct == "" {
		ct = "no content type"
	}
	return notHub(fmt.Sprintf("HTTP %s, %s", resp.Status, ct))
}
