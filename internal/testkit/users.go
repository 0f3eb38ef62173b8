package testkit

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/client"
)

// User is a user of a Hub other than its first admin, with a token of
// their own and a home of their own for the CLI (no saved login is shared
// with anyone).
type User struct {
	hub  *Hub
	Name string
	// Token is the user's token; set it to a new one after a rotation to
	// act with that.
	Token string
	home  string
}

// AddUser adds a user (POST /users with the admin token) and returns them.
func (h *Hub) AddUser(t testing.TB, name string) *User {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	r, err := h.Client().AddUser(ctx, apitypes.NewUserRequest{Name: name})
	if err != nil {
		t.Fatalf("add user %s: %v", name, err)
	}
	return &User{hub: h, Name: name, Token: r.Token, home: t.TempDir()}
}

// Client is an API client with the user's current token.
func (u *User) Client() *client.Client {
	c, err := client.New(u.hub.URL, u.Token, client.WithTimeout(60*time.Second))
	if err != nil {
		u.hub.t.Fatal(err)
	}
	return c
}

// CLI runs a drover client command against the hub as the user and returns
// its stdout+stderr.
func (u *User) CLI(args ...string) (string, error) {
	cmd := exec.Command(u.hub.bin, args...)
	cmd.Env = append(baseEnv(u.home), "DROVER_HUB="+u.hub.URL, "DROVER_TOKEN="+u.Token)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// LoginRunner runs `drover runner login` against hubURL and approves it as
// this user (`drover runner approve` with the user's token), who then owns
// the runner.
func (u *User) LoginRunner(t testing.TB, name, hubURL string) *Runner {
	t.Helper()
	return u.hub.loginRunner(t, name, hubURL, u.CLI)
}

// StartRunner logs in a runner owned by this user and starts it with extra
// flags (e.g. "--slots", "2").
func (u *User) StartRunner(t testing.TB, name string, args ...string) *Runner {
	t.Helper()
	r := u.LoginRunner(t, name, u.hub.URL)
	r.args = args
	r.Start()
	return r
}

// Status is the HTTP status of a refused API call (0 when err is not a
// refusal from the hub).
func Status(err error) int {
	var ae *client.APIError
	if errors.As(err, &ae) {
		return ae.Status
	}
	return 0
}

// Run submits a job with `drover run --json ARGS...` as the user and
// returns the job the hub created.
func (u *User) Run(t testing.TB, args ...string) apitypes.JobView {
	t.Helper()
	out, err := u.CLI(append([]string{"run", "--json"}, args...)...)
	if err != nil {
		t.Fatalf("drover run as %s: %v\n%s", u.Name, err, out)
	}
	var v apitypes.JobView
	if i := strings.Index(out, "{"); i < 0 || json.Unmarshal([]byte(out[i:]), &v) != nil || v.ID == "" {
		t.Fatalf("drover run as %s printed:\n%s", u.Name, out)
	}
	return v
}

// WaitConnected waits until the hub lists the runner as connected.
func (r *Runner) WaitConnected(d time.Duration) {
	r.t.Helper()
	c := r.hub.Client()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		l, err := c.Runners(ctx)
		cancel()
		if err == nil && slices.ContainsFunc(l.Runners, func(v apitypes.RunnerView) bool { return v.Name == r.Name && v.Connected }) {
			return
		}
		if time.Now().After(deadline) {
			r.t.Fatalf("runner %s not connected within %s (%v):\n%s", r.Name, d, err, r.Output())
		}
		time.Sleep(50 * time.Millisecond)
	}
}
