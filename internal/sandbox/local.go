package sandbox

import (
	"context"
	"fmt"
	"os"
	"os/exec"
)

// local runs commands directly on the host as the runner's user. It
// isolates nothing, Describe says so, and New warns every time one is made.
type local struct{ p Policy }

func newLocal(p Policy) (Boundary, error) {
	if p.Network.enabled() || len(p.Sockets) > 0 {
		return nil, fmt.Errorf("--sandbox none cannot enforce network rules or bridge sockets: use bwrap, docker or podman")
	}
	p.Logger.Warn("running UNISOLATED (--sandbox none): the job can read and write everything the runner's user can, including its token, and reach any network",
		"root", p.Root)
	return local{p}, nil
}

func (l local) Describe() Isolation {
	return Isolation{
		Kind:       KindNone,
		Network:    "host (unisolated)",
		Filesystem: "host (unisolated)",
		User:       fmt.Sprintf("uid %d (the runner's own, unisolated)", os.Getuid()),
		Limits:     l.p.Limits.describe(limitMechanisms{}, false),
	}
}

func (l local) Start(ctx context.Context, s Spec) (Process, error) {
	s, err := l.p.check(s)
	if err != nil {
		return nil, err
	}
	path, err := lookPath(s.Argv[0], s.Env, s.Dir, nil)
	if err != nil {
		return nil, err
	}
	return start(ctx, launch{
		cmd:     &exec.Cmd{Path: path, Args: s.Argv, Env: s.Env, Dir: s.Dir},
		timeout: s.Timeout,
		grace:   s.Grace,
		out:     newCapWriter(s.Output, l.p.Limits.Output),
	})
}
