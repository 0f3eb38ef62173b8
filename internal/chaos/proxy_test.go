package chaos

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"
)

// echoThroughProxy starts a WebSocket server that answers every message m
// with {"type":"reply","m":m} (and offers compression, which the proxy must
// refuse), and a proxy in front of it; it returns the proxy, a client
// connected through it, and what the server received.
func echoThroughProxy(t *testing.T) (*proxy, *websocket.Conn, chan string) {
	t.Helper()
	got := make(chan string, 16)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionContextTakeover})
		if err != nil {
			return
		}
		defer ws.CloseNow()
		for {
			_, b, err := ws.Read(r.Context())
			if err != nil {
				return
			}
			got <- string(b)
			if err := ws.Write(r.Context(), websocket.MessageText, []byte(`{"type":"reply","m":"`+string(b)+`"}`)); err != nil {
				return
			}
		}
	}))
	t.Cleanup(srv.Close)
	p, err := newProxy(strings.TrimPrefix(srv.URL, "http://"), slog.New(slog.NewTextHandler(io.Discard, nil)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.close)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(p.url(), "http"), &websocket.DialOptions{CompressionMode: websocket.CompressionContextTakeover})
	if err != nil {
		t.Fatal(err)
	}
	if ext := resp.Header.Get("Sec-WebSocket-Extensions"); ext != "" {
		t.Fatalf("compression got through the proxy: %q", ext)
	}
	t.Cleanup(func() { ws.CloseNow() })
	return p, ws, got
}

func roundTrip(t *testing.T, ws *websocket.Conn, m string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := ws.Write(ctx, websocket.MessageText, []byte(m)); err != nil {
		return "", err
	}
	_, b, err := ws.Read(ctx)
	return string(b), err
}

func TestProxyDuplicatesAFrame(t *testing.T) {
	p, ws, got := echoThroughProxy(t)
	p.arm(armed{kind: faultDuplicate})
	if _, err := roundTrip(t, ws, "one"); err != nil {
		t.Fatal(err)
	}
	if a, b := <-got, <-got; a != "one" || b != "one" {
		t.Fatalf("the server got %q and %q, want the frame twice", a, b)
	}
	if n := p.appliedCounts()[FaultDuplicate]; n != 1 {
		t.Fatalf("duplicate applied %d times", n)
	}
}

// TestProxyDropsAReplyTheServerSent: the request reached the server, its
// answer never reaches the client, and the connection goes.
func TestProxyDropsAReplyTheServerSent(t *testing.T) {
	p, ws, got := echoThroughProxy(t)
	if r, err := roundTrip(t, ws, "first"); err != nil || !strings.Contains(r, "first") {
		t.Fatalf("before the fault: %q, %v", r, err)
	}
	<-got
	p.arm(armed{kind: faultDropReply})
	if r, err := roundTrip(t, ws, "second"); err == nil {
		t.Fatalf("the dropped reply arrived: %q", r)
	}
	if m := <-got; m != "second" {
		t.Fatalf("the server got %q, want the request it answered", m)
	}
	if n := p.appliedCounts()[FaultDropReply]; n != 1 {
		t.Fatalf("drop-reply applied %d times", n)
	}
}

func TestProxyDelaysAFrameAndCuts(t *testing.T) {
	p, ws, _ := echoThroughProxy(t)
	p.arm(armed{kind: faultDelay, delay: time.Millisecond})
	if r, err := roundTrip(t, ws, "slow"); err != nil || !strings.Contains(r, "slow") {
		t.Fatalf("delayed frame: %q, %v", r, err)
	}
	if n := p.cut(); n != 1 {
		t.Fatalf("cut %d connections, want 1", n)
	}
	if _, err := roundTrip(t, ws, "after"); err == nil {
		t.Fatal("the connection survived a cut")
	}
}
