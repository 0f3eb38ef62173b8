package egress

import (
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"testing"
)

// The proxy's overhead on a large dependency download: the same 64 MiB
// over plain HTTP from a loopback server, directly and through the proxy
// (its unix socket, as a sandbox's bridge reaches it). docs/benchmarks.md
// has the command and a result.

const benchDownload = 64 << 20

func downloadServer(b *testing.B, tls bool) *httptest.Server {
	b.Helper()
	chunk := make([]byte, 1<<20)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Length", strconv.Itoa(benchDownload))
		for n := 0; n < benchDownload; n += len(chunk) {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})
	srv := httptest.NewUnstartedServer(h)
	if tls {
		srv.StartTLS()
	} else {
		srv.Start()
	}
	b.Cleanup(srv.Close)
	return srv
}

func download(b *testing.B, c *http.Client, u string) {
	b.Helper()
	b.SetBytes(benchDownload)
	for b.Loop() {
		resp, err := c.Get(u)
		if err != nil {
			b.Fatal(err)
		}
		n, err := io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || n != benchDownload {
			b.Fatalf("downloaded %d bytes: %v", n, err)
		}
	}
}

func BenchmarkDownloadDirect(b *testing.B) {
	srv := downloadServer(b, false)
	download(b, &http.Client{Transport: &http.Transport{}}, srv.URL+"/big.tgz")
}

// BenchmarkDownloadThroughProxy: plain HTTP, forwarded by the proxy.
func BenchmarkDownloadThroughProxy(b *testing.B) {
	srv := downloadServer(b, false)
	download(b, &http.Client{Transport: proxied(b, srv, nil)}, srv.URL+"/big.tgz")
}

// BenchmarkDownloadHTTPSDirect and ...Tunnel: HTTPS (how registries are
// reached), directly and through the proxy's CONNECT tunnel.
func BenchmarkDownloadHTTPSDirect(b *testing.B) {
	srv := downloadServer(b, true)
	tr := srv.Client().Transport.(*http.Transport).Clone()
	download(b, &http.Client{Transport: tr}, srv.URL+"/big.tgz")
}

func BenchmarkDownloadHTTPSTunnel(b *testing.B) {
	srv := downloadServer(b, true)
	tls := srv.Client().Transport.(*http.Transport).TLSClientConfig
	download(b, &http.Client{Transport: proxied(b, srv, tls)}, srv.URL+"/big.tgz")
}

// proxied is a transport whose proxy is an egress proxy that allows srv.
func proxied(b *testing.B, srv *httptest.Server, tls *tls.Config) *http.Transport {
	b.Helper()
	p, err := New(Config{Allow: []string{srv.Listener.Addr().String()}})
	if err != nil {
		b.Fatal(err)
	}
	sock := serveB(b, p)
	proxyURL, _ := url.Parse("http://egress.invalid")
	tr := &http.Transport{
		Proxy: http.ProxyURL(proxyURL),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		},
		TLSClientConfig: tls,
	}
	b.Cleanup(tr.CloseIdleConnections)
	return tr
}

// serveB is serve for benchmarks.
func serveB(b *testing.B, p *Proxy) string {
	b.Helper()
	l, err := net.Listen("unix", b.TempDir()+"/egress.sock")
	if err != nil {
		b.Fatal(err)
	}
	go p.Serve(l)
	b.Cleanup(func() { p.Close() })
	return l.Addr().String()
}
