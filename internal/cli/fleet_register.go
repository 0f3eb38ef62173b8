package cli

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"

	"drover/internal/runner"
)

// registrationTokenEnv carries a registration token to a runner that has
// no file for it; never argv, where other users of the machine see it.
const registrationTokenEnv = "DROVER_REGISTRATION_TOKEN"

// registerRunner turns a fleet launch's registration token into the
// runner's own login before it starts. Without a token it does nothing.
func (a *app) registerRunner(ctx context.Context, file string, cfg runner.Config) error {
	tok := a.env.Getenv(registrationTokenEnv)
	if file != "" {
		fi, err := os.Stat(file)
		if err != nil {
			return fmt.Errorf("registration token: %w", err)
		}
		if fi.Mode().Perm()&0o077 != 0 {
			return fmt.Errorf("registration token file %s is readable by others (mode %04o): chmod 600 it", file, fi.Mode().Perm())
		}
		b, err := os.ReadFile(file)
		if err != nil {
			return fmt.Errorf("registration token: %w", err)
		}
		tok = strings.TrimSpace(string(b))
	}
	if tok == "" {
		return nil
	}
	if cfg.Hub == "" {
		return usagef("registering with a fleet token needs --hub URL")
	}
	if err := runner.Register(ctx, runner.RegisterOptions{Hub: cfg.Hub, Home: cfg.Home, Token: tok, Labels: cfg.Labels}); err != nil {
		return err
	}
	if file != "" {
		// Used once; no copy of it should outlive the registration.
		if err := os.Remove(file); err != nil && !errors.Is(err, os.ErrNotExist) {
			a.log.Warn("could not remove the used registration token file", "file", file, "err", err)
		}
	}
	return nil
}
