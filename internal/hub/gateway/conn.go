package gateway

import (
	"context"
	"encoding/json"
	"sync"
	"time"

	"github.com/coder/websocket"

	"drover/internal/hub/call"
	"drover/internal/protocol"
)

// sendQueue bounds the frames waiting for a slow runner; a runner that
// falls this far behind is disconnected rather than buffered without end.
const sendQueue = 256

// conn is one live runner connection. The HTTP handler goroutine reads;
// one writer goroutine writes, so nothing blocks on a slow peer. It is the
// core's call.Link of its runner.
type conn struct {
	name      string // the runner's, for logs
	ws        *websocket.Conn
	done      chan struct{}
	closeOnce sync.Once

	// The send queue is a slice, not a buffered channel, so an idle runner
	// costs no queue memory; wake tells the writer there is something.
	qmu  sync.Mutex
	q    []protocol.Frame
	wake chan struct{}
}

func newConn(ws *websocket.Conn, name string) *conn {
	return &conn{name: name, ws: ws, wake: make(chan struct{}, 1), done: make(chan struct{})}
}

func (c *conn) send(f protocol.Frame) {
	c.qmu.Lock()
	full := len(c.q) >= sendQueue
	if !full {
		c.q = append(c.q, f)
	}
	c.qmu.Unlock()
	if full {
		c.close(websocket.StatusTryAgainLater, "runner is not reading; reconnect")
		return
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
}

// A conn is the call.Link of its runner: each push is queued as the frame
// the protocol's Pusher encodes.
var _ call.Link = (*conn)(nil)

func (c *conn) pusher() protocol.Pusher       { return protocol.Pusher{Send: c.send} }
func (c *conn) Offer(o protocol.Offer)        { c.pusher().Offer(o) }
func (c *conn) Cancel(o protocol.CancelOrder) { c.pusher().Cancel(o) }
func (c *conn) Drop(o protocol.DropOrder)     { c.pusher().Drop(o) }
func (c *conn) Queue(q protocol.Queue)        { c.pusher().Queue(q) }

func (c *conn) Welcome(w protocol.Welcome) {
	if f, err := protocol.NewFrame(protocol.TypeWelcome, "", w); err == nil {
		c.send(f)
	}
}

// Close is close for the core, which names codes as plain numbers.
func (c *conn) Close(code int, reason string) { c.close(websocket.StatusCode(code), reason) }

// close ends the connection once; the close handshake runs in the background
// because it waits for the peer.
func (c *conn) close(code websocket.StatusCode, reason string) {
	c.closeOnce.Do(func() {
		close(c.done)
		go c.ws.Close(code, reason)
	})
}

func (c *conn) writeLoop() {
	for {
		select {
		case <-c.done:
			return
		case <-c.wake:
		}
		c.qmu.Lock()
		batch := c.q
		c.q = nil
		c.qmu.Unlock()
		for _, f := range batch {
			b, err := json.Marshal(f)
			if err != nil {
				continue
			}
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			err = c.ws.Write(ctx, websocket.MessageText, b)
			cancel()
			if err != nil {
				c.close(websocket.StatusGoingAway, "write failed")
				return
			}
		}
	}
}
