package hub

import (
	"context"
	"errors"
	"fmt"
	"time"

	"drover/internal/auth"
	"drover/internal/hub/call"
	"drover/internal/hub/gateway"
	"drover/internal/protocol"
	"drover/internal/rules"
	"drover/internal/store"
)

// runnerSession is one runner connected to this hub, as the core sees it:
// who it is, what its hello said, and what it reported since. The gateway
// carries it (link).
type runnerSession struct {
	runnerID  string
	name      string
	tokenHash string
	labels    map[string]string
	images    []string  // Hello.Images: the images its jobs may name
	shape     string    // its labels' and images' key (shapeOf)
	version   string    // Hello.RunnerVersion
	wantQueue bool      // Hello.WantQueue: send it queue frames
	baseURL   string    // the hub's URL as this runner reached it
	link      call.Link // its connection's pushes and end

	// its requests' goroutine only
	lastExtend time.Time
	recorded   shown // what its holding row says (runnerstatus.go)

	// under the registry (registry.mu)
	slots         int
	cooldownUntil time.Time
	agents        []string               // what it can run now (Hello.Agents)
	notReady      string                 // why it takes no offers now (Hello.NotReady); "": ready
	accounts      []protocol.AccountInfo // for display
	access        *runnerAccess          // owner and shares; replaced, never changed in place
	waiting       int                    // what it was last told of the queue (waiting.go)
}

// A runnerSession is the protocol.Runner of its runner: pushes go to its link.
var _ protocol.Runner = (*runnerSession)(nil)

func (c *runnerSession) Offer(o protocol.Offer)        { c.link.Offer(o) }
func (c *runnerSession) Cancel(o protocol.CancelOrder) { c.link.Cancel(o) }
func (c *runnerSession) Drop(o protocol.DropOrder)     { c.link.Drop(o) }
func (c *runnerSession) Queue(q protocol.Queue)        { c.link.Queue(q) }
func (c *runnerSession) close(code int, reason string) { c.link.Close(code, reason) }

// gatewayCore is the core as the runner gateway sees it.
type gatewayCore struct{ h *Hub }

var _ gateway.Core = gatewayCore{}

func (g gatewayCore) StalledAfter(t time.Time) bool { return g.h.stall.look(g.h.now()).After(t) }

func (g gatewayCore) AdmitHello(c call.Caller, place string) (func(), time.Duration, string) {
	if g.h.stopping.Load() {
		// The runners it just closed dial again at once: a stopping hub
		// takes none of them in (it would have to detach them too, and
		// its server waits for requests in hand before it stops).
		return nil, stoppingRetry, ""
	}
	return g.h.admit.door(c.TokenHash, place)
}

// TurnAway answers, before its token is read from the store, a dial the
// door would tell to come back anyway: every dial to a stopping hub, and
// one bringing a place the door honours but has no room for yet
// (admission.turnAway). The rest are authenticated (ok false).
func (g gatewayCore) TurnAway(authorization, place string) (after time.Duration, next string, ok bool) {
	if g.h.stopping.Load() {
		return stoppingRetry, "", true // the hub's store may be closing: no read
	}
	tok, err := auth.BearerToken(authorization)
	if err != nil {
		return 0, "", false // refused when authenticated
	}
	return g.h.admit.turnAway(auth.Hash(tok), place)
}

// stoppingRetry is when a stopping hub tells a dial to come back: its
// successor is about to listen.
const stoppingRetry = time.Second

// Attach checks a runner's hello, reads its access, reconciles what it
// holds (attach) and registers it.
func (g gatewayCore) Attach(ctx context.Context, p call.Caller, hello protocol.Hello, link call.Link, baseURL string) (gateway.Session, error) {
	h := g.h
	if err := checkHello(&hello); err != nil {
		return nil, err
	}
	if h.stopping.Load() {
		return nil, call.Closed{Code: call.CloseTryAgainLater, Reason: "hub shutting down; reconnect"}
	}
	release, err := h.admit.enter(ctx)
	if err != nil {
		return nil, err
	}
	defer release()
	var access *runnerAccess
	// The runner's owner and shares are read afresh at every connect, so a
	// reconnecting runner is offered only what its access allows now.
	if err := h.store.Read(ctx, func(tx store.Tx) error {
		var err error
		access, err = loadRunnerAccess(tx, p.RunnerID)
		return err
	}); err != nil {
		h.log.Error("runner connection refused: cannot read its access", "runner", p.Name, "err", err)
		return nil, call.Closed{Code: call.CloseTryAgainLater, Reason: "hub cannot read the runner's record; reconnect"}
	}
	c := &runnerSession{
		runnerID: p.RunnerID, name: p.Name, tokenHash: p.TokenHash,
		slots: hello.Slots, labels: hello.Labels, version: hello.RunnerVersion, wantQueue: hello.WantQueue, agents: hello.Agents, accounts: hello.Accounts, notReady: hello.NotReady, baseURL: baseURL,
		images: hello.Images, shape: shapeOf(hello.Labels, hello.Images),
		link: link, access: access,
	}
	if err := h.attach(ctx, c, hello); err != nil {
		if errors.Is(err, errStaleToken) {
			return nil, call.Closed{Code: protocol.CloseRevoked, Reason: err.Error()}
		} else if _, ok := errors.AsType[helloRefusal](err); ok {
			return nil, call.Closed{Code: protocol.CloseRefused, Reason: err.Error()}
		}
		return nil, err
	}
	c.recorded = c.shown() // attach recorded it (holdRunner)
	// A replace or revoke that committed after attach's check but before
	// the connection was listed found nothing to close: look again.
	h.closeIfTokenStale(ctx, c)
	// A share changed between the read above and attach found no
	// connection to update: read the access again now that it is attached.
	if err := h.refreshAccess(ctx, c.runnerID); err != nil {
		h.log.Warn("could not reload a runner's access", "runner", c.name, "err", err)
	}
	h.log.Info("runner connected", "runner", c.name, "slots", c.slots, "held", len(hello.Attempts))
	h.kick()
	return runnerAPI{h, c}, nil
}

// helloRefusal is a hello refused for what it says, which the same hello
// would be again: closed with CloseRefused, on which the runner exits.
type helloRefusal struct{ error }

// checkHello checks what a hello says (the gateway checked its frame and
// version) and fills in what older runners leave out.
func checkHello(hello *protocol.Hello) error {
	refuse := func(err error) error {
		return call.Closed{Code: protocol.CloseRefused, Reason: call.Truncate(err.Error(), 120)}
	}
	if hello.Slots < 1 || hello.Slots > protocol.MaxSlots {
		return refuse(fmt.Errorf("slots must be 1 to %d", protocol.MaxSlots))
	}
	if err := rules.CheckLabels(hello.Labels); err != nil {
		return refuse(err)
	}
	if err := rules.CheckImagePatterns(hello.Images); err != nil {
		return refuse(err)
	}
	if len(hello.RunnerVersion) > protocol.MaxVersion {
		return refuse(fmt.Errorf("runner version of %d bytes; at most %d", len(hello.RunnerVersion), protocol.MaxVersion))
	}
	if len(hello.Attempts) > protocol.MaxHeldReports {
		return call.Closed{Code: protocol.CloseProtocol, Reason: "too many attempts in hello"}
	}
	if err := checkAgents(hello.Agents, hello.Accounts); err != nil {
		return refuse(err)
	}
	if err := checkNotReady(hello.NotReady); err != nil {
		return refuse(err)
	}
	if err := rules.CheckPlainText("runner version", hello.RunnerVersion, false); err != nil {
		return refuse(err)
	}
	if hello.Agents == nil {
		hello.Agents = []string{"exec"} // a runner from before agents were reported
	}
	for _, a := range hello.Attempts {
		if a.Validate() != nil {
			return call.Closed{Code: protocol.CloseProtocol, Reason: "malformed attempt in hello"}
		}
	}
	return nil
}

// heartbeat keeps the runner's leases fresh. Leases are written at most
// every quarter lease, not on every heartbeat, to keep idle runners cheap.
func (h *Hub) heartbeat(ctx context.Context, c *runnerSession) {
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
// caller holds the registry's lock.
func (c *runnerSession) draining() bool { return c.slots == 0 }

// detach forgets a closed connection. Its attempts keep their leases; the
// sweep expires them if the runner does not come back in time.
func (h *Hub) detach(c *runnerSession, reason string) {
	current := h.reg.remove(c)
	c.close(call.CloseGoingAway, "")
	if !current {
		return
	}
	h.log.Info("runner disconnected", "runner", c.name, "reason", reason)
	h.departLater(c)
}

func (h *Hub) closeConn(runnerID string, code int, reason string) {
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
func (h *Hub) closeIfTokenStale(ctx context.Context, c *runnerSession) {
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

// checkNotReady bounds a runner's reason for taking no offers: users see
// it in `drover runners` and in why their jobs wait.
func checkNotReady(why string) error {
	if len(why) > protocol.MaxNotReady {
		return fmt.Errorf("not-ready reason of %d bytes; at most %d", len(why), protocol.MaxNotReady)
	}
	return rules.CheckPlainText("not-ready reason", why, false)
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
		if err := rules.CheckPlainText("agent name", a, false); err != nil {
			return err
		}
	}
	for _, a := range accounts {
		if a.ID == "" || len(a.ID) > 64 || len(a.Agent) > 64 || len(a.Label) > 64 || len(a.Kind) > 16 || len(a.State) > 16 {
			return fmt.Errorf("account %q out of bounds", call.Truncate(a.ID, 64))
		}
		// Users see these in `drover accounts`.
		for _, f := range [][2]string{{"id", a.ID}, {"agent", a.Agent}, {"label", a.Label}, {"kind", a.Kind}, {"state", a.State}} {
			if err := rules.CheckPlainText("account "+f[0], f[1], false); err != nil {
				return err
			}
		}
	}
	return nil
}
