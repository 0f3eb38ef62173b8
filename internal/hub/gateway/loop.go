package gateway

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"drover/internal/hub/call"
	"drover/internal/protocol"
	"drover/internal/rules"
)

// readLoop handles frames in order until the connection ends. Silence for
// three heartbeat intervals ends it too (after an idle heartbeat, for the
// idle interval and two heartbeats): the runner is not alive.
func (g *Gateway) readLoop(ctx context.Context, c *conn, s Session) string {
	// One liveness timer per connection, reset by every frame; reads use a
	// context without a Done channel, which spares the WebSocket library a
	// callback registration per frame (most of an idle runner's cost).
	short := protocol.LivenessWindow(g.cfg.Heartbeat, g.cfg.Idle, false)
	long := protocol.LivenessWindow(g.cfg.Heartbeat, g.cfg.Idle, true)
	var silent atomic.Bool
	var timer atomic.Pointer[time.Timer]
	var armed atomic.Int64  // when the timer was last armed, as time since start
	var window atomic.Int64 // the window it was armed with
	window.Store(int64(short))
	start := time.Now()
	arm := func(w time.Duration) {
		window.Store(int64(w))
		armed.Store(int64(time.Since(start)))
		timer.Load().Reset(w)
	}
	live := time.AfterFunc(short, func() {
		// A frame read as the timer fired armed it again: not silent.
		// A timer that fires half a heartbeat late, or after a stall of the
		// hub's since it was armed, says the hub itself was stopped
		// (SIGSTOP, a suspended VM): the runner's frames of that time may
		// be waiting unread in the socket, so it gets another window rather
		// than being taken for dead with every other runner.
		now := time.Now()
		armedAt := start.Add(time.Duration(armed.Load()))
		quiet, w := now.Sub(armedAt), time.Duration(window.Load())
		if quiet < w {
			return
		}
		if quiet-w > g.cfg.Heartbeat/2 || g.core.StalledAfter(armedAt) {
			arm(w)
			return
		}
		silent.Store(true)
		c.close(protocol.CloseDead, "no heartbeat")
	})
	timer.Store(live)
	defer live.Stop()
	for {
		typ, data, err := c.ws.Read(context.Background())
		if err == nil && bytes.Equal(data, g.idleBeat) {
			arm(long)
		} else {
			arm(short)
		}
		if err != nil {
			if silent.Load() {
				return "no heartbeat"
			}
			select {
			case <-c.done:
				return "closed by hub"
			default:
			}
			if websocket.CloseStatus(err) == websocket.StatusMessageTooBig {
				g.log.Warn("runner sent an oversize frame", "runner", c.name)
			}
			c.close(websocket.StatusGoingAway, "")
			if st := websocket.CloseStatus(err); st != -1 {
				return fmt.Sprintf("runner closed the connection (%d)", st)
			}
			return err.Error()
		}
		if typ != websocket.MessageText {
			g.log.Warn("runner sent a binary frame", "runner", c.name)
			c.close(protocol.CloseProtocol, "frames must be JSON text messages")
			return "protocol error"
		}
		var f protocol.Frame
		if bytes.Equal(data, g.heartbeat) || bytes.Equal(data, g.idleBeat) {
			// Most of what an idle runner sends, exactly as every runner
			// encodes it: neither the JSON checks nor a decode.
			f = protocol.HeartbeatFrame()
		} else {
			err = call.DecodeJSON(data, &f, false)
		}
		if err == nil && f.Type == "" {
			err = errors.New("no type")
		}
		if err != nil {
			g.log.Warn("runner sent a malformed frame", "runner", c.name, "err", err)
			c.close(protocol.CloseProtocol, call.Truncate("malformed frame: "+err.Error(), 120))
			return "protocol error"
		}
		if err := g.handleFrame(ctx, c, s, f); err != nil {
			g.log.Warn("runner protocol error", "runner", c.name, "type", f.Type, "err", err)
			c.close(protocol.CloseProtocol, call.Truncate(err.Error(), 120))
			return "protocol error"
		}
	}
}

// handleFrame hands one frame to the connection's session and queues its
// reply. An error is a protocol violation that ends the connection; a
// refused request is answered with an error reply instead.
func (g *Gateway) handleFrame(ctx context.Context, c *conn, s Session, f protocol.Frame) error {
	rep, err := protocol.ServeFrame(ctx, s, f)
	if rep == nil {
		return err
	}
	if e := rep.Error; e != nil && e.Code != rules.ErrOffset && e.Code != rules.ErrLogIncomplete && e.Code != rules.ErrNoSpace { // a full disk is logged once per interval
		g.log.Info("runner request refused", "runner", c.name, "type", f.Type, "code", e.Code, "msg", e.Message)
	}
	out, err := protocol.ReplyFrame(f.ID, *rep)
	if err != nil {
		return err
	}
	c.send(out)
	return nil
}
