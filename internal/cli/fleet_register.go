package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"golang.org/x/sys/unix"

	"drover/internal/fleet"
	"drover/internal/runner"
)

// registrationTokenEnv carries a registration token to a runner that has
// no file for it; never argv, where other users of the machine see it.
const registrationTokenEnv = "DROVER_REGISTRATION_TOKEN"

// fleetRunner prepares a runner a fleet target started: with --stdio its
// hub is the tunnel over stdin/stdout (and ctx ends with the tunnel), and
// a registration token (from the tunnel, the file or the environment)
// becomes the runner's own login before it starts. done releases what it
// opened.
func (a *app) fleetRunner(ctx context.Context, stdio bool, tokenFile string, cfg *runner.Config) (_ context.Context, done func(), err error) {
	done = func() {}
	tok := a.env.Getenv(registrationTokenEnv)
	// Read once (a container target passes it so): nothing the runner
	// starts inherits it.
	if err := os.Unsetenv(registrationTokenEnv); err != nil {
		return ctx, done, fmt.Errorf("drop $%s: %w", registrationTokenEnv, err)
	}
	if tokenFile != "" {
		if tok, err = readTokenFile(tokenFile); err != nil {
			return ctx, done, err
		}
	}
	if stdio {
		out, err := a.takeStdout()
		if err != nil {
			return ctx, done, err
		}
		tun, err := fleet.OpenFarTunnel(a.env.Stdin, out, a.log)
		if err != nil {
			return ctx, done, err
		}
		cfg.Hubs = []string{tun.URL}
		if tun.Token != "" {
			tok = tun.Token
		}
		var cancel context.CancelFunc
		ctx, cancel = context.WithCancel(ctx)
		go func() {
			<-tun.Done()
			a.log.Warn("the stdio tunnel closed; stopping")
			cancel()
		}()
		done = func() { cancel(); tun.Close() }
	}
	if tok == "" {
		return ctx, done, nil
	}
	if len(cfg.Hubs) == 0 {
		return ctx, done, usagef("registering with a fleet token needs --hub URL")
	}
	if err := runner.Register(ctx, runner.RegisterOptions{Hubs: cfg.Hubs, Home: cfg.Home, Token: tok, Labels: cfg.Labels}); err != nil {
		return ctx, done, err
	}
	if tokenFile != "" {
		// Used once; no copy of it should outlive the registration.
		if err := os.Remove(tokenFile); err != nil && !errors.Is(err, os.ErrNotExist) {
			a.log.Warn("could not remove the used registration token file", "file", tokenFile, "err", err)
		}
	}
	return ctx, done, nil
}

func readTokenFile(file string) (string, error) {
	fi, err := os.Stat(file)
	if err != nil {
		return "", fmt.Errorf("registration token: %w", err)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("registration token file %s is readable by others (mode %04o): chmod 600 it", file, fi.Mode().Perm())
	}
	b, err := os.ReadFile(file)
	if err != nil {
		return "", fmt.Errorf("registration token: %w", err)
	}
	return strings.TrimSpace(string(b)), nil
}

// takeStdout gives the tunnel the process's stdout alone: fd 1 then
// points at stderr, so a stray print cannot corrupt the tunnel's frames.
func (a *app) takeStdout() (*os.File, error) {
	if a.env.Stdout != os.Stdout {
		if f, ok := a.env.Stdout.(*os.File); ok {
			return f, nil
		}
		return nil, errors.New("--stdio needs the process's own stdout")
	}
	fd, err := unix.Dup(int(os.Stdout.Fd()))
	if err != nil {
		return nil, fmt.Errorf("take stdout for the tunnel: %w", err)
	}
	if err := unix.Dup3(int(os.Stderr.Fd()), int(os.Stdout.Fd()), 0); err != nil {
		unix.Close(fd)
		return nil, fmt.Errorf("take stdout for the tunnel: %w", err)
	}
	unix.CloseOnExec(fd)
	return os.NewFile(uintptr(fd), "tunnel"), nil
}
