package runner

// (stub: the runner helper replaces this file)

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"time"
)

// Login is what `drover runner login` saves under the runner home (0600).
type Login struct {
	Hub   string `json:"hub"`
	Name  string `json:"name"`
	Token string `json:"token"`
}

// Config configures a runner.
type Config struct {
	Home      string            // runner home: login.json, journal/, spool/, work/
	Hub       string            // overrides the hub URL saved at login
	Slots     int               // concurrent attempts (default 1)
	Labels    map[string]string // labels jobs can select
	StopGrace time.Duration     // SIGTERM → SIGKILL grace (default 10s)
	Logger    *slog.Logger
}

// SaveLogin writes the login to home/login.json with mode 0600.
func SaveLogin(home string, l Login) error { return errors.New("not implemented") }

// LoadLogin reads home/login.json.
func LoadLogin(home string) (Login, error) { return Login{}, errors.New("not implemented") }

// LoginFlow makes a runner token on this machine, prints the approval code
// (which carries only the token's SHA-256) to out, waits until a user approves
// it, then saves the login.
func LoginFlow(ctx context.Context, hubURL, name, home string, out io.Writer) error {
	return errors.New("not implemented")
}

// Runner holds a connection to the hub and runs attempts.
type Runner struct{}

// New checks cfg and the saved login.
func New(cfg Config) (*Runner, error) { return nil, errors.New("not implemented") }

// Run connects and works until ctx is cancelled (then it stops gracefully:
// agents stopped with a grace period, output published, attempts released)
// or until the hub replaces or revokes this runner (returned as an error).
func (r *Runner) Run(ctx context.Context) error { return errors.New("not implemented") }
