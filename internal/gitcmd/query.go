package gitcmd

import (
	"context"
	"errors"
	"fmt"
)

// RefValue returns the commit a ref of the repository in dir points at,
// "" when it does not exist.
func RefValue(ctx context.Context, g Git, dir, ref string) (string, error) {
	out, err := g.Out(ctx, dir, "rev-parse", "--quiet", "--verify", "--end-of-options", ref+"^{commit}")
	var ge *Error
	if errors.As(err, &ge) && ge.Code == 1 {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("read ref %s: %w", ref, err)
	}
	return out, nil
}

// IsAncestor reports whether commit a is an ancestor of (or equal to) b in
// the repository in dir, with env (e.g. a quarantine's object directory).
func IsAncestor(ctx context.Context, g Git, dir string, env []string, a, b string) (bool, error) {
	_, err := g.Run(ctx, Cmd{Dir: dir, Env: env, Args: []string{"merge-base", "--is-ancestor", a, b}})
	var ge *Error
	if errors.As(err, &ge) && ge.Code == 1 {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("check that %s descends from %s: %w", Short(b), Short(a), err)
	}
	return true, nil
}
