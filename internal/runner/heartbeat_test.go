package runner

import (
	"bytes"
	"net"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"drover/internal/protocol"
	"drover/internal/sandbox/sandboxtest"

	"github.com/coder/websocket"
)

// A runner holding no attempts heartbeats at the idle interval its hub
// offers, with the idle heartbeat, and does not ping (each frame wakes the
// hub); once it holds an attempt it heartbeats every interval and pings.
func TestIdleRunnerHeartbeatsSeldomWithoutPings(t *testing.T) {
	h := newFakeHub(t)
	h.welcome.IdleHeartbeatInterval = protocol.Duration(10 * h.welcome.HeartbeatInterval.D())
	startRunner(t, h, "", nil)
	h.waitConn(0)
	sandboxtest.WaitFor(t, "three idle heartbeats", func() bool { return len(h.received(protocol.TypeHeartbeat)) >= 3 })
	idle := protocol.IdleHeartbeatFrame().Body
	for _, g := range h.received(protocol.TypeHeartbeat) {
		if !bytes.Equal(g.f.Body, idle) {
			t.Fatalf("an idle runner sent heartbeat %s, want only idle ones", g.f.Body)
		}
	}
	if n := h.pingCount(); n != 0 {
		t.Fatalf("an idle runner with one hub pinged it %d times", n)
	}

	ref := newRef()
	h.offer(ref, shSpec("sleep 60"))
	sandboxtest.WaitFor(t, "heartbeats and pings while holding an attempt", func() bool {
		regular := 0
		for _, g := range h.received(protocol.TypeHeartbeat) {
			if len(g.f.Body) == 0 {
				regular++
			}
		}
		return regular >= 3 && h.pingCount() >= 2
	})
}

// Which heartbeat a tick sends: the regular one while holding attempts or
// when the hub offers no idle interval (an older hub), else the idle one
// once its interval has nearly passed, and at once after another frame.
func TestHeartbeatDue(t *testing.T) {
	const hb, idle = 20 * time.Second, 2 * time.Minute
	now := time.Now()
	for _, c := range []struct {
		name     string
		idle     time.Duration
		holds    bool
		lastIdle time.Time
		want     string // "": none due
	}{
		{"older hub", 0, false, time.Time{}, "regular"},
		{"holding an attempt", idle, true, now.Add(-time.Second), "regular"},
		{"idle, after another frame", idle, false, time.Time{}, "idle"},
		{"idle, one interval after an idle one", idle, false, now.Add(-hb), ""},
		{"idle, nearly the idle interval after", idle, false, now.Add(-idle + hb/2), "idle"},
	} {
		t.Run(c.name, func(t *testing.T) {
			r := &Runner{timing: timing{heartbeat: hb, idle: c.idle}, attempts: map[string]*attempt{}}
			if c.holds {
				r.attempts["a-1"] = &attempt{}
			}
			f, due := r.heartbeatDue(hb, c.lastIdle, now)
			got := ""
			switch {
			case due && len(f.Body) > 0:
				got = "idle"
			case due:
				got = "regular"
			}
			if got != c.want || (due && f.Type != protocol.TypeHeartbeat) {
				t.Fatalf("got %q (%+v), want %q", got, f, c.want)
			}
		})
	}
}

// The hub's connection is dialed with a TCP keepalive, so that a hub whose
// host vanished is noticed without pings.
func TestHubDialerKeepsAlive(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	conn, err := hubDialer(20*time.Second).DialContext(t.Context(), "tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	checkTCPTimeouts(t, conn.(*net.TCPConn), 45*time.Second, time.Minute)
}

// While nothing listens at the hub's address (a hub restarting), the
// runner's backoff stays within protocol.NotListeningCeiling, so that the
// fleet is back soon after the hub listens again.
func TestReconnectToAHubNotListening(t *testing.T) {
	h := newFakeHub(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := "http://" + ln.Addr().String()
	ln.Close()
	for i, c := range firstDialCeilings(t, h, dead) {
		if c > protocol.NotListeningCeiling {
			t.Fatalf("backoff ceiling %v after %d dials refused; want at most %v", c, i+1, protocol.NotListeningCeiling)
		}
	}
}

// A hub that takes the dial and then closes it with 1013 (busy with other
// hellos, or stopping) is up: the runner comes back within
// protocol.TryAgainCeiling, not after the backoff its failed dials grew
// (towards a minute), which once left runners away from an idle hub.
func TestReconnectAfterTryAgainLater(t *testing.T) {
	h := newFakeHub(t)
	busy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ws, err := websocket.Accept(w, r, nil)
		if err != nil {
			return
		}
		_, _, _ = ws.Read(r.Context()) // the hello
		ws.Close(websocket.StatusTryAgainLater, "hub busy with other runners' hellos; reconnect later")
	}))
	t.Cleanup(busy.Close)
	for i, c := range firstDialCeilings(t, h, busy.URL) {
		if c > protocol.TryAgainCeiling {
			t.Fatalf("backoff ceiling %v after %d hellos closed with 1013; want at most %v", c, i+1, protocol.TryAgainCeiling)
		}
	}
}

// firstDialCeilings runs a runner logged in to hub and returns the backoff
// ceilings of its first eight reconnects (each wait cut to 1 ms).
func firstDialCeilings(t *testing.T, h *fakeHub, hub string) []time.Duration {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	must(t, SaveLogin(home, Login{Hub: hub, Name: "r1", Token: h.token}))
	var mu sync.Mutex
	var ceilings []time.Duration
	startRunner(t, h, home, nil, func(r *Runner) {
		r.jitter = func(c time.Duration) time.Duration {
			mu.Lock()
			defer mu.Unlock()
			ceilings = append(ceilings, c)
			return time.Millisecond
		}
	})
	sandboxtest.WaitFor(t, "eight dials", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(ceilings) >= 8
	})
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(ceilings[:8])
}
