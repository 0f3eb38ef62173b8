package gateway

import (
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"drover/internal/hub/call"
	"drover/internal/protocol"
	"drover/internal/protocol/protocoltest"
)

// fakeCore is a core for the gateway alone: it refuses with refuse when
// set, else attaches the runner to the protocol's fake hub and records how
// each session ended.
type fakeCore struct {
	refuse error
	busy   time.Duration // > 0: every dial is told to come back after it
	early  time.Duration // > 0: a dial with a place is told so before it is authenticated
	name   string        // the welcome's runner name; "": the caller's
	hub    *protocoltest.Hub

	mu     sync.Mutex
	hellos []protocol.Hello
	ended  chan string
}

type fakeSession struct {
	*protocoltest.Hub
	ended chan string
}

func (s fakeSession) Detach(reason string) { s.ended <- reason }

func (f *fakeCore) Attach(_ context.Context, c call.Caller, hello protocol.Hello, link call.Link, _ string) (Session, error) {
	f.mu.Lock()
	f.hellos = append(f.hellos, hello)
	f.mu.Unlock()
	if f.refuse != nil {
		return nil, f.refuse
	}
	name := c.Name
	if f.name != "" {
		name = f.name
	}
	link.Welcome(protocol.Welcome{Protocol: protocol.Version, RunnerName: name})
	return fakeSession{f.hub, f.ended}, nil
}

func (f *fakeCore) StalledAfter(time.Time) bool { return false }

func (f *fakeCore) AdmitHello(_ call.Caller, place string) (func(), time.Duration, string) {
	if f.busy > 0 {
		return nil, f.busy, "place-" + place
	}
	return func() {}, 0, ""
}

func (f *fakeCore) TurnAway(authorization, place string) (time.Duration, string, bool) {
	if f.early > 0 && place != "" {
		return f.early, "again-" + authorization + "-" + place, true
	}
	return 0, "", false
}

func serve(t *testing.T, core Core) string {
	t.Helper()
	g := New(core, Config{Heartbeat: time.Minute, BaseURL: func(*http.Request) string { return "" },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = g.Serve(w, r, call.Caller{Name: "box", RunnerID: "r-1"})
	}))
	t.Cleanup(srv.Close)
	return "ws" + strings.TrimPrefix(srv.URL, "http")
}

func dial(t *testing.T, url string) *websocket.Conn {
	t.Helper()
	ws, _, err := websocket.Dial(t.Context(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ws.CloseNow() })
	return ws
}

func write(t *testing.T, ws *websocket.Conn, typ, id string, body any) {
	t.Helper()
	f, err := protocol.NewFrame(typ, id, body)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(f)
	if err := ws.Write(t.Context(), websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
}

func read(t *testing.T, ws *websocket.Conn) protocol.Frame {
	t.Helper()
	_, b, err := ws.Read(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var f protocol.Frame
	if err := json.Unmarshal(b, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// The gateway only carries: the welcome the core queued comes first, a
// request reaches the session and its reply comes back under its id, and
// the end of the connection is the session's detach.
func TestGatewayCarriesASession(t *testing.T) {
	core := &fakeCore{hub: protocoltest.NewHub(), ended: make(chan string, 1)}
	ref := protocol.AttemptRef{Job: "j-1", Attempt: "a-1", Epoch: 1}
	core.hub.Offered(ref)
	ws := dial(t, serve(t, core))
	write(t, ws, protocol.TypeHello, "", protocol.Hello{Protocol: protocol.Version, Slots: 1})
	if f := read(t, ws); f.Type != protocol.TypeWelcome {
		t.Fatalf("first frame %q, want the welcome", f.Type)
	}
	write(t, ws, protocol.TypeAccept, "q-1", protocol.Accept{AttemptRef: ref})
	f := read(t, ws)
	var rep protocol.Reply
	if err := f.Decode(&rep); err != nil || f.Type != protocol.TypeReply || f.ReplyTo != "q-1" || !rep.OK {
		t.Fatalf("reply %+v %+v %v", f, rep, err)
	}
	ws.Close(websocket.StatusNormalClosure, "bye")
	if reason := <-core.ended; !strings.Contains(reason, "1000") {
		t.Fatalf("detached with %q, want the runner's close", reason)
	}
}

// A refusal of the core ends the connection with the code it names; a
// hello of another protocol version never reaches the core.
func TestGatewayClosesWithTheCoresCode(t *testing.T) {
	for _, c := range []struct {
		name  string
		hello protocol.Hello
		code  websocket.StatusCode
		core  bool // the core saw the hello
	}{
		{"refused by the core", protocol.Hello{Protocol: protocol.Version, Slots: 1}, protocol.CloseRefused, true},
		{"another version", protocol.Hello{Protocol: protocol.Version + 1, Slots: 1}, protocol.CloseVersion, false},
	} {
		t.Run(c.name, func(t *testing.T) {
			core := &fakeCore{refuse: call.Closed{Code: protocol.CloseRefused, Reason: "label key gpu:x"}}
			ws := dial(t, serve(t, core))
			write(t, ws, protocol.TypeHello, "", c.hello)
			_, _, err := ws.Read(t.Context())
			if got := websocket.CloseStatus(err); got != c.code {
				t.Fatalf("closed with %d (%v), want %d", got, err, c.code)
			}
			core.mu.Lock()
			defer core.mu.Unlock()
			if (len(core.hellos) > 0) != c.core {
				t.Fatalf("the core saw %d hellos", len(core.hellos))
			}
		})
	}
}

// An idle connection costs the hub one goroutine, its reader: the writer
// runs only while frames wait (it parked beside every idle runner, with
// its stack, 2 goroutines a connection).
func TestIdleConnectionHoldsOneGoroutine(t *testing.T) {
	core := &fakeCore{hub: protocoltest.NewHub(), ended: make(chan string, 100)}
	url := serve(t, core)
	ws := dial(t, url) // the test server's own goroutines, before counting
	write(t, ws, protocol.TypeHello, "", protocol.Hello{Protocol: protocol.Version, Slots: 1})
	read(t, ws)
	const n = 20
	base := runtime.NumGoroutine()
	for range n {
		ws := dial(t, url)
		write(t, ws, protocol.TypeHello, "", protocol.Hello{Protocol: protocol.Version, Slots: 1})
		if f := read(t, ws); f.Type != protocol.TypeWelcome {
			t.Fatalf("first frame %q, want the welcome", f.Type)
		}
	}
	// The welcome's writer ends once it wrote: wait for that, generously.
	deadline := time.Now().Add(20 * time.Second)
	for {
		grown := runtime.NumGoroutine() - base
		if grown <= n+n/4 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d idle connections hold %d goroutines; want about one each", n, grown)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// A heartbeat reaches the session however the runner encoded it (the
// common encoding skips the JSON checks), and a malformed frame that
// says heartbeat is still refused.
func TestGatewayHeartbeats(t *testing.T) {
	core := &fakeCore{hub: protocoltest.NewHub(), ended: make(chan string, 1)}
	ws := dial(t, serve(t, core))
	write(t, ws, protocol.TypeHello, "", protocol.Hello{Protocol: protocol.Version, Slots: 1})
	read(t, ws)
	padded := `{"type":"heartbeat","body":{"pad":"` + strings.Repeat("x", 20*frameBuffer) + `"}}` // past the read buffer
	for _, b := range []string{`{"type":"heartbeat"}`, `{ "type": "heartbeat" }`, `{"type":"heartbeat","id":"h-1"}`, padded} {
		if err := ws.Write(t.Context(), websocket.MessageText, []byte(b)); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(20 * time.Second)
	for core.hub.Beats() < 4 {
		if time.Now().After(deadline) {
			t.Fatalf("%d of 4 heartbeats reached the session", core.hub.Beats())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := ws.Write(t.Context(), websocket.MessageText, []byte(`{"type":"heartbeat","type":"heartbeat"}`)); err != nil {
		t.Fatal(err)
	}
	_, _, err := ws.Read(t.Context())
	if got := websocket.CloseStatus(err); got != protocol.CloseProtocol {
		t.Fatalf("a frame with a key twice: closed with %d (%v), want %d", got, err, protocol.CloseProtocol)
	}
}

// A frame larger than the connection's write buffer reaches the runner
// whole.
func TestGatewayWritesPastItsBuffer(t *testing.T) {
	core := &fakeCore{hub: protocoltest.NewHub(), ended: make(chan string, 1), name: strings.Repeat("n", 20*frameBuffer)}
	ws := dial(t, serve(t, core))
	write(t, ws, protocol.TypeHello, "", protocol.Hello{Protocol: protocol.Version, Slots: 1})
	var w protocol.Welcome
	if err := read(t, ws).Decode(&w); err != nil || w.RunnerName != core.name {
		t.Fatalf("welcome of %d bytes of name (%v), want %d", len(w.RunnerName), err, len(core.name))
	}
}

// Serve returns once the runner is attached, the connection read on: net/http
// then frees what it held for the request (it held it for the life of
// every idle runner's connection).
func TestServeReturnsWhileTheConnectionLives(t *testing.T) {
	core := &fakeCore{hub: protocoltest.NewHub(), ended: make(chan string, 1)}
	g := New(core, Config{Heartbeat: time.Minute, BaseURL: func(*http.Request) string { return "" },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	returned := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = g.Serve(w, r, call.Caller{Name: "box", RunnerID: "r-1"})
		returned <- struct{}{}
	}))
	t.Cleanup(srv.Close)
	ws := dial(t, "ws"+strings.TrimPrefix(srv.URL, "http"))
	write(t, ws, protocol.TypeHello, "", protocol.Hello{Protocol: protocol.Version, Slots: 1})
	read(t, ws)
	select {
	case <-returned:
	case <-time.After(20 * time.Second):
		t.Fatal("Serve still runs with the runner attached")
	}
	ref := protocol.AttemptRef{Job: "j-1", Attempt: "a-1", Epoch: 1}
	core.hub.Offered(ref)
	write(t, ws, protocol.TypeAccept, "q-1", protocol.Accept{AttemptRef: ref})
	if f := read(t, ws); f.Type != protocol.TypeReply || f.ReplyTo != "q-1" {
		t.Fatalf("after Serve returned: %+v, want the accept's reply", f)
	}
	ws.Close(websocket.StatusNormalClosure, "bye")
	if reason := <-core.ended; !strings.Contains(reason, "1000") {
		t.Fatalf("detached with %q, want the runner's close", reason)
	}
}

// A hub with as many hellos in hand as it can soon attach answers a dial
// before the upgrade with 503, when to come back and the place to bring
// then, which the runner reads (protocol.RetryAfter); the place a dial
// brings reaches the core; no hello does.
func TestBusyHubSaysWhenToComeBack(t *testing.T) {
	core := &fakeCore{hub: protocoltest.NewHub(), ended: make(chan string, 1), busy: 7*time.Second + 300*time.Millisecond}
	_, resp, err := websocket.Dial(t.Context(), serve(t, core), &websocket.DialOptions{HTTPHeader: http.Header{protocol.PlaceHeader: {"p1"}}})
	if err == nil {
		t.Fatal("a busy hub took the connection")
	}
	if d, place, ok := protocol.RetryAfter(resp); !ok || d != 7*time.Second || place != "place-p1" {
		t.Fatalf("come back after %v with place %q (%v), want 7s with %q; %v", d, place, ok, "place-p1", err)
	}
	if len(core.hellos) != 0 {
		t.Fatal("a hello reached the core")
	}
}

// A dial the core turns away before authentication is answered like a
// busy hub's, with the bearer token and place it brought given to the
// core, and never reaches the authenticating handler; one it does not
// turn away does.
func TestDoorTurnsAwayBeforeAuthentication(t *testing.T) {
	core := &fakeCore{hub: protocoltest.NewHub(), ended: make(chan string, 1), early: 3 * time.Second}
	g := New(core, Config{Heartbeat: time.Minute, BaseURL: func(*http.Request) string { return "" },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	var authenticated atomic.Int32
	srv := httptest.NewServer(g.Door(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		authenticated.Add(1)
		http.Error(w, "no", http.StatusUnauthorized)
	})))
	t.Cleanup(srv.Close)
	url := "ws" + strings.TrimPrefix(srv.URL, "http")
	_, resp, _ := websocket.Dial(t.Context(), url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer tok"}, protocol.PlaceHeader: {"p1"}}})
	if d, place, ok := protocol.RetryAfter(resp); !ok || d != 3*time.Second || place != "again-Bearer tok-p1" || authenticated.Load() != 0 {
		t.Fatalf("a dial with a place: come back after %v with %q (%v), authenticated %d times; want 3s with %q and no authentication",
			d, place, ok, authenticated.Load(), "again-Bearer tok-p1")
	}
	_, resp, _ = websocket.Dial(t.Context(), url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer tok"}}})
	if resp == nil || resp.StatusCode != http.StatusUnauthorized || authenticated.Load() != 1 {
		t.Fatalf("a dial the core does not turn away: %v, authenticated %d times; want it authenticated", resp, authenticated.Load())
	}
}

// After an idle heartbeat the hub waits the idle interval and two
// heartbeats for the next frame, not three heartbeats; after any other
// frame three heartbeats again, and a runner silent past that is closed.
func TestIdleHeartbeatWindow(t *testing.T) {
	const hb = 400 * time.Millisecond
	core := &fakeCore{hub: protocoltest.NewHub(), ended: make(chan string, 1)}
	g := New(core, Config{Heartbeat: hb, Idle: time.Hour, BaseURL: func(*http.Request) string { return "" },
		Logger: slog.New(slog.NewTextHandler(io.Discard, nil))})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_ = g.Serve(w, r, call.Caller{Name: "box", RunnerID: "r-1"})
	}))
	t.Cleanup(srv.Close)
	ws := dial(t, "ws"+strings.TrimPrefix(srv.URL, "http"))
	write(t, ws, protocol.TypeHello, "", protocol.Hello{Protocol: protocol.Version, Slots: 1})
	read(t, ws)
	closed := make(chan error, 1)
	go func() { _, _, err := ws.Read(context.Background()); closed <- err }() // answers the hub's close
	idle, _ := json.Marshal(protocol.IdleHeartbeatFrame())
	if err := ws.Write(t.Context(), websocket.MessageText, idle); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-closed:
		t.Fatalf("closed within 10 heartbeats of an idle heartbeat: %v", err)
	case <-time.After(10 * hb):
	}
	if core.hub.Beats() != 1 {
		t.Fatalf("%d heartbeats reached the session, want the idle one", core.hub.Beats())
	}
	write(t, ws, protocol.TypeHeartbeat, "", nil)
	select {
	case err := <-closed:
		if websocket.CloseStatus(err) != protocol.CloseDead {
			t.Fatalf("closed with %v, want %d (no heartbeat)", err, protocol.CloseDead)
		}
	case <-time.After(time.Minute):
		t.Fatal("a runner silent after a heartbeat was not closed")
	}
}
