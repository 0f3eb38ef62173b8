package hub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"drover/internal/hub/call"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/store"
	"drover/internal/web"
)

// sendQueue bounds the frames waiting for a slow runner; a runner that
// falls this far behind is disconnected rather than buffered without end.
const sendQueue = 256

// conn is one live runner connection. The HTTP handler goroutine reads;
// one writer goroutine writes, so nothing blocks on a slow peer.
type conn struct {
	runnerID  string
	name      string
	tokenHash string
	slots     int
	labels    map[string]string
	version   string // Hello.RunnerVersion
	wantQueue bool   // Hello.WantQueue: send it queue frames
	baseURL   string // the hub's URL as this runner reached it
	ws        *websocket.Conn
	done      chan struct{}
	closeOnce sync.Once

	// The send queue is a slice, not a buffered channel, so an idle runner
	// costs no queue memory; wake tells the writer there is something.
	qmu  sync.Mutex
	q    []protocol.Frame
	wake chan struct{}

	// reader goroutine only
	lastExtend time.Time
	recorded   shown // what its holding row says (runnerstatus.go)

	// under the registry (registry.mu)
	cooldownUntil time.Time
	agents        []string               // what it can run now (Hello.Agents)
	notReady      string                 // why it takes no offers now (Hello.NotReady); "": ready
	accounts      []protocol.AccountInfo // for display
	access        *runnerAccess          // owner and shares; replaced, never changed in place
	waiting       int                    // what it was last told of the queue (waiting.go)
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

// A conn is the protocol.Runner of its runner: each push is queued as
// the frame the protocol's Pusher encodes.
var _ protocol.Runner = (*conn)(nil)

func (c *conn) pusher() protocol.Pusher       { return protocol.Pusher{Send: c.send} }
func (c *conn) Offer(o protocol.Offer)        { c.pusher().Offer(o) }
func (c *conn) Cancel(o protocol.CancelOrder) { c.pusher().Cancel(o) }
func (c *conn) Drop(o protocol.DropOrder)     { c.pusher().Drop(o) }
func (c *conn) Queue(q protocol.Queue)        { c.pusher().Queue(q) }

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

// serveRunner is the runner gateway: GET /api/v1/runner/connect.
func (h *Hub) serveRunner(w http.ResponseWriter, r *http.Request, p call.Caller) error {
	ws, err := websocket.Accept(w, r, &websocket.AcceptOptions{CompressionMode: websocket.CompressionDisabled})
	if err != nil {
		return nil // Accept has answered the request
	}
	ws.SetReadLimit(protocol.MaxFrame)
	ctx := r.Context()

	hello, err := readHello(ctx, ws)
	if err != nil {
		var ce closeErr
		if errors.As(err, &ce) {
			h.log.Warn("runner connection refused", "runner", p.Name, "err", err)
			ws.Close(ce.code, ce.msg)
			return nil
		}
		ws.CloseNow()
		return nil
	}
	var access *runnerAccess
	// The runner's owner and shares are read afresh at every connect, so a
	// reconnecting runner is offered only what its access allows now.
	if err := h.store.Read(ctx, func(tx store.Tx) error {
		var err error
		access, err = loadRunnerAccess(tx, p.RunnerID)
		return err
	}); err != nil {
		h.log.Error("runner connection refused: cannot read its access", "runner", p.Name, "err", err)
		ws.Close(websocket.StatusTryAgainLater, "hub cannot read the runner's record; reconnect")
		return nil
	}
	c := &conn{
		runnerID: p.RunnerID, name: p.Name, tokenHash: p.TokenHash,
		slots: hello.Slots, labels: hello.Labels, version: hello.RunnerVersion, wantQueue: hello.WantQueue, agents: hello.Agents, accounts: hello.Accounts, notReady: hello.NotReady, ws: ws, baseURL: web.BaseURL(r),
		wake: make(chan struct{}, 1), done: make(chan struct{}), access: access,
	}
	if err := h.attach(ctx, c, hello); err != nil {
		h.log.Warn("runner hello refused", "runner", p.Name, "err", err)
		code := websocket.StatusCode(protocol.CloseProtocol)
		if errors.Is(err, errStaleToken) {
			code = protocol.CloseRevoked
		} else if _, ok := errors.AsType[helloRefusal](err); ok {
			code = protocol.CloseRefused
		}
		ws.Close(code, call.Truncate(err.Error(), 120))
		return nil
	}
	c.recorded = c.shown() // attach recorded it (holdRunner)
	// A replace or revoke that committed after attach's check but before
	// the connection was listed found nothing to close: look again.
	h.closeIfTokenStale(ctx, c)
	go c.writeLoop()
	// A share changed between the read above and attach found no
	// connection to update: read the access again now that it is attached.
	if err := h.refreshAccess(ctx, c.runnerID); err != nil {
		h.log.Warn("could not reload a runner's access", "runner", c.name, "err", err)
	}
	h.log.Info("runner connected", "runner", c.name, "slots", c.slots, "held", len(hello.Attempts))
	h.kick()
	reason := h.readLoop(ctx, c)
	h.detach(c, reason)
	return nil
}

// helloRefusal is a hello refused for what it says, which the same hello
// would be again: closed with CloseRefused, on which the runner exits.
type helloRefusal struct{ error }

type closeErr struct {
	code websocket.StatusCode
	msg  string
}

func (e closeErr) Error() string { return fmt.Sprintf("close %d: %s", e.code, e.msg) }

func readHello(ctx context.Context, ws *websocket.Conn) (protocol.Hello, error) {
	var hello protocol.Hello
	hctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	typ, data, err := ws.Read(hctx)
	if err != nil {
		return hello, err
	}
	if typ != websocket.MessageText {
		return hello, closeErr{protocol.CloseProtocol, "frames must be JSON text messages"}
	}
	var f protocol.Frame
	if err := call.DecodeJSON(data, &f, false); err != nil {
		return hello, closeErr{protocol.CloseProtocol, call.Truncate("malformed frame: "+err.Error(), 120)}
	}
	if f.Type != protocol.TypeHello {
		return hello, closeErr{protocol.CloseProtocol, "the first frame must be hello"}
	}
	if err := f.Decode(&hello); err != nil {
		return hello, closeErr{protocol.CloseProtocol, "malformed hello"}
	}
	if hello.Protocol != protocol.Version {
		return hello, closeErr{protocol.CloseVersion, fmt.Sprintf("hub speaks protocol %d, runner %d: upgrade the older one", protocol.Version, hello.Protocol)}
	}
	if hello.Slots < 1 || hello.Slots > protocol.MaxSlots {
		return hello, closeErr{protocol.CloseRefused, fmt.Sprintf("slots must be 1 to %d", protocol.MaxSlots)}
	}
	if err := protocol.CheckLabels(hello.Labels); err != nil {
		return hello, closeErr{protocol.CloseRefused, call.Truncate(err.Error(), 120)}
	}
	if len(hello.RunnerVersion) > protocol.MaxVersion {
		return hello, closeErr{protocol.CloseRefused, fmt.Sprintf("runner version of %d bytes; at most %d", len(hello.RunnerVersion), protocol.MaxVersion)}
	}
	if len(hello.Attempts) > protocol.MaxHeldReports {
		return hello, closeErr{protocol.CloseProtocol, "too many attempts in hello"}
	}
	if err := checkAgents(hello.Agents, hello.Accounts); err != nil {
		return hello, closeErr{protocol.CloseRefused, call.Truncate(err.Error(), 120)}
	}
	if err := checkNotReady(hello.NotReady); err != nil {
		return hello, closeErr{protocol.CloseRefused, call.Truncate(err.Error(), 120)}
	}
	if err := protocol.CheckPlainText("runner version", hello.RunnerVersion, false); err != nil {
		return hello, closeErr{protocol.CloseRefused, call.Truncate(err.Error(), 120)}
	}
	if hello.Agents == nil {
		hello.Agents = []string{"exec"} // a runner from before agents were reported
	}
	for _, a := range hello.Attempts {
		if a.Validate() != nil {
			return hello, closeErr{protocol.CloseProtocol, "malformed attempt in hello"}
		}
	}
	return hello, nil
}

// readLoop handles frames in order until the connection ends. Silence for
// three heartbeat intervals ends it too: the runner is not alive.
func (h *Hub) readLoop(ctx context.Context, c *conn) string {
	// One liveness timer per connection, reset by every frame; reads use a
	// context without a Done channel, which spares the WebSocket library a
	// callback registration per frame (most of an idle runner's cost).
	window := 3 * h.cfg.Heartbeat
	var silent atomic.Bool
	var timer atomic.Pointer[time.Timer]
	var armed atomic.Int64 // when the timer was last armed, as time since start
	start := time.Now()
	arm := func() {
		armed.Store(int64(time.Since(start)))
		timer.Load().Reset(window)
	}
	live := time.AfterFunc(window, func() {
		// A frame read as the timer fired armed it again: not silent.
		// A timer that fires half a heartbeat late, or after a stall of the
		// hub's since it was armed, says the hub itself was stopped
		// (SIGSTOP, a suspended VM): the runner's frames of that time may
		// be waiting unread in the socket, so it gets another window rather
		// than being taken for dead with every other runner.
		now := time.Now()
		armedAt := start.Add(time.Duration(armed.Load()))
		quiet := now.Sub(armedAt)
		if quiet < window {
			return
		}
		if quiet-window > h.cfg.Heartbeat/2 || h.stall.look(now).After(armedAt) {
			arm()
			return
		}
		silent.Store(true)
		c.close(protocol.CloseDead, "no heartbeat")
	})
	timer.Store(live)
	defer live.Stop()
	for {
		typ, data, err := c.ws.Read(context.Background())
		arm()
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
				h.log.Warn("runner sent an oversize frame", "runner", c.name)
			}
			c.close(websocket.StatusGoingAway, "")
			if st := websocket.CloseStatus(err); st != -1 {
				return fmt.Sprintf("runner closed the connection (%d)", st)
			}
			return err.Error()
		}
		if typ != websocket.MessageText {
			h.log.Warn("runner sent a binary frame", "runner", c.name)
			c.close(protocol.CloseProtocol, "frames must be JSON text messages")
			return "protocol error"
		}
		var f protocol.Frame
		err = call.DecodeJSON(data, &f, false)
		if err == nil && f.Type == "" {
			err = errors.New("no type")
		}
		if err != nil {
			h.log.Warn("runner sent a malformed frame", "runner", c.name, "err", err)
			c.close(protocol.CloseProtocol, call.Truncate("malformed frame: "+err.Error(), 120))
			return "protocol error"
		}
		if err := h.handleFrame(ctx, c, f); err != nil {
			h.log.Warn("runner protocol error", "runner", c.name, "type", f.Type, "err", err)
			c.close(protocol.CloseProtocol, call.Truncate(err.Error(), 120))
			return "protocol error"
		}
	}
}

// handleFrame hands one frame to the connection's runnerAPI and queues its
// reply. An error is a protocol violation that ends the connection; a
// refused request is answered with an error reply instead.
func (h *Hub) handleFrame(ctx context.Context, c *conn, f protocol.Frame) error {
	rep, err := protocol.ServeFrame(ctx, runnerAPI{h, c}, f)
	if rep == nil {
		return err
	}
	if e := rep.Error; e != nil && e.Code != protocol.ErrOffset && e.Code != protocol.ErrLogIncomplete && e.Code != protocol.ErrNoSpace { // a full disk is logged once per interval
		h.log.Info("runner request refused", "runner", c.name, "type", f.Type, "code", e.Code, "msg", e.Message)
	}
	out, err := protocol.ReplyFrame(f.ID, *rep)
	if err != nil {
		return err
	}
	c.send(out)
	return nil
}

// heartbeat keeps the runner's leases fresh. Leases are written at most
// every quarter lease, not on every heartbeat, to keep idle runners cheap.
func (h *Hub) heartbeat(ctx context.Context, c *conn) {
	now := h.now()
	if now.Sub(c.lastExtend) < h.cfg.Lease/4 {
		return
	}
	busy := h.reg.busy(c.runnerID)
	if !busy {
		c.lastExtend = now
		return
	}
	err := h.store.Write(ctx, func(tx store.Tx) error { return tx.ExtendLeases(c.runnerID, now.Add(h.cfg.Lease)) })
	if err != nil {
		h.logFailed("extend leases", err, "runner", c.name)
		return
	}
	c.lastExtend = now
}

// draining: the runner said it is stopping (a status with no slots); the
// caller holds h.mu.
func (c *conn) draining() bool { return c.slots == 0 }

// detach forgets a closed connection. Its attempts keep their leases; the
// sweep expires them if the runner does not come back in time.
func (h *Hub) detach(c *conn, reason string) {
	current := h.reg.remove(c)
	c.close(websocket.StatusGoingAway, "")
	if !current {
		return
	}
	h.log.Info("runner disconnected", "runner", c.name, "reason", reason)
	defer h.notify(anyChange)
	now := h.now()
	_ = h.store.Write(context.Background(), func(tx store.Tx) error {
		rn, err := tx.Runner(c.runnerID)
		if err != nil {
			return err
		}
		rn.LastSeen = &now
		if err := tx.UpdateRunner(rn); err != nil {
			return err
		}
		return tx.ReleaseRunner(c.runnerID, h.id) // unless it connected to another hub since
	})
	h.hint(hintLeft)
	// An offer can only start after the hub confirms its accept, so offers
	// the runner had not accepted go back to the queue now, not after the
	// lease: a returning runner's late accept is fenced.
	h.requeueOffers(c.runnerID)
	time.AfterFunc(h.cfg.Lease+100*time.Millisecond, h.kickSweep)
}

func (h *Hub) requeueOffers(runnerID string) {
	ctx := context.Background()
	var offered []string
	_ = h.store.Read(ctx, func(tx store.Tx) error {
		mine, err := tx.RunnerActiveAttempts(runnerID)
		for _, a := range mine {
			if a.State == job.AttemptOffered {
				offered = append(offered, a.ID)
			}
		}
		return err
	})
	for _, id := range offered {
		if err := h.expire(ctx, id, false); err != nil {
			h.logFailed("requeue offer of a disconnected runner", err, "attempt", id)
		}
	}
}

func (h *Hub) closeConn(runnerID string, code websocket.StatusCode, reason string) {
	if c := h.reg.get(runnerID); c != nil {
		c.close(code, reason)
	} else {
		h.hint(hintRunner + runnerID) // its hub closes it (syncRunners)
	}
}

// closeConnIfStale closes a connection made with a token that is no longer
// the runner's.
func (h *Hub) closeConnIfStale(runnerID, tokenHash string) {
	if c := h.reg.get(runnerID); c == nil {
		h.hint(hintRunner + runnerID)
	} else if c.tokenHash != tokenHash {
		c.close(protocol.CloseRevoked, "another login was approved with this runner's name (replace)")
	}
}

// errStaleToken refuses a connection whose token was replaced or revoked
// after it was authenticated.
var errStaleToken = errors.New("runner token was revoked or replaced")

// closeIfTokenStale closes c when its token is no longer its runner's.
func (h *Hub) closeIfTokenStale(ctx context.Context, c *conn) {
	var stale bool
	err := h.store.Read(ctx, func(tx store.Tx) error {
		rn, err := tx.Runner(c.runnerID)
		if err != nil {
			return err
		}
		stale = rn.RevokedAt != nil || rn.TokenHash != c.tokenHash
		return nil
	})
	if err != nil || stale {
		c.close(protocol.CloseRevoked, errStaleToken.Error())
	}
}

func (h *Hub) closeAllConns(reason string) {
	for _, c := range h.reg.all() {
		c.close(websocket.StatusGoingAway, reason)
	}
}

// checkNotReady bounds a runner's reason for taking no offers: users see
// it in `drover runners` and in why their jobs wait.
func checkNotReady(why string) error {
	if len(why) > protocol.MaxNotReady {
		return fmt.Errorf("not-ready reason of %d bytes; at most %d", len(why), protocol.MaxNotReady)
	}
	return protocol.CheckPlainText("not-ready reason", why, false)
}

// checkAgents bounds what a runner says it can run.
func checkAgents(agents []string, accounts []protocol.AccountInfo) error {
	if len(agents) > protocol.MaxAgents || len(accounts) > protocol.MaxAccounts {
		return fmt.Errorf("at most %d agents and %d accounts", protocol.MaxAgents, protocol.MaxAccounts)
	}
	for _, a := range agents {
		if a == "" || len(a) > 64 {
			return fmt.Errorf("agent name %q must be 1-64 bytes", a)
		}
		if err := protocol.CheckPlainText("agent name", a, false); err != nil {
			return err
		}
	}
	for _, a := range accounts {
		if a.ID == "" || len(a.ID) > 64 || len(a.Agent) > 64 || len(a.Label) > 64 || len(a.Kind) > 16 || len(a.State) > 16 {
			return fmt.Errorf("account %q out of bounds", call.Truncate(a.ID, 64))
		}
		// Users see these in `drover accounts`.
		for _, f := range [][2]string{{"id", a.ID}, {"agent", a.Agent}, {"label", a.Label}, {"kind", a.Kind}, {"state", a.State}} {
			if err := protocol.CheckPlainText("account "+f[0], f[1], false); err != nil {
				return err
			}
		}
	}
	return nil
}
