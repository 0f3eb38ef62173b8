package runner

// fakeHub is a scripted stand-in for the hub's runner gateway, so that the
// runner is tested against real sockets and real processes. Its requests
// go to the one fake of the protocol, protocoltest.Hub, through the same
// codec as the hub's (protocol.ServeFrame), so by default it behaves like a
// correct hub (offsets checked, each request id applied once, fencing,
// finishes checked against the log; protocoltest.Contract holds for both).
// This file adds only the transport: real sockets, frames recorded, and
// hooks that script failures.

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"drover/internal/apitypes"
	"drover/internal/auth"
	"drover/internal/protocol"
	"drover/internal/protocol/protocoltest"
	"drover/internal/rules"
	"drover/internal/sandbox/sandboxtest"
)

type fakeHub struct {
	t     *testing.T
	srv   *httptest.Server
	mux   *http.ServeMux // tests may add routes
	token string

	fake *protocoltest.Hub // the hub's state

	mu      sync.Mutex
	welcome protocol.Welcome
	reject  int             // HTTP status for dials; 0 accepts
	down    map[string]bool // hosts (of addPeer's servers) that refuse dials
	dials   int
	pings   int // WebSocket pings received
	conns   []*hubConn
	frames  []got
	// hook sees every request first; returning true means it handled it.
	hook func(c *hubConn, f protocol.Frame) bool
	// onWelcome may change the welcome of one connection.
	onWelcome func(c *hubConn, h protocol.Hello, w *protocol.Welcome)
	// refuseHello, when it returns a reason, closes the connection with
	// CloseRefused instead of welcoming it, as a hub refuses a hello.
	refuseHello func(h protocol.Hello) string
}

// got is one frame the hub received, on connection n (from 0).
type got struct {
	n int
	f protocol.Frame
}

type hubConn struct {
	h      *fakeHub
	n      int
	host   string // the server it was dialed on
	ws     *websocket.Conn
	closed chan struct{}
	status websocket.StatusCode // how the runner closed it, once closed
}

func newFakeHub(t *testing.T) *fakeHub {
	h := &fakeHub{
		t:     t,
		token: auth.NewToken(auth.PrefixRunner),
		welcome: protocol.Welcome{
			Protocol:          protocol.Version,
			RunnerID:          "rn-test",
			RunnerName:        "r1",
			HeartbeatInterval: protocol.Duration(50 * time.Millisecond),
			Lease:             protocol.Duration(time.Second),
			LogFlushInterval:  protocol.Duration(20 * time.Millisecond),
			LogBatchBytes:     1 << 10,
			LogChunkBytes:     64 << 10,
			LogCap:            protocol.DefaultLogCap,
		},
		fake: protocoltest.NewHub(),
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET "+apitypes.APIPrefix+"/runner/connect", h.serveConnect)
	h.mux = mux
	h.srv = httptest.NewServer(mux)
	t.Cleanup(h.srv.Close)
	return h
}

// addPeer serves the same hub on another address, as a second hub on the
// same database would: one state, two URLs.
func (h *fakeHub) addPeer() *httptest.Server {
	srv := httptest.NewServer(h.mux)
	h.t.Cleanup(srv.Close)
	return srv
}

// setDown makes the server at host refuse dials (a dead hub) or take them.
func (h *fakeHub) setDown(host string, down bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.down == nil {
		h.down = map[string]bool{}
	}
	h.down[host] = down
}

func (h *fakeHub) serveConnect(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	h.dials++
	reject := h.reject
	if h.down[r.Host] {
		reject = http.StatusServiceUnavailable
	}
	h.mu.Unlock()
	if tok, err := auth.BearerToken(r.Header.Get("Authorization")); err != nil || tok != h.token {
		reject = http.StatusUnauthorized
	}
	if reject != 0 {
		w.WriteHeader(reject)
		json.NewEncoder(w).Encode(apitypes.ErrorBody{Error: rules.Error{Code: rules.ErrUnauthorized, Message: "no"}})
		return
	}
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{OnPingReceived: func(context.Context, []byte) bool {
		h.mu.Lock()
		h.pings++
		h.mu.Unlock()
		return true
	}})
	if err != nil {
		return
	}
	ws.SetReadLimit(protocol.MaxFrame)
	h.mu.Lock()
	c := &hubConn{h: h, n: len(h.conns), host: r.Host, ws: ws, closed: make(chan struct{})}
	h.conns = append(h.conns, c)
	h.mu.Unlock()
	defer close(c.closed)
	first := true
	for {
		_, b, err := ws.Read(context.Background())
		if err != nil {
			h.mu.Lock()
			c.status = websocket.CloseStatus(err)
			h.mu.Unlock()
			return
		}
		var f protocol.Frame
		if err := json.Unmarshal(b, &f); err != nil {
			h.t.Errorf("runner sent a malformed frame: %v", err)
			return
		}
		if first {
			first = false
			if f.Type != protocol.TypeHello {
				h.t.Errorf("first frame is %q, want hello", f.Type)
				return
			}
			var hello protocol.Hello
			h.expect(f.Decode(&hello))
			for _, held := range hello.Attempts { // a real hub knows what its runner holds
				if held.Phase == protocol.PhaseOffered {
					h.fake.Offered(held.AttemptRef)
				} else {
					h.fake.Held(held.AttemptRef)
				}
			}
			h.mu.Lock()
			refuse := h.refuseHello
			h.mu.Unlock()
			if refuse != nil {
				if why := refuse(hello); why != "" {
					ws.Close(protocol.CloseRefused, why)
					return
				}
			}
			h.mu.Lock()
			wel := h.welcome
			if h.onWelcome != nil {
				h.onWelcome(c, hello, &wel)
			}
			h.mu.Unlock()
			// Sent before the hello is recorded, so that a test that saw the
			// hello cannot send an offer ahead of the welcome.
			c.send(protocol.TypeWelcome, wel)
		}
		h.mu.Lock()
		h.frames = append(h.frames, got{c.n, f})
		hook := h.hook
		h.mu.Unlock()
		if !protocol.IsRequest(f.Type) {
			continue // hello, status, heartbeat: recorded only
		}
		if hook != nil && hook(c, f) {
			continue
		}
		c.answer(f)
	}
}

// answer replies to a request as a correct hub would.
func (c *hubConn) answer(f protocol.Frame) {
	c.writeReply(f.ID, c.h.apply(f))
}

// apply applies a request to the fake hub; a repeated id gets the first
// reply again.
func (h *fakeHub) apply(f protocol.Frame) protocol.Reply {
	rep, err := protocol.ServeFrame(context.Background(), h.fake, f)
	h.expect(err)
	if rep == nil {
		return protocol.Reply{}
	}
	return *rep
}

func errReply(code string, size int64) protocol.Reply {
	return protocol.Reply{Error: &rules.Error{Code: code, Message: code, Size: &size}}
}

func (c *hubConn) writeReply(id string, rep protocol.Reply) {
	f, err := protocol.ReplyFrame(id, rep)
	c.h.expect(err)
	c.write(f)
}

func (c *hubConn) send(typ string, body any) {
	f, err := protocol.NewFrame(typ, "", body)
	c.h.expect(err)
	c.write(f)
}

func (c *hubConn) write(f protocol.Frame) {
	b, err := json.Marshal(f)
	c.h.expect(err)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = c.ws.Write(ctx, websocket.MessageText, b) // the runner may be gone; tests check effects
}

// cut drops the connection without a close handshake, like a network failure.
func (c *hubConn) cut() { c.ws.CloseNow() }

// offer sends an offer on the current connection.
func (h *fakeHub) offer(ref protocol.AttemptRef, spec protocol.JobSpec) {
	h.fake.Offered(ref)
	h.current().send(protocol.TypeOffer, protocol.Offer{AttemptRef: ref, Spec: spec})
}

func (h *fakeHub) current() *hubConn {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conns[len(h.conns)-1]
}

// waitConn waits until connection n (from 0) was welcomed.
func (h *fakeHub) waitConn(n int) *hubConn {
	h.t.Helper()
	h.waitFrame("hello on connection "+fmt.Sprint(n), func(g got) bool { return g.n == n && g.f.Type == protocol.TypeHello })
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.conns[n]
}

// waitFrame waits for a received frame that matches and returns it.
func (h *fakeHub) waitFrame(what string, match func(got) bool) got {
	h.t.Helper()
	var found got
	sandboxtest.WaitFor(h.t, what, func() bool {
		h.mu.Lock()
		defer h.mu.Unlock()
		for _, g := range h.frames {
			if match(g) {
				found = g
				return true
			}
		}
		return false
	})
	return found
}

// received returns the frames of type typ received so far.
func (h *fakeHub) received(typ string) []got {
	h.mu.Lock()
	defer h.mu.Unlock()
	var out []got
	for _, g := range h.frames {
		if g.f.Type == typ {
			out = append(out, g)
		}
	}
	return out
}

func (h *fakeHub) waitFinish(attempt string) protocol.Finish {
	h.t.Helper()
	var f protocol.Finish
	sandboxtest.WaitFor(h.t, "finish of "+attempt, func() bool {
		var ok bool
		f, ok = h.fake.FinishOf(attempt)
		return ok
	})
	return f
}

func (h *fakeHub) log(attempt string) []byte { return h.fake.LogOf(attempt) }

// once scripts the first request of type typ; later ones get the default.
func (h *fakeHub) once(typ string, script func(c *hubConn, f protocol.Frame)) {
	done := false
	h.setHook(func(c *hubConn, f protocol.Frame) bool {
		if f.Type != typ || done {
			return false
		}
		done = true
		script(c, f)
		return true
	})
}

// refuse answers every request of type typ with the error code.
func (h *fakeHub) refuse(typ, code string) {
	h.setHook(func(c *hubConn, f protocol.Frame) bool {
		if f.Type != typ {
			return false
		}
		c.writeReply(f.ID, protocol.Reply{Error: &rules.Error{Code: code, Message: "refused by the test"}})
		return true
	})
}

func (h *fakeHub) dialCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dials
}

// truncate cuts the hub's log of an attempt to n bytes and returns n.
func (h *fakeHub) truncate(attempt string, n int64) int64 {
	h.fake.SetLog(attempt, h.fake.LogOf(attempt)[:n])
	return n
}

func (h *fakeHub) setHook(hook func(c *hubConn, f protocol.Frame) bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.hook = hook
}

// lastStatus returns the last status received.
func (h *fakeHub) lastStatus() (protocol.Status, bool) {
	st := h.received(protocol.TypeStatus)
	if len(st) == 0 {
		return protocol.Status{}, false
	}
	var s protocol.Status
	must(h.t, st[len(st)-1].f.Decode(&s))
	return s, true
}

// requestsFor lists the requests of type typ about one attempt.
func (h *fakeHub) requestsFor(typ, attempt string) []got {
	var out []got
	for _, g := range h.received(typ) {
		var ref protocol.AttemptRef
		must(h.t, g.f.Decode(&ref))
		if ref.Attempt == attempt {
			out = append(out, g)
		}
	}
	return out
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// expect reports err from the hub's goroutines, where t.Fatal is not allowed.
func (h *fakeHub) expect(err error) {
	if err != nil {
		h.t.Error(err)
	}
}

func (h *fakeHub) json(v any) json.RawMessage {
	b, err := json.Marshal(v)
	h.expect(err)
	return b
}

func (h *fakeHub) pingCount() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.pings
}
