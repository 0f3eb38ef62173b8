package bench

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/coder/websocket"

	"drover/internal/apitypes"
	"drover/internal/protocol"
	"drover/internal/retry"
)

// writeTimeout bounds one frame write to the hub.
const writeTimeout = 10 * time.Second

// dialRunner opens the runner gateway with a runner token, says hello with
// the given labels and one slot, and returns the connection and the welcome.
// place is what a busy hub said to bring back ("" for none).
func dialRunner(ctx context.Context, hubURL, token, place string, labels map[string]string) (*websocket.Conn, protocol.Welcome, error) {
	var w protocol.Welcome
	dctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	u := "ws" + strings.TrimPrefix(hubURL, "http") + apitypes.APIPrefix + "/runner/connect"
	header := http.Header{"Authorization": {"Bearer " + token}}
	if place != "" {
		header.Set(protocol.PlaceHeader, place)
	}
	ws, resp, err := websocket.Dial(dctx, u, &websocket.DialOptions{HTTPHeader: header})
	if err != nil {
		if d, place, ok := protocol.RetryAfter(resp); ok {
			return nil, w, comeBack{d, place}
		}
		return nil, w, fmt.Errorf("dial the runner gateway: %w", err)
	}
	ws.SetReadLimit(protocol.MaxFrame)
	hello := protocol.Hello{Protocol: protocol.Version, RunnerVersion: "drover-bench", Slots: 1, Labels: labels, Attempts: []protocol.Held{}}
	if err := writeFrame(dctx, ws, protocol.TypeHello, "", hello); err != nil {
		ws.CloseNow()
		return nil, w, err
	}
	_, data, err := ws.Read(dctx)
	if err != nil {
		ws.CloseNow()
		return nil, w, fmt.Errorf("wait for welcome: %w", err)
	}
	var f protocol.Frame
	if err := json.Unmarshal(data, &f); err != nil || f.Type != protocol.TypeWelcome {
		ws.CloseNow()
		return nil, w, fmt.Errorf("want a welcome frame, got %.200q", data)
	}
	if err := f.Decode(&w); err != nil {
		ws.CloseNow()
		return nil, w, err
	}
	if w.HeartbeatInterval <= 0 {
		ws.CloseNow()
		return nil, w, fmt.Errorf("welcome has no heartbeat interval")
	}
	return ws, w, nil
}

// writeFrame encodes and writes one frame.
func writeFrame(ctx context.Context, ws *websocket.Conn, typ, id string, body any) error {
	f, err := protocol.NewFrame(typ, id, body)
	if err != nil {
		return err
	}
	b, err := json.Marshal(f)
	if err != nil {
		return fmt.Errorf("encode %s frame: %w", typ, err)
	}
	wctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	if err := ws.Write(wctx, websocket.MessageText, b); err != nil {
		return fmt.Errorf("write %s frame: %w", typ, err)
	}
	return nil
}

// comeBack is a dial the hub refused for now, saying when to come back.
type comeBack struct {
	after time.Duration
	place string // to bring back (protocol.PlaceHeader)
}

func (e comeBack) Error() string { return fmt.Sprintf("hub busy: come back in %s", e.after) }

// beat is how a connection heartbeats, as internal/runner's writeLoop
// does: every interval, or with an idle interval (the welcome's, for a
// runner holding nothing) an idle heartbeat that seldom, and once more
// within the interval after any other frame (other, set by the reader).
type beat struct {
	every, idle time.Duration
	other       *atomic.Bool // nil: the connection never heartbeats idle
}

func idleBeat(w protocol.Welcome, other *atomic.Bool) beat {
	return beat{every: w.HeartbeatInterval.D(), idle: w.IdleHeartbeatInterval.D(), other: other}
}

// heartbeats writes heartbeats as b says until ctx ends or a write fails.
// The first one comes after a random part of the interval, so that a
// fleet connected in a burst spreads out like independent machines; each
// goes on a whole second, as a runner's does (protocol.NextBeat).
func heartbeats(ctx context.Context, ws *websocket.Conn, b beat, sent *atomic.Int64) {
	t := time.NewTimer(time.Until(protocol.BeatAt(time.Now().Add(rand.N(b.every)), b.every)))
	defer t.Stop()
	frame := protocol.HeartbeatFrame()
	if b.other != nil && b.idle > b.every {
		frame = protocol.IdleHeartbeatFrame()
	} else {
		b.other = nil
	}
	enc, err := json.Marshal(frame)
	if err != nil {
		return
	}
	var last time.Time // of the last idle heartbeat
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		t.Reset(protocol.NextBeat(time.Now(), b.every))
		if b.other != nil && !b.other.Swap(false) && !last.IsZero() && time.Since(last)+b.every/2 < b.idle {
			continue
		}
		wctx, cancel := context.WithTimeout(ctx, writeTimeout)
		err := ws.Write(wctx, websocket.MessageText, enc)
		cancel()
		if err != nil {
			return
		}
		sent.Add(1)
		first := last.IsZero()
		last = time.Now()
		if b.other != nil && first {
			// The next idle heartbeat comes after a random part of the idle
			// interval, so that the fleet's are spread as independent
			// machines' are in the steady state, not bunched by the connect.
			last = last.Add(-rand.N(b.idle))
		}
	}
}

// idleLabels are the idle runners' labels. Only burst jobs ask for them.
func idleLabels() map[string]string { return map[string]string{"bench": "idle"} }

// fleet is a set of idle runners: real WebSocket connections that said hello
// and then only heartbeat at the hub's interval, as a runner without work
// does. Each costs the bench two goroutines. An offer of a burst job (one
// asking for idleLabels) is accepted and, on the hub's ok, finished at once
// (completed, empty log, no process); any other offer is declined. With
// reconnect set, a runner whose connection ends dials again as a runner
// does (reconnectPolicy) instead of counting as lost.
type fleet struct {
	url    string
	ctx    context.Context // lifetime of the connections
	cancel context.CancelFunc
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[string]*websocket.Conn // token → its current connection

	closing    atomic.Bool
	reconnect  atomic.Bool
	heartbeats atomic.Int64 // heartbeats written
	offers     atomic.Int64 // offers of other jobs received (declined; none are expected)
	lost       atomic.Int64 // connections that ended while the bench still held them
	redialed   atomic.Int64 // connections made again after one ended (reconnect)
	refused    atomic.Int64 // runners the hub refused for good (revoked, refused hello)
	tries      atomic.Int64 // dials that failed and were tried again (reconnect)
	toldLater  atomic.Int64 // of those, dials the hub answered with when to come back
	refusals   refusalCounts

	burst burstLog
}

// reconnectPolicy is internal/runner's reconnects(): exponential from
// 500 ms to a minute with full jitter, which is what spreads a fleet's
// return after a hub restart.
var reconnectPolicy = retry.Policy{First: 500 * time.Millisecond, Max: time.Minute, Jitter: retry.FullJitter}

func newFleet(ctx context.Context, hubURL string) *fleet {
	fctx, cancel := context.WithCancel(ctx)
	return &fleet{url: hubURL, ctx: fctx, cancel: cancel, conns: map[string]*websocket.Conn{}}
}

func (f *fleet) size() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.conns)
}

// connected is how many runners hold a connection now.
func (f *fleet) connected() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	n := 0
	for _, ws := range f.conns {
		if ws != nil {
			n++
		}
	}
	return n
}

// connect connects one idle runner per token, a few at a time.
func (f *fleet) connect(ctx context.Context, tokens []string) error {
	sem := make(chan struct{}, 16)
	errs := make(chan error, len(tokens))
	var wg sync.WaitGroup
	for _, tok := range tokens {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			ws, w, err := dialRunner(ctx, f.url, tok, "", idleLabels())
			if err != nil {
				errs <- err
				return
			}
			f.add(tok, ws, w)
		}()
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return fmt.Errorf("connect idle runners: %w", err)
	}
	return nil
}

func (f *fleet) add(tok string, ws *websocket.Conn, w protocol.Welcome) {
	f.mu.Lock()
	f.conns[tok] = ws
	f.mu.Unlock()
	f.wg.Go(func() { f.member(tok, ws, w) })
}

// member runs one runner's connections: heartbeats and the reader on each,
// and with reconnect a new dial after each ends.
func (f *fleet) member(tok string, ws *websocket.Conn, w protocol.Welcome) {
	var other atomic.Bool // the reader wrote a frame: the next heartbeat is due within the interval
	for {
		cctx, stop := context.WithCancel(f.ctx)
		done := make(chan struct{})
		go func() { defer close(done); heartbeats(cctx, ws, idleBeat(w, &other), &f.heartbeats) }()
		f.read(ws, &other)
		stop()
		<-done
		if f.closing.Load() {
			return
		}
		if !f.reconnect.Load() {
			f.lost.Add(1)
			return
		}
		f.mu.Lock()
		f.conns[tok] = nil
		f.mu.Unlock()
		var err error
		if ws, w, err = f.redial(tok); err != nil {
			if f.ctx.Err() == nil {
				f.refused.Add(1)
			}
			return
		}
		f.mu.Lock()
		f.conns[tok] = ws
		f.mu.Unlock()
		f.redialed.Add(1)
	}
}

// redial dials until the hub takes the runner back, as a runner does
// (internal/runner's connectLoop): after a jittered wait, again with its
// backoff, or when a busy hub said to come back (protocol.RetryAfter, no
// backoff then); it gives up only when the hub refuses it for good (or the
// fleet closes).
func (f *fleet) redial(tok string) (*websocket.Conn, protocol.Welcome, error) {
	wait := reconnectPolicy.Delay(0)
	place := ""
	for n := 1; ; {
		if err := retry.Sleep(f.ctx, wait); err != nil {
			return nil, protocol.Welcome{}, err
		}
		ws, w, err := dialRunner(f.ctx, f.url, tok, place, idleLabels())
		place = ""
		if err == nil {
			return ws, w, nil
		}
		switch websocket.CloseStatus(err) {
		case protocol.CloseRefused, protocol.CloseRevoked:
			return nil, w, err
		}
		f.tries.Add(1)
		f.refusals.count(err)
		if cb, ok := errors.AsType[comeBack](err); ok {
			f.toldLater.Add(1)
			wait, place = cb.after+rand.N(time.Second), cb.place
			continue
		}
		wait = rand.N(protocol.ReconnectCeiling(err, reconnectPolicy.Ceiling(n)))
		n++
	}
}

// The kinds of refused dials a restart's report tells apart, so that a
// change to the door or the backoff shows where the fleet's time went.
const (
	refusedNotListening = iota // nothing listening: the hub down, or not up yet
	refusedPlace               // 503 with a place (protocol.PlaceHeader)
	refusedNoPlace             // 503 without one (a stopping hub)
	refusedLater               // closed with 1013 after the upgrade
	refusedOther
	refusalKinds
)

// refusalCounts counts refused dials by kind.
type refusalCounts [refusalKinds]atomic.Int64

func (c *refusalCounts) count(err error) {
	kind := refusedOther
	if cb, ok := errors.AsType[comeBack](err); ok {
		kind = refusedNoPlace
		if cb.place != "" {
			kind = refusedPlace
		}
	} else if protocol.NotListening(err) {
		kind = refusedNotListening
	} else if websocket.CloseStatus(err) == protocol.CloseTryAgainLater {
		kind = refusedLater
	}
	c[kind].Add(1)
}

func (c *refusalCounts) load() (n [refusalKinds]int64) {
	for i := range c {
		n[i] = c[i].Load()
	}
	return n
}

// read is the connection's one reader: it keeps control frames flowing,
// takes burst jobs from offer to finish and declines any other offer.
func (f *fleet) read(ws *websocket.Conn, other *atomic.Bool) {
	held := map[string]protocol.AttemptRef{} // request id → its attempt
	for {
		_, data, err := ws.Read(f.ctx)
		if err != nil {
			return // member counts it lost or dials again
		}
		var fr protocol.Frame
		if json.Unmarshal(data, &fr) != nil {
			continue
		}
		switch fr.Type {
		case protocol.TypeOffer:
			var o protocol.Offer
			if fr.Decode(&o) != nil {
				continue
			}
			if !isBurstJob(o.Spec) {
				f.offers.Add(1)
				other.Store(true)
				_ = writeFrame(f.ctx, ws, protocol.TypeDecline, "decline-"+o.Attempt, protocol.Decline{AttemptRef: o.AttemptRef, Reason: "bench idle runner"})
				continue
			}
			f.burst.offered(o.Job)
			held["a-"+o.Attempt] = o.AttemptRef
			other.Store(true)
			_ = writeFrame(f.ctx, ws, protocol.TypeAccept, "a-"+o.Attempt, protocol.Accept{AttemptRef: o.AttemptRef})
		case protocol.TypeReply:
			ref, ok := held[fr.ReplyTo]
			if !ok {
				continue
			}
			delete(held, fr.ReplyTo)
			var r protocol.Reply
			if err := fr.Decode(&r); err != nil || !r.OK {
				f.burst.failed(fmt.Errorf("burst job %s: the hub refused %s: %v %v", ref.Job, fr.ReplyTo, err, r.Error))
				continue
			}
			if strings.HasPrefix(fr.ReplyTo, "a-") {
				held["f-"+ref.Attempt] = ref
				other.Store(true)
				_ = writeFrame(f.ctx, ws, protocol.TypeFinish, "f-"+ref.Attempt, completedFinish(ref, nil))
				continue
			}
			f.burst.finished(ref.Job)
		}
	}
}

// close closes every connection with a normal close and waits for the
// goroutines.
func (f *fleet) close() {
	f.closing.Store(true)
	f.mu.Lock()
	var conns []*websocket.Conn
	for _, ws := range f.conns {
		if ws != nil {
			conns = append(conns, ws)
		}
	}
	f.conns = map[string]*websocket.Conn{}
	f.mu.Unlock()
	sem := make(chan struct{}, 64)
	var wg sync.WaitGroup
	for _, ws := range conns {
		sem <- struct{}{}
		wg.Add(1)
		go func() {
			defer func() { <-sem; wg.Done() }()
			_ = ws.Close(websocket.StatusNormalClosure, "bench done")
		}()
	}
	wg.Wait()
	f.cancel()
	f.wg.Wait()
}
