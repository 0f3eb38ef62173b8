package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"drover/internal/sandbox/egress"
)

// TestSandboxBench measures what the boundary costs, all in one run:
//
//	DROVER_SANDBOX_BENCH=1 go test ./internal/sandbox -run TestSandboxBench -v -count=1
//
// DROVER_SANDBOX_BENCH_N sets the runs per variant (default 1000). It is
// skipped otherwise: it takes tens of seconds and asserts nothing.
func TestSandboxBench(t *testing.T) {
	if os.Getenv("DROVER_SANDBOX_BENCH") == "" {
		t.Skip("set DROVER_SANDBOX_BENCH=1 to measure")
	}
	n := 1000
	if v, err := strconv.Atoi(os.Getenv("DROVER_SANDBOX_BENCH_N")); err == nil && v > 0 {
		n = v
	}
	t.Run("commands", func(t *testing.T) { benchCommands(t, n) })
	t.Run("egress", func(t *testing.T) { benchEgress(t, n) })
}

type samples []time.Duration

func (s samples) pct(p float64) time.Duration {
	c := slices.Clone(s)
	slices.Sort(c)
	return c[int(float64(len(c)-1)*p)]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d)/float64(time.Millisecond)) }

func benchCommands(t *testing.T, n int) {
	root := t.TempDir()
	tru, err := exec.LookPath("true")
	must(t, err)
	// Without limits the boundary uses no cgroup; with the default pids
	// limit a root runner on a cgroup v1 host moves each sandbox into a
	// pids cgroup, which the kernel makes wait for an RCU grace period.
	bw, err := New(context.Background(), Policy{Kind: KindBwrap, Root: root, Logger: quiet()})
	must(t, err)
	pol := Policy{Kind: KindBwrap, Root: root, Limits: DefaultLimits(), Logger: quiet()}
	limited, err := New(context.Background(), pol)
	must(t, err)
	none, err := New(context.Background(), Policy{Kind: KindNone, Root: root, Logger: quiet()})
	must(t, err)
	raw := bw.(*bwrapBox)
	rawArgs := raw.args(root, nil, false, []string{tru})
	spec := Spec{Dir: root, Argv: []string{"true"}, Env: testEnv}

	variants := []struct {
		name string
		run  func() error
	}{
		{"bare exec of true", func() error { return exec.Command(tru).Run() }},
		{"raw bwrap, same isolation", func() error {
			files, err := raw.dataFiles()
			if err != nil {
				return err
			}
			defer closeAll(files)
			cmd := exec.Command(raw.bin, rawArgs[1:]...)
			cmd.Env, cmd.ExtraFiles = []string{}, files
			return cmd.Run()
		}},
		{"drover bwrap boundary, rlimits only", func() error { return startWait(bw, spec) }},
		{"drover bwrap boundary, default limits: " + limited.Describe().Limits, func() error { return startWait(limited, spec) }},
		{"drover none boundary", func() error { return startWait(none, spec) }},
	}
	res := make([]samples, len(variants))
	for range n { // interleaved, so that drift hits every variant alike
		for i, v := range variants {
			start := time.Now()
			if err := v.run(); err != nil {
				t.Fatalf("%s: %v", v.name, err)
			}
			res[i] = append(res[i], time.Since(start))
		}
	}
	var news samples
	for range min(n, 200) {
		start := time.Now()
		if _, err := New(context.Background(), pol); err != nil {
			t.Fatal(err)
		}
		news = append(news, time.Since(start))
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| per command (`true`), %d runs each | p50 | p90 | p99 |\n|---|---|---|---|\n", n)
	for i, v := range variants {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", v.name, ms(res[i].pct(.5)), ms(res[i].pct(.9)), ms(res[i].pct(.99)))
	}
	fmt.Fprintf(&b, "| New(bwrap) per attempt (%d runs) | %s | %s | %s |\n", len(news), ms(news.pct(.5)), ms(news.pct(.9)), ms(news.pct(.99)))
	fmt.Fprintf(&b, "\ndrover's bwrap boundary adds %s at p50 to the raw bwrap call (%s with the default limits)\n",
		ms(res[2].pct(.5)-res[1].pct(.5)), ms(res[3].pct(.5)-res[1].pct(.5)))
	t.Log(b.String())
	t.Logf("isolation: %+v", limited.Describe())
}

func startWait(b Boundary, s Spec) error {
	p, err := b.Start(context.Background(), s)
	if err != nil {
		return err
	}
	ex, err := p.Wait()
	if err == nil && ex.Code != 0 {
		err = fmt.Errorf("exit %+v", ex)
	}
	return err
}

func benchEgress(t *testing.T, n int) {
	// The "upstream": a loopback HTTP server and a loopback byte sink.
	srv := httpHost(t, "127.0.0.1", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok") }))
	sink, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer sink.Close()
	go func() {
		for {
			c, err := sink.Accept()
			if err != nil {
				return
			}
			go func() { io.Copy(io.Discard, c); c.Close() }()
		}
	}()
	p, err := egress.New(egress.Config{Allow: []string{srv, sink.Addr().String()}})
	must(t, err)
	defer p.Close()
	sock := filepath.Join(t.TempDir(), "egress.sock")
	l, err := net.Listen("unix", sock)
	must(t, err)
	go p.Serve(l)
	// The bridge as the sandbox's init runs it: loopback TCP → unix socket.
	bl, err := net.Listen("tcp", "127.0.0.1:0")
	must(t, err)
	defer bl.Close()
	go serveBridge(context.Background(), bl, sock)

	direct := &http.Client{Transport: &http.Transport{Proxy: nil}}
	viaSock := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: "proxy"}),
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return (&net.Dialer{}).DialContext(ctx, "unix", sock)
		}}}
	viaBridge := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(&url.URL{Scheme: "http", Host: bl.Addr().String()})}}
	get := func(c *http.Client) error {
		resp, err := c.Get("http://" + srv + "/")
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		return resp.Body.Close()
	}
	connect := func(proxy string) error {
		c, err := net.Dial("tcp", proxy)
		if err != nil {
			return err
		}
		defer c.Close()
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", srv, srv)
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
		if err != nil {
			return err
		}
		if resp.StatusCode != 200 {
			return fmt.Errorf("CONNECT: %s", resp.Status)
		}
		return nil
	}
	variants := []struct {
		name string
		run  func() error
	}{
		{"GET, direct (keep-alive)", func() error { return get(direct) }},
		{"GET through the proxy's unix socket (keep-alive)", func() error { return get(viaSock) }},
		{"GET through bridge + proxy (keep-alive), as inside a sandbox", func() error { return get(viaBridge) }},
		{"new TCP connection, direct", func() error {
			c, err := net.Dial("tcp", srv)
			if err == nil {
				c.Close()
			}
			return err
		}},
		{"new CONNECT tunnel through bridge + proxy", func() error { return connect(bl.Addr().String()) }},
	}
	res := make([]samples, len(variants))
	for range n {
		for i, v := range variants {
			start := time.Now()
			if err := v.run(); err != nil {
				t.Fatalf("%s: %v", v.name, err)
			}
			res[i] = append(res[i], time.Since(start))
		}
	}
	var b strings.Builder
	fmt.Fprintf(&b, "\n| per request, %d each | p50 | p90 | p99 |\n|---|---|---|---|\n", n)
	for i, v := range variants {
		fmt.Fprintf(&b, "| %s | %s | %s | %s |\n", v.name, ms(res[i].pct(.5)), ms(res[i].pct(.9)), ms(res[i].pct(.99)))
	}
	const size = 1 << 30
	for _, tp := range []struct{ name, addr string }{{"direct loopback TCP", sink.Addr().String()}, {"CONNECT tunnel through bridge + proxy", bl.Addr().String()}} {
		c, err := net.Dial("tcp", tp.addr)
		must(t, err)
		if tp.addr == bl.Addr().String() {
			fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: x\r\n\r\n", sink.Addr())
			resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: http.MethodConnect})
			must(t, err)
			if resp.StatusCode != 200 {
				t.Fatal(resp.Status)
			}
		}
		buf := make([]byte, 256<<10)
		start := time.Now()
		for sent := 0; sent < size; sent += len(buf) {
			_, err := c.Write(buf)
			must(t, err)
		}
		c.Close()
		fmt.Fprintf(&b, "\nthroughput, %s: %.0f MiB/s (1 GiB)", tp.name, float64(size>>20)/time.Since(start).Seconds())
	}
	t.Log(b.String())
}
