// Package childproc is what the tools that run drover processes of their
// own share: the bench, the fault campaign and the test kit. Each child
// gets a clean environment and a loopback port, and a command that starts
// children stops them when it is interrupted.
package childproc

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
)

// Env is the environment of a child drover process with its own home:
// nothing of the parent's drover settings (DROVER_HUB, DROVER_TOKEN, its
// XDG directories) leaks in; PATH, and the race detector's, temporary
// directory's and coverage's settings, do.
func Env(home string) []string {
	env := []string{"HOME=" + home, "PATH=" + os.Getenv("PATH"), "LANG=C.UTF-8",
		"XDG_CONFIG_HOME=" + filepath.Join(home, ".config"), "XDG_DATA_HOME=" + filepath.Join(home, ".local/share"),
		"XDG_STATE_HOME=" + filepath.Join(home, ".local/state")}
	for _, k := range []string{"GORACE", "TMPDIR", "GOCOVERDIR"} {
		if v, ok := os.LookupEnv(k); ok {
			env = append(env, k+"="+v)
		}
	}
	return env
}

// FreeAddr picks a loopback address that is free now. Another process
// could take it before the child binds it; the child then fails to start
// with its own error.
func FreeAddr() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	addr := ln.Addr().String()
	if err := ln.Close(); err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	return addr, nil
}

// Start is the beginning of a command that runs children of binary: its
// context ends on SIGINT or SIGTERM (so the command stops its children
// itself), and an empty *binary becomes this executable.
func Start(cmd *cobra.Command, binary *string) (context.Context, context.CancelFunc, error) {
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	if *binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, nil, fmt.Errorf("find this drover binary (pass --binary): %w", err)
		}
		*binary = exe
	}
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	return ctx, stop, nil
}
