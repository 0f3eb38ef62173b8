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

// conn is one live runner connection. One goroutine reads; a writer
// goroutine writes while frames wait, so nothing blocks on a slow peer.
// It is the core's call.Link of its runner.
type conn struct {
	name      string // the runner's, for logs
	ws        *websocket.Conn
	done      chan struct{}
	closeOnce sync.Once

	// The send queue is a slice, not a buffered channel, and its writer a
	// goroutine that runs only while there is something to write, so an
	// idle runner costs neither queue memory nor a parked goroutine and
	// its stack (a third of an idle connection's memory).
	qmu     sync.Mutex
	q       []protocol.Frame
	open    bool // writes may start: the core attached the runner
	writing bool // a writer goroutine is running
}

func newConn(ws *websocket.Conn, name string) *conn {
	return &conn{name: name, ws: ws, done: make(chan struct{})}
}

func (c *conn) send(f protocol.Frame) {
	c.qmu.Lock()
	full := len(c.q) >= sendQueue
	if !full {
		c.q = append(c.q, f)
		c.startWriterLocked()
	}
	c.qmu.Unlock()
	if full {
		c.close(websocket.StatusTryAgainLater, "runner is not reading; reconnect")
	}
}

// start lets the frames queued so far (the welcome first) and every later
// one be written; until then a refused hello writes nothing but its close.
func (c *conn) start() {
	c.qmu.Lock()
	c.open = true
	c.startWriterLocked()
	c.qmu.Unlock()
}

// startWriterLocked starts the writer when there is something to write and
// none runs; the caller holds qmu.
func (c *conn) startWriterLocked() {
	if c.open && !c.writing && len(c.q) > 0 {
		c.writing = true
		go c.writeLoop()
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

// writeLoop writes the queued frames in order and ends when the queue is
// empty (the next send starts another) or the connection is closed.
func (c *conn) writeLoop() {
	for {
		c.qmu.Lock()
		batch := c.q
		c.q = nil
		if len(batch) == 0 {
			c.writing = false
		}
		c.qmu.Unlock()
		if len(batch) == 0 {
			return
		}
		for _, f := range batch {
			select {
			case <-c.done:
				return // writing stays true: nothing more is written
			default:
			}
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
