// Package gateway is the runner gateway: the WebSocket a runner dials
// (GET /api/v1/runner/connect), its frames, its send queue and its
// liveness. It decodes frames into the typed calls of protocol.Hub on the
// session the core gives it and encodes their replies; every decision is
// the core's (Core), which it reaches only through the interfaces below.
package gateway

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/coder/websocket"

	"drover/internal/hub/call"
	"drover/internal/protocol"
)

// Core is what the gateway needs of the hub's core.
type Core interface {
	// Attach registers the runner c (authenticated by its token) with
	// what its hello says, reached at baseURL, pushing to it through link.
	// The core queues the welcome on link before anything else. A refusal
	// the same hello would meet again is a call.Closed with the code to
	// close with; any other error closes with protocol.CloseProtocol.
	Attach(ctx context.Context, c call.Caller, hello protocol.Hello, link call.Link, baseURL string) (Session, error)
	// StalledAfter says whether the hub's own process was stopped (a
	// suspended VM, SIGSTOP) after t: silence of that time is not the
	// runner's.
	StalledAfter(t time.Time) bool
	// AdmitHello lets runner c, dialing now with the place it was given
	// when last told to come back ("" for none), in to say hello (leave is
	// called once, when its hello is attached or refused), or says after
	// how long to come back and with which place (leave nil): the hub has
	// as many hellos in hand as it can soon attach.
	AdmitHello(c call.Caller, place string) (leave func(), after time.Duration, next string)
	// TurnAway says, before the dial's token (in its Authorization
	// header) is authenticated, whether AdmitHello would tell it to come
	// back anyway, and when and with which place: a fleet's returns then
	// cost the store nothing. ok false: authenticate it.
	TurnAway(authorization, place string) (after time.Duration, next string, ok bool)
}

// Session is one attached runner: its requests, and its end.
type Session interface {
	protocol.Hub
	// Detach tells the core the connection ended, and why.
	Detach(reason string)
}

// Config is how the gateway runs.
type Config struct {
	Heartbeat time.Duration                // the runner's; three of silence end a connection
	Idle      time.Duration                // a runner's heartbeat interval while it holds no attempts (protocol.LivenessWindow)
	BaseURL   func(r *http.Request) string // the hub's URL as a request reached it
	Logger    *slog.Logger
}

// Gateway serves runner connections.
type Gateway struct {
	core      Core
	cfg       Config
	log       *slog.Logger
	heartbeat []byte // a heartbeat frame as runners encode it
	idleBeat  []byte // an idle heartbeat frame, likewise
}

// New is a gateway over core.
func New(core Core, cfg Config) *Gateway {
	hb, err := json.Marshal(protocol.HeartbeatFrame())
	if err != nil {
		panic(err) // a constant frame
	}
	idle, err := json.Marshal(protocol.IdleHeartbeatFrame())
	if err != nil {
		panic(err) // a constant frame
	}
	return &Gateway{core: core, cfg: cfg, log: cfg.Logger, heartbeat: hb, idleBeat: idle}
}

// Door answers the dials Core.TurnAway turns away before next
// authenticates them: each a store read, while a fleet returning at once
// dials several times per runner.
func (g *Gateway) Door(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if after, place, ok := g.core.TurnAway(r.Header.Get("Authorization"), r.Header.Get(protocol.PlaceHeader)); ok {
			comeBack(w, after, place)
			return
		}
		next.ServeHTTP(w, r)
	})
}

// comeBack tells a dial to come back after after (whole seconds), with
// place ("" for none).
func comeBack(w http.ResponseWriter, after time.Duration, place string) {
	w.Header().Set("Retry-After", strconv.Itoa(int(after/time.Second)))
	if place != "" {
		w.Header().Set(protocol.PlaceHeader, place)
	}
	http.Error(w, "hub busy with other runners' hellos; come back later", http.StatusServiceUnavailable)
}

// Serve takes one runner connection, authenticated as c, and reads it
// until it ends on a goroutine of its own.
func (g *Gateway) Serve(w http.ResponseWriter, r *http.Request, c call.Caller) error {
	leave, after, next := g.core.AdmitHello(c, r.Header.Get(protocol.PlaceHeader))
	if leave == nil {
		// Before the upgrade, so a fleet coming back at once costs the hub
		// no WebSocket and no hello per runner it cannot take yet; the
		// runner comes back when told, with its place (protocol.RetryAfter),
		// an older one after its backoff.
		comeBack(w, after, next)
		return nil
	}
	defer leave() // the hello is attached or refused when Serve returns
	ws, err := websocket.Accept(smallBuffers{w, protocol.KeepAlive(g.cfg.Heartbeat)}, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return nil // Accept has answered the request
	}
	ws.SetReadLimit(protocol.MaxFrame)
	ctx := r.Context()

	hello, err := readHello(ctx, ws)
	if err != nil {
		if ce, ok := errors.AsType[call.Closed](err); ok {
			g.log.Warn("runner connection refused", "runner", c.Name, "err", err)
			ws.Close(websocket.StatusCode(ce.Code), ce.Reason)
			return nil
		}
		ws.CloseNow()
		return nil
	}
	conn := newConn(ws, c.Name)
	s, err := g.core.Attach(ctx, c, hello, conn, g.cfg.BaseURL(r))
	if err != nil {
		g.log.Warn("runner hello refused", "runner", c.Name, "err", err)
		code, reason := protocol.CloseProtocol, err.Error()
		if ce, ok := errors.AsType[call.Closed](err); ok {
			code, reason = ce.Code, ce.Reason
		}
		ws.Close(websocket.StatusCode(code), call.Truncate(reason, 120))
		return nil
	}
	conn.start()
	// The connection is read on a goroutine of its own and the handler
	// returns: net/http then lets go of what it held for the request (its
	// 4 KiB read and write buffers, the request, the handler's stack,
	// grown by the token lookup and the hello), which an idle runner's
	// reader kept for the life of the connection. Its frames are no
	// longer cancelled with the server's context: the hub closes every
	// connection before it stops.
	rctx := context.WithoutCancel(ctx)
	go func() {
		s.Detach(g.readLoop(rctx, conn, s))
	}()
	return nil
}

// readHello reads the first frame, which must be a hello of this
// protocol version; what the hello says is the core's to check.
func readHello(ctx context.Context, ws *websocket.Conn) (protocol.Hello, error) {
	var hello protocol.Hello
	hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	typ, data, err := ws.Read(hctx)
	if err != nil {
		return hello, err
	}
	if typ != websocket.MessageText {
		return hello, call.Closed{Code: protocol.CloseProtocol, Reason: "frames must be JSON text messages"}
	}
	var f protocol.Frame
	if err := call.DecodeJSON(data, &f, false); err != nil {
		return hello, call.Closed{Code: protocol.CloseProtocol, Reason: call.Truncate("malformed frame: "+err.Error(), 120)}
	}
	if f.Type != protocol.TypeHello {
		return hello, call.Closed{Code: protocol.CloseProtocol, Reason: "the first frame must be hello"}
	}
	if err := f.Decode(&hello); err != nil {
		return hello, call.Closed{Code: protocol.CloseProtocol, Reason: "malformed hello"}
	}
	if hello.Protocol != protocol.Version {
		return hello, call.Closed{Code: protocol.CloseVersion, Reason: fmt.Sprintf("hub speaks protocol %d, runner %d: upgrade the older one", protocol.Version, hello.Protocol)}
	}
	return hello, nil
}

// frameBuffer is the size of a connection's read and write buffers. An
// idle runner's frames (a heartbeat, about 20 bytes) and most others fit;
// a larger frame is read and written past the buffer, directly. The 4 KiB
// pair net/http hands over was a third of an idle connection's heap.
const frameBuffer = 512

// smallBuffers hands the WebSocket library a hijacked connection with
// buffers of frameBuffer bytes rather than net/http's.
// It also sets the runner connection's TCP keepalive (protocol.KeepAlive),
// which notices a runner whose host or network vanished between its
// heartbeats without waking the hub.
type smallBuffers struct {
	http.ResponseWriter
	keepAlive net.KeepAliveConfig
}

func (w smallBuffers) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w smallBuffers) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, brw, err := http.NewResponseController(w.ResponseWriter).Hijack()
	if tc, ok := conn.(*net.TCPConn); ok && err == nil {
		_ = tc.SetKeepAliveConfig(w.keepAlive) // best effort: the heartbeat window still holds
	}
	if err != nil || brw.Reader.Buffered() > 0 {
		return conn, brw, err // bytes the client sent early stay with the reader that holds them
	}
	return conn, bufio.NewReadWriter(bufio.NewReaderSize(conn, frameBuffer), bufio.NewWriterSize(conn, frameBuffer)), nil
}
