package fleet

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/hashicorp/yamux"

	"drover/internal/auth"
)

// The ssh target's transport. The far side (`drover runner --stdio`)
// serves a loopback listener whose every connection (the runner's
// WebSocket, its HTTP requests, git's fetches) becomes one stream of a
// yamux session over the SSH channel's stdin and stdout; the near side
// dials each stream on to the hub. The far host needs no route to the hub.
//
// Before the session the near side writes one line: the runner's
// registration token, or an empty line once it has a login.

const maxTokenLine = 256

func yamuxConfig(log *slog.Logger) *yamux.Config {
	c := yamux.DefaultConfig()
	c.LogOutput = nil
	c.Logger = slog.NewLogLogger(log.Handler(), slog.LevelWarn)
	c.KeepAliveInterval = 15 * time.Second
	c.ConnectionWriteTimeout = 30 * time.Second
	return c
}

// stdioConn is the SSH channel's two ends as one stream for yamux.
type stdioConn struct {
	io.Reader
	io.Writer
	close func() error
}

func (c stdioConn) Close() error { return c.close() }

// FarTunnel is the far side: the URL the runner uses as its hub's.
type FarTunnel struct {
	URL   string
	Token string // the registration token the near side sent ("" for none)
	ln    net.Listener
	sess  *yamux.Session
	wg    sync.WaitGroup
}

// OpenFarTunnel reads the token line from in, then serves the tunnel.
func OpenFarTunnel(in io.Reader, out io.WriteCloser, log *slog.Logger) (*FarTunnel, error) {
	br := bufio.NewReaderSize(in, maxTokenLine)
	line, err := br.ReadSlice('\n')
	if err != nil {
		return nil, fmt.Errorf("read the tunnel's first line: %w", err)
	}
	tok := strings.TrimSpace(string(line))
	if tok != "" && !strings.HasPrefix(tok, auth.PrefixRegistration) {
		return nil, errors.New("the tunnel's first line is no registration token")
	}
	sess, err := yamux.Client(stdioConn{Reader: br, Writer: out, close: out.Close}, yamuxConfig(log))
	if err != nil {
		return nil, fmt.Errorf("start the tunnel: %w", err)
	}
	// Loopback only: the listener carries this process's connections to
	// the hub, where each still needs the runner's token.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		sess.Close()
		return nil, fmt.Errorf("listen for the tunnel: %w", err)
	}
	t := &FarTunnel{URL: "http://" + ln.Addr().String(), Token: tok, ln: ln, sess: sess}
	t.wg.Go(func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			t.wg.Go(func() {
				s, err := sess.Open()
				if err != nil {
					c.Close()
					return
				}
				splice(c, s)
			})
		}
	})
	return t, nil
}

// Done is closed when the session ends (the SSH channel closed).
func (t *FarTunnel) Done() <-chan struct{} { return t.sess.CloseChan() }

// Close ends the listener and the session.
func (t *FarTunnel) Close() error {
	err := errors.Join(t.ln.Close(), t.sess.Close())
	t.wg.Wait()
	return err
}

// ServeNear is the near side of one session over the ssh process's stdout
// (in) and stdin (out): it writes the token line, then dials hubAddr for
// every stream until the session ends or ctx does.
func ServeNear(ctx context.Context, in io.Reader, out io.WriteCloser, token, hubAddr string, log *slog.Logger) error {
	if _, err := io.WriteString(out, token+"\n"); err != nil {
		return fmt.Errorf("start the tunnel: %w", err)
	}
	sess, err := yamux.Server(stdioConn{Reader: in, Writer: out, close: out.Close}, yamuxConfig(log))
	if err != nil {
		return fmt.Errorf("start the tunnel: %w", err)
	}
	stop := context.AfterFunc(ctx, func() { sess.Close() })
	defer stop()
	var wg sync.WaitGroup
	defer wg.Wait()
	defer sess.Close()
	var d net.Dialer
	for {
		s, err := sess.Accept()
		if err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			return fmt.Errorf("tunnel session ended: %w", err)
		}
		wg.Go(func() {
			c, err := d.DialContext(ctx, "tcp", hubAddr)
			if err != nil {
				log.Warn("tunnel: cannot reach the hub", "addr", hubAddr, "err", err)
				s.Close()
				return
			}
			splice(s, c)
		})
	}
}

// splice copies both ways until either side ends, then closes both.
func splice(a, b net.Conn) {
	var once sync.Once
	done := func() { once.Do(func() { a.Close(); b.Close() }) }
	go func() { _, _ = io.Copy(a, b); done() }()
	_, _ = io.Copy(b, a)
	done()
}
