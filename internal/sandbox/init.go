package sandbox

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	"drover/internal/sandbox/egress"
)

// Init is `drover sandbox-init`, the first process drover runs inside a
// sandbox that needs bridges (args: [--bridge TCP=UNIX]... [--proxy ADDR]
// -- ARGV). Inside, the network namespace has only loopback: each bridge
// listens on a loopback TCP address and forwards every connection to a unix
// socket bound in from outside (the egress proxy, a credential endpoint, a
// tools server). Init then runs ARGV with the proxy variables set, stays
// alive for the bridges, and exits as ARGV does. Stop's SIGTERM reaches
// ARGV directly; init ignores it so that ARGV gets its grace period.
func Init(ctx context.Context, args []string, stderr io.Writer) int {
	fail := func(format string, a ...any) int {
		fmt.Fprintf(stderr, "drover sandbox-init: "+format+"\n", a...)
		return 126
	}
	fs := flag.NewFlagSet("sandbox-init", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var bridges bridgeFlags
	fs.Var(&bridges, "bridge", "TCP=UNIX: listen on TCP inside, forward to the unix socket UNIX (repeatable)")
	proxy := fs.String("proxy", "", "address of the egress proxy inside: sets HTTP(S)_PROXY for the command")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	argv := fs.Args()
	if len(argv) == 0 {
		return fail("no command after --")
	}
	// Listening before the command starts: it may connect at once.
	for _, b := range bridges {
		l, err := net.Listen("tcp", b[0])
		if err != nil {
			return fail("bridge %s: %v", b[0], err)
		}
		go serveBridge(ctx, l, b[1])
	}
	env := os.Environ()
	if *proxy != "" {
		u := "http://" + *proxy
		for _, name := range []string{"HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy", "ALL_PROXY", "all_proxy"} {
			env = setEnv(env, name, u)
		}
		// The sandbox's own loopback is its own: servers a job starts there.
		for _, name := range []string{"NO_PROXY", "no_proxy"} {
			env = setEnv(env, name, "localhost,127.0.0.1,::1")
		}
	}
	// Notify (not ignore): the command must not inherit ignored signals.
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGHUP)
	go func() {
		for range sigs {
		}
	}()
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env, cmd.Stdin, cmd.Stdout, cmd.Stderr = env, os.Stdin, os.Stdout, os.Stderr
	if err := cmd.Start(); err != nil {
		fmt.Fprintf(stderr, "drover sandbox-init: %v\n", err)
		return 127
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		return fail("wait: %v", err)
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}

// bridgeFlags are TCP=UNIX pairs.
type bridgeFlags [][2]string

func (b *bridgeFlags) String() string { return fmt.Sprint(*b) }

func (b *bridgeFlags) Set(v string) error {
	tcp, unix, ok := strings.Cut(v, "=")
	if !ok || tcp == "" || unix == "" {
		return fmt.Errorf("bridge %q: want TCP_ADDR=UNIX_PATH", v)
	}
	*b = append(*b, [2]string{tcp, unix})
	return nil
}

// serveBridge forwards each connection accepted on l to the unix socket
// path.
func serveBridge(ctx context.Context, l net.Listener, path string) {
	var d net.Dialer
	for {
		c, err := l.Accept()
		if err != nil {
			return
		}
		go func() {
			u, err := d.DialContext(ctx, "unix", path)
			if err != nil {
				c.Close() // the client sees the connection close
				return
			}
			egress.Splice(c, u)
		}()
	}
}
