package sandbox

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"
)

// The test binary doubles as drover's sandbox init (as the drover binary
// does in production) and as the attacker's toolbox inside sandboxes, so
// that attacks do not depend on what the host happens to have installed.
func TestMain(m *testing.M) {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "sandbox-init":
			os.Exit(Init(context.Background(), os.Args[2:], os.Stderr))
		case "attack":
			os.Exit(attack(os.Args[2:]))
		}
	}
	os.Exit(m.Run())
}

func quiet() *slog.Logger { return slog.New(slog.DiscardHandler) }

// attack runs one network probe from inside a sandbox and prints what
// happened; it exits 0 only when the probe got through.
//
//	connect ADDR            a direct TCP connection
//	get URL [HEADER: VALUE] a direct HTTP GET (no proxy)
//	proxy-get URL           a plain-http GET through $HTTP_PROXY
//	proxy-connect HOST:PORT a CONNECT through $HTTPS_PROXY, then a line echoed
func attack(args []string) int {
	if len(args) < 2 {
		fmt.Println("attack: want a probe and a target")
		return 2
	}
	d := net.Dialer{Timeout: 5 * time.Second}
	switch args[0] {
	case "connect":
		c, err := d.Dial("tcp", args[1])
		if err != nil {
			fmt.Println("connect failed:", err)
			return 1
		}
		c.Close()
		fmt.Println("connected to", args[1])
		return 0
	case "get":
		req, err := http.NewRequest(http.MethodGet, args[1], nil)
		if err != nil {
			fmt.Println(err)
			return 2
		}
		if len(args) > 2 {
			k, v, _ := strings.Cut(args[2], ": ")
			req.Header.Set(k, v)
		}
		c := &http.Client{Transport: &http.Transport{Proxy: nil}, Timeout: 10 * time.Second}
		return show(c.Do(req))
	case "proxy-get":
		pu, err := url.Parse(os.Getenv("HTTP_PROXY"))
		if err != nil || pu.Host == "" {
			fmt.Println("no HTTP_PROXY")
			return 2
		}
		// Explicitly: Go's own proxy selection never proxies loopback.
		c := &http.Client{Transport: &http.Transport{Proxy: http.ProxyURL(pu)}, Timeout: 10 * time.Second}
		return show(c.Get(args[1]))
	case "proxy-connect":
		pu, err := url.Parse(os.Getenv("HTTPS_PROXY"))
		if err != nil || pu.Host == "" {
			fmt.Println("no HTTPS_PROXY")
			return 2
		}
		c, err := d.Dial("tcp", pu.Host)
		if err != nil {
			fmt.Println("proxy unreachable:", err)
			return 1
		}
		defer c.Close()
		fmt.Fprintf(c, "CONNECT %s HTTP/1.1\r\nHost: %s\r\n\r\n", args[1], args[1])
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: http.MethodConnect})
		if err != nil {
			fmt.Println("CONNECT failed:", err)
			return 1
		}
		if resp.StatusCode != http.StatusOK {
			body, _ := io.ReadAll(resp.Body)
			fmt.Printf("CONNECT refused: %s %s\n", resp.Status, body)
			return 1
		}
		fmt.Fprintln(c, "ping")
		line, err := br.ReadString('\n')
		fmt.Printf("tunnel echoed %q (%v)\n", line, err)
		return 0
	}
	fmt.Println("attack: unknown probe", args[0])
	return 2
}

func show(resp *http.Response, err error) int {
	if err != nil {
		fmt.Println("request failed:", err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	fmt.Printf("status %d: %s\n", resp.StatusCode, strings.TrimSpace(string(body)))
	if resp.StatusCode != http.StatusOK {
		return 1
	}
	return 0
}
