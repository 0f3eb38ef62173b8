package runner

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"

	"drover/internal/apitypes"
	"drover/internal/buildinfo"
	"drover/internal/protocol"
	"drover/internal/retry"
)

const (
	dialTimeout  = 30 * time.Second
	writeTimeout = 30 * time.Second
)

// reconnects is the runner's retry policy towards its hub (reconnects,
// registration, hub calls of an attempt): 0.5 s doubling to a minute,
// full jitter.
func reconnects() retry.Policy {
	return retry.Policy{First: 500 * time.Millisecond, Max: time.Minute, Jitter: retry.FullJitter}
}

// hubOutage bounds how long an attempt waits for a hub it cannot reach
// (restarting, say) before the call that needs it fails the attempt.
const hubOutage = 5 * time.Minute

// hubWait is reconnects() for a call of an attempt that waits out an
// unreachable hub, within hubOutage. Its jitter is the runner's (drawn as
// retry's full jitter draws: uniformly in [0, ceiling]).
func (r *Runner) hubWait() retry.Policy {
	p := reconnects()
	p.MaxElapsed = hubOutage
	p.Rand = func(n int64) int64 { return int64(r.jitter(time.Duration(n - 1))) }
	return p
}

// ErrEnded is what Run's error wraps when the hub ended this runner
// (refused its hello, revoked or replaced it): starting it again as it is
// cannot help, so a supervisor should not (drover runner exits 3).
var ErrEnded = errors.New("the hub ended this runner")

// comeBack is a dial the hub refused for now, saying when to come back
// (protocol.RetryAfter).
type comeBack struct {
	after time.Duration
	place string // to bring back (protocol.PlaceHeader)
}

func (e comeBack) Error() string { return fmt.Sprintf("hub busy: come back in %s", e.after) }

// fatalError ends Run instead of reconnecting.
type fatalError struct{ err error }

func (e *fatalError) Error() string   { return e.err.Error() }
func (e *fatalError) Unwrap() []error { return []error{e.err, ErrEnded} }

func fatalf(format string, args ...any) error { return &fatalError{fmt.Errorf(format, args...)} }

// session is one WebSocket connection, from dial to close.
type session struct {
	conn   *websocket.Conn
	ctx    context.Context // cancelled to end the session
	cancel context.CancelFunc
	kick   chan struct{}    // wakes the writer
	final  chan struct{}    // closed: flush, then close normally
	outbox []protocol.Frame // under Runner.mu
}

func (s *session) push(f protocol.Frame) {
	s.outbox = append(s.outbox, f)
	s.wake()
}

func (s *session) wake() {
	select {
	case s.kick <- struct{}{}:
	default:
	}
}

// connectURL turns the hub's URL into its runner gateway's.
func connectURL(hub string) (string, error) {
	u, err := url.Parse(hub)
	if err != nil {
		return "", fmt.Errorf("hub URL: %w", err)
	}
	switch u.Scheme {
	case "http":
		u.Scheme = "ws"
	case "https":
		u.Scheme = "wss"
	default:
		return "", fmt.Errorf("hub URL %q must start with http:// or https://", hub)
	}
	u.Path = strings.TrimRight(u.Path, "/") + apitypes.APIPrefix + "/runner/connect"
	return u.String(), nil
}

// retryCeiling is the ceiling of the n-th reconnect delay (n from 0).
func retryCeiling(n int) time.Duration { return reconnects().Ceiling(n) }

// reconnectCeiling is the ceiling of the n-th reconnect delay. A runner
// holding attempts tries at least every quarter lease however often it
// failed: the hub gives its attempts up a lease after it last heard of it
// (or after its own restart or stall), and a longer wait would lose work
// that a hub back in time could have kept.
func (r *Runner) reconnectCeiling(n int) time.Duration {
	return r.boundWait(retryCeiling(n))
}

// boundWait is d, or the quarter lease if shorter while the runner holds
// attempts (see reconnectCeiling).
func (r *Runner) boundWait(d time.Duration) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if q := r.timing.quarterLease(); len(r.attempts) > 0 && q > 0 {
		d = min(d, max(q, retryCeiling(0)))
	}
	return d
}

// pingTimeout is how long the runner waits for its hub's pong before it
// takes the hub for gone: three heartbeats, at least 10 s (a busy hub
// answers late). A runner given several hubs waits at most a quarter
// lease: a hung hub (stopped, frozen) keeps the connection open, the other
// hubs count it dead after their --hub-ttl, and its runners' attempts are
// lost unless they move to another hub within the lease.
func (r *Runner) pingTimeout(hb time.Duration) time.Duration {
	d := max(3*hb, 10*time.Second)
	if q := r.timings().quarterLease(); r.hubs.len() > 1 && q > 0 {
		d = min(d, max(q, time.Second))
	}
	return d
}

// quarterLease is the most a runner holding attempts lets pass without
// trying its hubs (zero: no lease told yet): a hub keeps the attempts a
// lease after it last heard of the runner.
func (t timing) quarterLease() time.Duration { return t.lease / 4 }

// fullJitter picks a delay uniformly in [0, ceiling].
func fullJitter(ceiling time.Duration) time.Duration {
	return retry.Policy{First: ceiling, Jitter: retry.FullJitter}.Delay(0)
}

// connectLoop keeps a connection to the hub until ctx ends, the runner
// closes, or the hub ends this runner (a fatalError). A connection that
// fails or ends moves the runner on to the next hub of its list (the hub
// may have died; any other serves it the same).
func (r *Runner) connectLoop(ctx context.Context) error {
	n := 0
	place := "" // what the hub said to bring back (protocol.PlaceHeader)
	for {
		hub := r.hubs.current()
		welcomed, err := r.connectOnce(ctx, hub, place)
		place = ""
		if _, fatal := errors.AsType[*fatalError](err); fatal {
			return err
		}
		if ctx.Err() != nil || r.isClosing() {
			return nil
		}
		if welcomed {
			n = 0
		}
		if cb, ok := errors.AsType[comeBack](err); ok {
			// The hub said when it has room: that time, spread over the
			// second after it, with no further backoff, and not beyond
			// what the runner's attempts can wait (reconnectCeiling).
			d := r.boundWait(cb.after) + r.jitter(time.Second)
			place = cb.place
			r.log.Info("hub busy; coming back when it said", "hub", hub, "after", d.Round(time.Millisecond))
			if r.sleep(ctx, d) != nil {
				return nil
			}
			continue
		}
		next := r.hubs.failed(hub)
		d := r.jitter(protocol.ReconnectCeiling(err, r.reconnectCeiling(n)))
		n++
		r.log.Warn("hub connection lost; reconnecting", "hub", hub, "err", err, "next", next, "after", d.Round(time.Millisecond))
		if r.sleep(ctx, d) != nil {
			return nil
		}
	}
}

func (r *Runner) isClosing() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.closing
}

// connectOnce runs one connection: dial, hello, welcome, then reader,
// writer and pinger until it breaks. welcomed says whether it got that far.
// place is the one a busy hub gave it when it last dialed ("" for none).
func (r *Runner) connectOnce(ctx context.Context, hub, place string) (welcomed bool, err error) {
	wsURL, err := connectURL(hub)
	if err != nil {
		return false, err
	}
	header := http.Header{"Authorization": {"Bearer " + r.login.Token}}
	if place != "" {
		header.Set(protocol.PlaceHeader, place)
	}
	dctx, cancel := context.WithTimeout(ctx, dialTimeout)
	conn, resp, err := websocket.Dial(dctx, wsURL, &websocket.DialOptions{
		HTTPClient: hubClient(r.timings().heartbeat),
		HTTPHeader: header,
	})
	cancel()
	if err != nil {
		if resp != nil && (resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden) {
			return false, fatalf("hub %s rejected the token of runner %s (revoked, or never approved): run `drover runner login` again",
				hub, r.login.Name)
		}
		if d, place, ok := protocol.RetryAfter(resp); ok {
			return false, comeBack{d, place}
		}
		return false, fmt.Errorf("connect to %s: %w", wsURL, err)
	}
	defer conn.CloseNow()
	conn.SetReadLimit(protocol.MaxFrame)
	sctx, scancel := context.WithCancel(ctx)
	defer scancel()
	s := &session{conn: conn, ctx: sctx, cancel: scancel, kick: make(chan struct{}, 1), final: make(chan struct{})}

	r.mu.Lock()
	hello := protocol.Hello{Protocol: protocol.Version, RunnerVersion: buildinfo.Version(), Slots: r.cfg.Slots,
		Labels: r.cfg.Labels, Attempts: r.heldLocked(), NotReady: r.notReadyLocked(), WantQueue: r.cfg.Drain,
		Images: r.cfg.Images}
	hello.Agents, hello.Accounts = r.agentsLocked()
	r.mu.Unlock()
	f, err := protocol.NewFrame(protocol.TypeHello, "", hello)
	if err != nil {
		return false, err
	}
	if err := r.write(s, f); err != nil {
		return false, fmt.Errorf("send hello: %w", err)
	}
	w, err := r.awaitWelcome(s)
	if err != nil {
		return false, err
	}
	r.adoptName(w.RunnerName)
	hb := r.adopt(s, w)
	defer r.detach(s)
	r.log.Info("connected to hub", "hub", hub, "runner_id", w.RunnerID)

	var wg sync.WaitGroup
	wg.Go(func() { r.writeLoop(s, hb) })
	wg.Go(func() { r.pingLoop(s, hb) })
	err = r.readLoop(s)
	scancel()
	wg.Wait()
	return true, err
}

func (r *Runner) awaitWelcome(s *session) (protocol.Welcome, error) {
	ctx, cancel := context.WithTimeout(s.ctx, r.welcomeTimeout)
	defer cancel()
	f, err := r.read(ctx, s)
	if err != nil {
		return protocol.Welcome{}, fmt.Errorf("wait for welcome: %w", err)
	}
	var w protocol.Welcome
	if f.Type != protocol.TypeWelcome {
		return w, fmt.Errorf("hub sent %q before welcome", f.Type)
	}
	if err := f.Decode(&w); err != nil {
		return w, err
	}
	if w.Protocol != protocol.Version {
		r.log.Warn("hub speaks another protocol version", "hub", w.Protocol, "runner", protocol.Version)
	}
	return w, nil
}

// adopt applies a welcome: the hub's timings, then its drops, then every
// pending request again (same ids, same order), then a status.
func (r *Runner) adopt(s *session, w protocol.Welcome) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.timing = timingFrom(w)
	for _, d := range w.Drop {
		r.dropLocked(d)
	}
	r.setQueueLocked(queueUntold) // until this hub says
	if r.stopping || r.lc.ending != "" {
		// Draining: say so before the resent finishes release attempts
		// that the hub would otherwise offer straight back.
		s.outbox = append(s.outbox, r.statusLocked())
	}
	for _, p := range r.pending {
		s.outbox = append(s.outbox, p.frame)
	}
	r.sess = s
	r.markDirtyLocked()
	if r.closing {
		close(s.final)
	}
	return r.timing.heartbeat
}

// adoptName makes the hub's name for this runner the one its login holds:
// a login saved under another name (by an older drover, or edited) would
// otherwise disagree with the hub. r.login is only used by the connection
// goroutine.
func (r *Runner) adoptName(name string) {
	if name == "" || name == r.login.Name || !ValidName(name) {
		return
	}
	r.log.Warn("the hub knows this runner by another name; saving it in the login", "login_name", r.login.Name, "hub_name", name)
	l := r.login
	l.Name = name
	if err := SaveLogin(r.cfg.Home, l); err != nil {
		r.log.Error("could not save the runner's name", "err", err)
	}
	r.login = l
}

func (r *Runner) detach(s *session) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.sess == s {
		r.sess = nil
	}
}

// dropLocked forgets an attempt the hub says is not ours any more.
func (r *Runner) dropLocked(d protocol.DropOrder) {
	r.dropRequestsLocked(d.Attempt) // a decline, for one never held
	if a := r.attempts[d.Attempt]; a != nil {
		r.log.Info("hub dropped attempt", "attempt", a.ref.String(), "reason", d.Reason)
		r.forgetLocked(a, true)
	}
}

func (r *Runner) read(ctx context.Context, s *session) (protocol.Frame, error) {
	for {
		typ, b, err := s.conn.Read(ctx)
		if err != nil {
			return protocol.Frame{}, r.closeErr(err)
		}
		var f protocol.Frame
		if typ != websocket.MessageText {
			r.log.Warn("ignoring a binary frame from the hub")
			continue
		}
		if err := json.Unmarshal(b, &f); err != nil {
			r.log.Warn("ignoring a malformed frame from the hub", "err", err)
			continue
		}
		return f, nil
	}
}

// closeErr turns the hub's close codes that end this runner into fatal
// errors; every other failure means reconnect.
func (r *Runner) closeErr(err error) error {
	var ce websocket.CloseError
	if errors.As(err, &ce) && ce.Code == protocol.CloseRefused {
		// The same hello would be refused again: reconnecting would only
		// hide the reason in the log.
		return fatalf("the hub refused runner %s: %s", r.login.Name, ce.Reason)
	}
	switch websocket.CloseStatus(err) {
	case protocol.CloseReplaced:
		return fatalf("replaced by a newer connection of runner %s", r.login.Name)
	case protocol.CloseRevoked:
		return fatalf("the hub revoked runner %s: run `drover runner login` to log in again", r.login.Name)
	case protocol.CloseVersion:
		r.log.Error("the hub refused this runner's protocol version; upgrade drover", "runner_protocol", protocol.Version)
	}
	return err
}

func (r *Runner) readLoop(s *session) error {
	for {
		f, err := r.read(s.ctx, s)
		if err != nil {
			return err
		}
		if f.Type == protocol.TypeReply {
			r.handleReply(f)
			continue
		}
		switch known, err := protocol.ServePush(pushes{r}, f); {
		case err != nil:
			r.log.Warn("ignoring a malformed frame", "type", f.Type, "err", err)
		case !known:
			r.log.Debug("ignoring frame", "type", f.Type) // newer hubs may send more
		}
	}
}

// writeLoop is the connection's only writer: queued frames in order, then
// the status, and a heartbeat every interval; while the runner holds no
// attempts and its hub offers an idle interval, an idle heartbeat that
// seldom instead (each heartbeat is a wakeup of the hub's).
func (r *Runner) writeLoop(s *session, hb time.Duration) {
	defer s.cancel()
	// Heartbeats go on whole seconds (protocol.NextBeat): the hub reads
	// its runners' together.
	t := time.NewTimer(protocol.NextBeat(time.Now(), hb))
	defer t.Stop()
	var idleBeat time.Time // when the last frame, an idle heartbeat, went (zero: another frame was last)
	for {
		final := false
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
			t.Reset(protocol.NextBeat(time.Now(), hb))
			f, due := r.heartbeatDue(hb, idleBeat, time.Now())
			if !due {
				continue
			}
			if r.write(s, f) != nil {
				return
			}
			idleBeat = time.Time{}
			if len(f.Body) > 0 {
				idleBeat = time.Now()
			}
			continue
		case <-s.kick:
		case <-s.final:
			final = true
		}
		for _, f := range r.outgoing(s) {
			if r.write(s, f) != nil {
				return
			}
			idleBeat = time.Time{}
		}
		if final {
			s.conn.Close(websocket.StatusNormalClosure, "runner stopping")
			return
		}
	}
}

func (r *Runner) write(s *session, f protocol.Frame) error {
	b, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("encode %s frame: %w", f.Type, err)
	}
	ctx, cancel := context.WithTimeout(s.ctx, writeTimeout)
	defer cancel()
	if err := s.conn.Write(ctx, websocket.MessageText, b); err != nil {
		s.cancel()
		return fmt.Errorf("send %s frame: %w", f.Type, err)
	}
	return nil
}

// heartbeatDue is the heartbeat to send at a tick of the heartbeat timer,
// if one is due: the idle one while the runner holds no attempts and the
// hub offered an idle interval (again once that interval has nearly
// passed since the last, lastIdle), else the regular one. After any other
// frame the next heartbeat goes at once: the hub waits only three
// heartbeat intervals after a frame that is not an idle heartbeat.
func (r *Runner) heartbeatDue(hb time.Duration, lastIdle, now time.Time) (protocol.Frame, bool) {
	r.mu.Lock()
	idle := r.timing.idle
	holds := len(r.attempts) > 0
	r.mu.Unlock()
	if holds || idle <= hb {
		return protocol.HeartbeatFrame(), true
	}
	if !lastIdle.IsZero() && now.Sub(lastIdle)+hb/2 < idle {
		return protocol.Frame{}, false
	}
	return protocol.IdleHeartbeatFrame(), true
}

// needsPing says whether a ping is worth the hub's wakeup and pong. A hub
// whose host or network vanished is noticed by TCP (hubDialer's user
// timeout and keepalive) without one; a ping finds what TCP cannot, a hub
// process that hangs (stopped, deadlocked) while its kernel still
// acknowledges. That matters only to a runner holding attempts (their
// leases run while it waits) or one given other hubs to move to.
func (r *Runner) needsPing() bool {
	r.mu.Lock()
	holds := len(r.attempts) > 0
	r.mu.Unlock()
	return holds || r.hubs.len() > 1
}

// pingLoop notices a hub that hangs with the connection open, which TCP
// does not (see needsPing).
func (r *Runner) pingLoop(s *session, hb time.Duration) {
	t := time.NewTicker(hb)
	defer t.Stop()
	for {
		select {
		case <-s.ctx.Done():
			return
		case <-t.C:
		}
		if !r.needsPing() {
			continue
		}
		ctx, cancel := context.WithTimeout(s.ctx, r.pingTimeout(hb))
		err := s.conn.Ping(ctx)
		cancel()
		if err != nil {
			if s.ctx.Err() == nil && !errors.Is(err, net.ErrClosed) { // else the reader tells why
				r.log.Warn("hub did not answer a ping", "err", err)
			}
			s.cancel()
			return
		}
	}
}
