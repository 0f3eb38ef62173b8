package testkit

import (
	"io"
	"net"
	"sync"
	"testing"
	"time"
)

// Proxy is a loopback TCP proxy that can cut every connection through it,
// to test what happens to requests in flight when a network drops.
type Proxy struct {
	URL    string
	ln     net.Listener
	target string

	mu    sync.Mutex
	conns map[net.Conn]bool
	cuts  int
	done  chan struct{}
	wg    sync.WaitGroup
}

// NewProxy forwards a loopback port to target (host:port).
func NewProxy(t testing.TB, target string) *Proxy {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &Proxy{URL: "http://" + ln.Addr().String(), ln: ln, target: target, conns: map[net.Conn]bool{}, done: make(chan struct{})}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.Close)
	return p
}

func (p *Proxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			c.Close()
			continue
		}
		p.mu.Lock()
		p.conns[c], p.conns[up] = true, true
		p.mu.Unlock()
		pipe := func(dst, src net.Conn) {
			_, _ = io.Copy(dst, src)
			dst.Close()
			src.Close()
			p.mu.Lock()
			delete(p.conns, dst)
			delete(p.conns, src)
			p.mu.Unlock()
		}
		go pipe(c, up)
		go pipe(up, c)
	}
}

// Cut closes every open connection through the proxy at once.
func (p *Proxy) Cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for c := range p.conns {
		c.Close()
		n++
	}
	if n > 0 {
		p.cuts++
	}
	return n
}

// CutEvery cuts all connections every d until the proxy closes or stop is
// called.
func (p *Proxy) CutEvery(d time.Duration) (stop func()) {
	quit := make(chan struct{})
	var once sync.Once
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		t := time.NewTicker(d)
		defer t.Stop()
		for {
			select {
			case <-quit:
				return
			case <-p.done:
				return
			case <-t.C:
				p.Cut()
			}
		}
	}()
	return func() { once.Do(func() { close(quit) }) }
}

// Cuts is how many times live connections were cut.
func (p *Proxy) Cuts() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.cuts
}

// Close stops the proxy and cuts everything.
func (p *Proxy) Close() {
	select {
	case <-p.done:
		return
	default:
	}
	close(p.done)
	p.ln.Close()
	p.Cut()
	p.wg.Wait()
}
