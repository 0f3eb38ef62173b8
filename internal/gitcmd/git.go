// Package gitcmd is how drover runs git, and the rules every side of it
// shares: the hub's repositories (hubrepo), the runner's worktrees
// (workspace) and the CLI's checkouts (checkout) all run git through Git,
// name projects, commits and refs by the rules of names.go, and refuse a
// source tree by those of sourcetree.go. Untrusted repository content never
// runs here: hooks are off, clean/smudge/process filters are suppressed,
// and no GIT_* variable of the caller leaks into a git call.
package gitcmd

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
)

// safetyConfig is passed to every git call with -c. It turns off everything
// through which repository content could make git run a program: hooks,
// filter drivers (clean/smudge/process, e.g. LFS), fsmonitor, external diff
// and textconv, and credential or askpass helpers. It also makes every
// object import validated.
var safetyConfig = []string{
	"core.hooksPath=/dev/null",
	"core.fsmonitor=false",
	"core.askPass=",
	"credential.helper=",
	"diff.external=",
	"filter.lfs.process=",
	"filter.lfs.clean=",
	"filter.lfs.smudge=",
	"filter.lfs.required=false",
	"protocol.file.allow=always",
	"transfer.fsckObjects=true",
	"fetch.fsckObjects=true",
	"receive.fsckObjects=true",
	"submodule.recurse=false",
	"core.symlinks=true",
	"gc.auto=0",
	"maintenance.auto=false",
	"advice.detachedHead=false",
	"init.defaultBranch=main",
	"user.name=drover",
	"user.email=drover@localhost",
}

// Git runs the git binary with a sanitized environment and safety config.
// The zero value uses "git" from PATH.
type Git struct {
	Bin string   // git binary; "" means "git" from PATH
	Env []string // extra environment entries (never the caller's GIT_*)
}

// Cmd describes one git invocation.
type Cmd struct {
	Dir    string    // working directory
	Args   []string  // git arguments after the safety config
	Env    []string  // extra environment for this call
	Stdin  io.Reader // nil for none
	Stdout io.Writer // nil: captured and returned
	// OwnCredentials keeps the credential helpers and askpass program of
	// the user's own config (a fetch from a mapped remote, with Env giving
	// the user's home); every other call has them switched off.
	OwnCredentials bool
}

// env builds the environment of a git call: a fixed minimal base, never
// the runner's own (no GIT_*, no SSH_AUTH_SOCK, no credentials).
func (g Git) env(extra []string) []string {
	env := []string{
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"HOME=/nonexistent",
		"LANG=C",
		"LC_ALL=C",
		"GIT_CONFIG_NOSYSTEM=1",
		"GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_TERMINAL_PROMPT=0",
		"GIT_ATTR_NOSYSTEM=1",
		"GIT_NO_REPLACE_OBJECTS=1",
		"GIT_PROTOCOL_FROM_USER=0",
	}
	env = append(env, g.Env...)
	return append(env, extra...)
}

// Command is the git process of c, with the safety config and sanitized
// environment, not yet started: for a caller that talks to it while it
// runs (c.Stdout is not used).
func (g Git) Command(ctx context.Context, c Cmd) *exec.Cmd {
	bin := g.Bin
	if bin == "" {
		bin = "git"
	}
	args := make([]string, 0, 2*len(safetyConfig)+len(c.Args))
	for _, kv := range safetyConfig {
		if c.OwnCredentials && (kv == "credential.helper=" || kv == "core.askPass=") {
			continue
		}
		args = append(args, "-c", kv)
	}
	args = append(args, c.Args...)
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Dir = c.Dir
	cmd.Env = g.env(c.Env)
	cmd.Stdin = c.Stdin
	return cmd
}

// Run runs git and returns its stdout (unless c.Stdout is set). A failure
// carries git's stderr in the error.
func (g Git) Run(ctx context.Context, c Cmd) ([]byte, error) {
	cmd := g.Command(ctx, c)
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	if c.Stdout != nil {
		cmd.Stdout = c.Stdout
	}
	cmd.Stderr = LimitedWriter(&errb)
	err := cmd.Run()
	return out.Bytes(), ExitError(c.Args, err, errb.String())
}

// LimitedWriter keeps the first 64 KiB written to b: git's stderr, quoted
// in errors.
func LimitedWriter(b *bytes.Buffer) io.Writer { return &limitedBuffer{b: b, max: 64 << 10} }

// ExitError is the error of a git process with args that ended with err
// (nil: none) and wrote stderr.
func ExitError(args []string, err error, stderr string) error {
	if err == nil {
		return nil
	}
	msg := strings.TrimSpace(stderr)
	if msg == "" {
		msg = err.Error()
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return &Error{Args: args, Code: ee.ExitCode(), Stderr: msg}
	}
	return fmt.Errorf("git %s: %w", firstArg(args), err)
}

// Out runs git in dir and returns its trimmed stdout.
func (g Git) Out(ctx context.Context, dir string, args ...string) (string, error) {
	b, err := g.Run(ctx, Cmd{Dir: dir, Args: args})
	return strings.TrimSpace(string(b)), err
}

// Error is a git command that exited non-zero.
type Error struct {
	Args   []string
	Code   int
	Stderr string
}

func (e *Error) Error() string {
	return fmt.Sprintf("git %s: exit %d: %s", firstArg(e.Args), e.Code, e.Stderr)
}

func firstArg(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return args[0]
}

type limitedBuffer struct {
	b   *bytes.Buffer
	max int
}

func (l *limitedBuffer) Write(p []byte) (int, error) {
	if room := l.max - l.b.Len(); room > 0 {
		l.b.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

// ConfigEnviron is the environment of a git process whose arguments drover
// does not choose (git http-backend): the sanitized base, with the safety
// config and then config passed through GIT_CONFIG_*.
func (g Git) ConfigEnviron(config []string) []string {
	return g.env(configEnv(append(append([]string{}, safetyConfig...), config...)))
}

// configEnv passes config through the environment (GIT_CONFIG_COUNT),
// for git processes whose arguments drover does not choose.
func configEnv(kvs []string) []string {
	env := []string{"GIT_CONFIG_COUNT=" + strconv.Itoa(len(kvs))}
	for i, kv := range kvs {
		k, v, _ := strings.Cut(kv, "=")
		env = append(env, fmt.Sprintf("GIT_CONFIG_KEY_%d=%s", i, k), fmt.Sprintf("GIT_CONFIG_VALUE_%d=%s", i, v))
	}
	return env
}

// HeaderEnv passes a token to git as an HTTP header through the
// environment, never in argv (which every local user can read).
func HeaderEnv(token string) []string {
	if token == "" {
		return nil
	}
	return AuthEnv("Bearer " + token)
}

// AuthEnv passes an Authorization header's value ("Bearer ...",
// "Basic ...") to git through the environment, like HeaderEnv.
func AuthEnv(value string) []string {
	if value == "" {
		return nil
	}
	return configEnv([]string{"http.extraHeader=Authorization: " + value})
}

// Available reports whether git can be run, with its version.
func (g Git) Available(ctx context.Context) (string, error) {
	v, err := g.Out(ctx, os.TempDir(), "version")
	if err != nil {
		return "", fmt.Errorf("git is not available: %w", err)
	}
	return v, nil
}
