package sandbox

import (
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"

	"drover/internal/sandbox/egress"
)

// runDir is where a bridged sandbox finds drover's init and the sockets it
// bridges; on the host it is a private directory per command.
const runDir = "/run/drover"

// bridgePlan is what one command of a bridged sandbox needs outside it: the
// socket directory mounted read-only at runDir, the egress proxy serving its
// sockets, extra read-only binds (the init binary, bridged host sockets),
// and the init's command line.
type bridgePlan struct {
	dir    string      // host directory mounted at runDir
	binds  [][2]string // host path → path inside, read-only, after dir
	init   []string    // init command line, up to and including "--"
	env    []string    // credential variables: the placeholder and the base URL
	proxy  *egress.Proxy
	closed bool
}

// bridge prepares the bridge of one command. A sandbox with only loopback
// reaches the proxy through drover's init, which listens on 127.0.0.1
// inside and forwards each connection to a unix socket bound in.
func (p Policy) bridge(placeholder string, out io.Writer) (_ *bridgePlan, err error) {
	dir, err := os.MkdirTemp("", "drover-sandbox-")
	if err != nil {
		return nil, fmt.Errorf("make the sandbox's socket directory: %w", err)
	}
	b := &bridgePlan{dir: dir}
	defer func() {
		if err != nil {
			b.close()
		}
	}()
	// Mount points for the binds must exist in the read-only directory.
	touch := func(name string) (string, error) {
		f, err := os.OpenFile(filepath.Join(dir, name), os.O_CREATE|os.O_WRONLY, 0o600)
		if err != nil {
			return "", fmt.Errorf("prepare the sandbox's socket directory: %w", err)
		}
		return filepath.Join(runDir, name), f.Close()
	}
	initPath, err := touch("drover")
	if err != nil {
		return nil, err
	}
	b.binds = append(b.binds, [2]string{p.InitBinary, initPath})
	b.init = []string{initPath, "sandbox-init"}

	if p.Network.enabled() {
		b.proxy, err = egress.New(egress.Config{Allow: p.Network.Allow, Open: p.Network.Open, Credentials: p.Network.Credentials,
			Policy: p.Network.Policy, Widen: p.Network.Widen,
			Placeholder: placeholder, Log: p.evidence(out)})
		if err != nil {
			return nil, err
		}
		if err := b.listen("egress.sock", func(l net.Listener) error { return b.proxy.Serve(l) }); err != nil {
			return nil, err
		}
		b.init = append(b.init, "--bridge", ProxyAddr+"="+runDir+"/egress.sock", "--proxy", ProxyAddr)
		for i, c := range p.Network.Credentials {
			name := "credential-" + strconv.Itoa(i) + ".sock"
			if err := b.listen(name, func(l net.Listener) error { return b.proxy.ServeCredential(i, l) }); err != nil {
				return nil, err
			}
			b.init = append(b.init, "--bridge", credentialAddr(i)+"="+runDir+"/"+name)
			b.env = append(b.env, c.KeyEnv+"="+placeholder, c.BaseURLEnv+"=http://"+credentialAddr(i))
		}
	}
	for i, s := range p.Sockets {
		inside, err := touch("socket-" + strconv.Itoa(i) + ".sock")
		if err != nil {
			return nil, err
		}
		b.binds = append(b.binds, [2]string{s.Path, inside})
		b.init = append(b.init, "--bridge", s.Addr+"="+inside)
	}
	b.init = append(b.init, "--")
	return b, nil
}

func (b *bridgePlan) listen(name string, serve func(net.Listener) error) error {
	l, err := net.Listen("unix", filepath.Join(b.dir, name))
	if err != nil {
		return fmt.Errorf("listen for the sandbox: %w", err)
	}
	go serve(l) // returns when the proxy is closed
	return nil
}

// close stops the proxy and removes the socket directory.
func (b *bridgePlan) close() error {
	if b.closed {
		return nil
	}
	b.closed = true
	var errs []error
	if b.proxy != nil {
		errs = append(errs, b.proxy.Close())
	}
	if err := os.RemoveAll(b.dir); err != nil {
		errs = append(errs, fmt.Errorf("remove the sandbox's socket directory: %w", err))
	}
	return errors.Join(errs...)
}
