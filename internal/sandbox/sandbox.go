// Package sandbox is the execution boundary: everything a runner starts on
// behalf of a job goes through a Boundary, which says what isolation it
// actually applied. A Policy says what a job may touch; New is the one
// mapping from a policy to a boundary: bubblewrap (the default), a docker
// or podman container, or none (unisolated, explicit opt-in only).
package sandbox

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"drover/internal/protocol"
)

// DefaultGrace is the SIGTERM → SIGKILL delay when a Spec leaves Grace zero.
const DefaultGrace = 10 * time.Second

// ErrKill, as the cause of a Start context's cancellation
// (context.WithCancelCause), asks for SIGKILL at once instead of Stop's
// SIGTERM and grace period.
var ErrKill = errors.New("sandbox: kill without grace")

// Spec is one command to run.
type Spec struct {
	Dir     string        // absolute; must exist
	Argv    []string      // Argv[0] is looked up in Env's PATH unless it holds a slash
	Env     []string      // the whole environment; nothing is inherited
	Output  io.Writer     // combined stdout and stderr; nil discards
	Timeout time.Duration // zero: none; past it the process is stopped
	Grace   time.Duration // SIGTERM → SIGKILL delay of Stop; zero: DefaultGrace
}

// Isolation describes what a boundary actually applies, for the attempt's
// record (it travels to the hub in the attempt's finish).
type Isolation = protocol.Isolation

// Exit is how a process ended.
type Exit struct {
	Code     int    `json:"code"`             // exit status, or 128+signal when killed by a signal
	Signal   string `json:"signal,omitempty"` // e.g. "SIGKILL" when killed by a signal
	TimedOut bool   `json:"timed_out,omitempty"`
	Stopped  bool   `json:"stopped,omitempty"` // Stop or Kill was called (directly, by ctx or by the timeout)
}

// Process is a started command.
type Process interface {
	Pid() int
	// Wait blocks until the process has exited, its group has been killed
	// and its output has been written. It may be called more than once.
	Wait() (Exit, error)
	// Stop sends SIGTERM to the whole process group, then SIGKILL after the
	// grace period.
	Stop()
	// Kill sends SIGKILL to the whole process group now.
	Kill()
}

// Boundary starts processes.
type Boundary interface {
	// Start starts s. Cancelling ctx stops the process (see ErrKill).
	Start(ctx context.Context, s Spec) (Process, error)
	Describe() Isolation
}

func (s *Spec) validate() error {
	if len(s.Argv) == 0 || s.Argv[0] == "" {
		return errors.New("no command to run")
	}
	if !filepath.IsAbs(s.Dir) {
		return fmt.Errorf("working directory %q is not absolute", s.Dir)
	}
	fi, err := os.Stat(s.Dir)
	if err != nil {
		return fmt.Errorf("working directory: %w", err)
	}
	if !fi.IsDir() {
		return fmt.Errorf("working directory %s is not a directory", s.Dir)
	}
	for _, kv := range s.Env {
		if !strings.Contains(kv, "=") {
			return fmt.Errorf("environment entry %q has no '='", kv)
		}
	}
	return nil
}

// lookPath resolves argv0 against the PATH of env (never the runner's own),
// skipping relative PATH entries so that a job cannot pick up a binary from
// its working directory by accident, and entries a sandbox cannot see
// (visible nil: all are seen).
func lookPath(argv0 string, env []string, dir string, visible func(string) bool) (string, error) {
	seen := func(p string) bool {
		if visible == nil {
			return true
		}
		r, err := filepath.EvalSymlinks(p)
		return err == nil && visible(r)
	}
	if strings.Contains(argv0, "/") {
		p := argv0
		if !filepath.IsAbs(p) {
			p = filepath.Join(dir, p)
		}
		if err := executable(p); err != nil {
			return "", err
		}
		if !seen(p) {
			return "", fmt.Errorf("%s is not visible inside the sandbox", p)
		}
		return p, nil
	}
	path := ""
	for _, kv := range env {
		if v, ok := strings.CutPrefix(kv, "PATH="); ok {
			path = v
		}
	}
	if path == "" {
		return "", fmt.Errorf("%s: not found: the job's environment has no PATH", argv0)
	}
	for _, d := range filepath.SplitList(path) {
		if !filepath.IsAbs(d) {
			continue
		}
		p := filepath.Join(d, argv0)
		if executable(p) == nil && seen(p) {
			return p, nil
		}
	}
	if visible != nil {
		return "", fmt.Errorf("%s: not found in PATH %s among the directories visible inside the sandbox", argv0, path)
	}
	return "", fmt.Errorf("%s: not found in PATH %s", argv0, path)
}

func executable(p string) error {
	fi, err := os.Stat(p)
	if err != nil {
		return err
	}
	if fi.IsDir() || fi.Mode().Perm()&0o111 == 0 {
		return fmt.Errorf("%s is not an executable file", p)
	}
	return nil
}
