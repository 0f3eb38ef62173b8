package hub

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/protocol"
)

// serve runs the hub's own server (Serve, with the timeouts of its
// Config) on a loopback port beside the test server, and returns its URL.
func (th *testHub) serve() string {
	th.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		th.t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	h := th.h
	go func() { done <- h.Serve(ctx, ln) }()
	th.t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			th.t.Errorf("serve: %v", err)
		}
	})
	return "http://" + ln.Addr().String()
}

// needFiles makes sure the process may hold n more file descriptors,
// raising its soft limit when the hard one allows.
func needFiles(t *testing.T, n uint64) {
	t.Helper()
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	ents, _ := os.ReadDir("/proc/self/fd")
	want := uint64(len(ents)) + n
	if lim.Cur >= want {
		return
	}
	if lim.Max < want {
		t.Fatalf("this test holds %d connections and needs %d file descriptors; the hard limit is %d (raise it: ulimit -Hn)", n/2, want, lim.Max)
	}
	old := lim
	lim.Cur = want
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

// The server closes idle keep-alive connections, whether their request was
// authenticated or not, and connections that never sent one.
func TestIdleConnectionsAreClosed(t *testing.T) {
	const n = 1000
	needFiles(t, 2*n+64) // both ends of every connection are in this process
	// Headers get longer than idleness, so that a loaded machine's pause
	// between a dial and its request does not close the connection first.
	th := startHub(t, Config{IdleTimeout: 300 * time.Millisecond, ReadHeaderTimeout: 2 * time.Second})
	base := th.serve()
	addr := strings.TrimPrefix(base, "http://")

	type idle struct {
		c  net.Conn
		br *bufio.Reader
	}
	conns := make([]idle, 0, n)
	defer func() {
		for _, c := range conns {
			c.c.Close()
		}
	}()
	kinds := []string{"authenticated", "unauthenticated", "silent"}
	for i := range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, idle{c, bufio.NewReader(c)})
		kind := kinds[i%len(kinds)]
		if kind == "silent" {
			continue
		}
		auth := ""
		if kind == "authenticated" {
			auth = "Authorization: Bearer " + th.admin + "\r\n"
		}
		fmt.Fprintf(c, "GET %s/whoami HTTP/1.1\r\nHost: hub\r\n%s\r\n", apitypes.APIPrefix, auth)
		resp, err := http.ReadResponse(conns[i].br, nil)
		if err != nil {
			t.Fatalf("connection %d (%s): %v", i, kind, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		want := http.StatusOK
		if kind == "unauthenticated" {
			want = http.StatusUnauthorized
		}
		if resp.StatusCode != want || resp.Close {
			t.Fatalf("connection %d (%s): %s, close %v; want %d on a kept-alive connection", i, kind, resp.Status, resp.Close, want)
		}
	}
	// Every one is closed by the server: a read gets EOF, long before the
	// generous deadline.
	deadline := time.Now().Add(60 * time.Second)
	closed := map[string]int{}
	for i, c := range conns {
		c.c.SetReadDeadline(deadline)
		b, err := c.br.ReadByte()
		if !errors.Is(err, io.EOF) {
			t.Fatalf("connection %d (%s): read %q, %v; want EOF", i, kinds[i%len(kinds)], b, err)
		}
		closed[kinds[i%len(kinds)]]++
	}
	if closed["authenticated"]+closed["unauthenticated"]+closed["silent"] != n {
		t.Fatalf("closed %v of %d", closed, n)
	}
}

// A log follow waits longer than every timeout and still gets its answer.
func TestLogFollowOutlastsTheTimeouts(t *testing.T) {
	const d = 200 * time.Millisecond
	th := startHub(t, Config{IdleTimeout: d, ReadTimeout: d, ReadHeaderTimeout: 10 * d})
	base := th.serve()
	sr, _ := th.dial(th.registerRunner("r1"), protocol.Hello{})
	j := th.submit("true")
	o := sr.offer()
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	got := th.follow(base, j.ID, "20000", func(status int, body, complete string) string {
		return fmt.Sprintf("%d %s|%s", status, body, complete)
	})
	th.waitFollowing(t, j.ID)
	time.Sleep(5 * d) // let every timeout pass while it waits
	wantOK(t, sr.request(protocol.TypeLog, protocol.Log{AttemptRef: o.AttemptRef, Data: []byte("hello")}))
	if s := <-got; s != "200 hello|false" {
		t.Fatalf("follow got %q", s)
	}
}

// A runner's WebSocket outlives the idle and read timeouts.
func TestRunnerConnectionOutlastsTheTimeouts(t *testing.T) {
	const d = 200 * time.Millisecond
	th := startHub(t, Config{IdleTimeout: d, ReadTimeout: d, ReadHeaderTimeout: 10 * d})
	base := th.serve()
	sr, _ := th.dialURL(base, th.registerRunner("r1"), protocol.Hello{})
	time.Sleep(5 * d) // no frame in either direction meanwhile (heartbeats are every 10 s)
	j := th.submit("true")
	o := sr.offer()
	if o.Job != j.ID {
		t.Fatalf("offer for %s", o.Job)
	}
	runToEnd(t, sr, o, "out\n", 0)
	if v := th.job(j.ID); v.State != "completed" || v.Runner != "r1" {
		t.Fatalf("job over the long-lived connection: %+v", v)
	}
}

// postSlowly sends a request whose body arrives in pieces, pause apart,
// and returns the answer. With stall the last piece is never sent.
func postSlowly(t *testing.T, addr, path, token string, body []byte, pieces int, pause time.Duration, stall bool) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: hub\r\nAuthorization: Bearer %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", path, token, len(body))
	size := (len(body) + pieces - 1) / pieces
	for i := 0; len(body) > 0 && !(stall && len(body) <= size); i++ {
		if i > 0 {
			time.Sleep(pause)
		}
		k := min(size, len(body))
		if _, err := c.Write(body[:k]); err != nil {
			t.Fatalf("write piece %d: %v", i, err)
		}
		body = body[k:]
	}
	c.SetReadDeadline(time.Now().Add(60 * time.Second))
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("read the answer: %v", err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A body that keeps arriving is read however long it takes in all; one
// that stops for longer than the read timeout is cut off.
func TestSlowBodiesArePacedNotCut(t *testing.T) {
	const d = 2 * time.Second
	th := startHub(t, Config{ReadTimeout: d})
	addr := strings.TrimPrefix(th.serve(), "http://")
	args := strings.Repeat(`"x",`, 200)
	body := []byte(`{"agent":"exec","args":[` + args + `"true"]}`)
	// 120 pieces an 80th of the timeout apart (room for a loaded machine):
	// the whole body takes half as long again as the timeout.
	if code, b := postSlowly(t, addr, apitypes.APIPrefix+"/jobs", th.admin, body, 120, d/80, false); code != http.StatusCreated {
		t.Fatalf("a slow but steady body: %d %s", code, b)
	}
	before := th.dbDump()
	code, b := postSlowly(t, addr, apitypes.APIPrefix+"/jobs", th.admin, body, 2, 0, true)
	if code != http.StatusBadRequest || !strings.Contains(b, "read the request body") {
		t.Fatalf("a stalled body: %d %s", code, b)
	}
	if after := th.dbDump(); after != before {
		t.Fatalf("a stalled body changed the database: %s", firstDiff(before, after))
	}
}

// A handler that runs on after reading its body is not cancelled by the
// read timeout: once the body is read, net/http's background read watches
// the connection, and a deadline set then would end it.
func TestPacedReadsLeaveTheConnectionAfterTheBody(t *testing.T) {
	const d = 200 * time.Millisecond
	h := &Hub{cfg: Config{ReadTimeout: d}}
	srv := &http.Server{ReadTimeout: d, Handler: h.pacedReads(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		// Reading on past the end, as a decoder looking for more does.
		if n, err := r.Body.Read(make([]byte, 1)); n != 0 || err != io.EOF {
			http.Error(w, fmt.Sprintf("read past the end: %d, %v", n, err), http.StatusBadRequest)
			return
		}
		select {
		case <-time.After(5 * d): // as a git fetch streaming its pack would
			fmt.Fprintf(w, "read %d bytes", len(b))
		case <-r.Context().Done():
		}
	}))}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	defer srv.Close()
	for _, body := range []string{"", "some body"} {
		var rd io.Reader
		if body != "" {
			rd = strings.NewReader(body)
		}
		resp, err := http.Post("http://"+ln.Addr().String(), "text/plain", rd)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if want := fmt.Sprintf("read %d bytes", len(body)); string(b) != want {
			t.Errorf("body %q: got %d %q, want %q", body, resp.StatusCode, b, want)
		}
	}
}
