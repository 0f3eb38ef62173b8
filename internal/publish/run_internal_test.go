package publish

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"drover/internal/gitcmd"
)

// A push or fetch that did not reach the forge is tried again; one the
// forge refused is not, and says why.
func TestClassifyGitFailures(t *testing.T) {
	for _, tc := range []struct {
		stderr string
		code   string // "" for a transport failure
	}{
		{"fatal: unable to access 'https://h/o/r/': Failed to connect to h port 443: Connection refused", ""},
		{"fatal: unable to access 'https://h/o/r/': The requested URL returned error: 502", ""},
		{"fatal: unable to access 'https://h/o/r/': Could not resolve host: h", ""},
		{"fatal: unable to access 'https://h/o/r/': The requested URL returned error: 429", ""},
		{"fatal: unable to access 'https://h/o/r/': The requested URL returned error: 403", "forge_unauthorized"},
		{"remote: Invalid username or password.\nfatal: Authentication failed for 'https://h/o/r/'", "forge_unauthorized"},
		{"error: RPC failed; HTTP 413 curl 22 The requested URL returned error: 413\nfatal: the remote end hung up unexpectedly", CodePushRefused},
		{" ! [remote rejected] main -> main (protected branch hook declined)", CodePushRefused},
	} {
		err := classify(fmt.Errorf("push: %w", &gitcmd.Error{Args: []string{"push"}, Code: 128, Stderr: tc.stderr}))
		code := ""
		if f, ok := errors.AsType[*failure](err); ok {
			code = f.code
		} else if _, ok := errors.AsType[*transportError](err); !ok {
			t.Errorf("%q: neither a failure nor a transport error: %v", tc.stderr, err)
		}
		if code != tc.code {
			t.Errorf("%q: code %q, want %q", tc.stderr, code, tc.code)
		}
	}
	if _, ok := errors.AsType[*transportError](classify(context.DeadlineExceeded)); !ok {
		t.Error("a git that did not finish is not a transport failure")
	}
}
