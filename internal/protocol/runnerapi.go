package protocol

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"syscall"
	"time"

	"drover/internal/rules"

	"github.com/coder/websocket"
)

// Hub is the runner protocol as typed calls: what a connected runner asks
// of its hub once hello and welcome are done. The hub implements it once
// per connection (the connection's runner is the caller every method checks
// against); the runner calls it through Client over the WebSocket gateway;
// protocoltest.Hub fakes it. ServeFrame and Client are the one codec
// between these calls and the frames of docs/protocol.md.
//
// id names a request in the hub's ledger: a request sent again with the
// same id (after a reconnect) is applied once and gets the first reply. A
// refusal is an *Error; any other error means no reply came (the request
// may or may not have been applied).
//
// Flow, for every method: one request frame, one reply frame (none for
// Status and Heartbeat), both small; what is too large for a frame goes
// through Transfers. Cancellation: ctx ends the wait for the reply, never
// a request already sent, which the hub may still apply.
type Hub interface {
	// Status reports what the runner holds and can run now; Heartbeat
	// only says it is alive. Neither has a reply; an error from either
	// is a protocol violation that ends the connection.
	Status(ctx context.Context, st Status) error
	Heartbeat(ctx context.Context) error

	Accept(ctx context.Context, id string, m Accept) error
	Decline(ctx context.Context, id string, m Decline) error
	Log(ctx context.Context, id string, m Log) (LogAck, error)
	Finish(ctx context.Context, id string, m Finish) (FinishAck, error)
	Ask(ctx context.Context, id string, m Ask) (AskAck, error)
	Deliver(ctx context.Context, id string, m Deliver) error
	Context(ctx context.Context, id string, m GetContext) (JobContext, error)
	Turns(ctx context.Context, id string, m Turns) error
	Transcript(ctx context.Context, id string, m GetTranscript) (TranscriptPage, error)
}

// Runner is what a hub pushes to a connected runner. Pushes have no reply
// and block nobody: the runner acts on them in the background.
type Runner interface {
	Offer(o Offer)
	Cancel(c CancelOrder)
	Drop(d DropOrder)
	Queue(q Queue)
}

// ServeFrame applies one frame a runner sent after its hello to hub and
// returns the reply to send (nil for a frame without reply; ReplyFrame
// encodes it). A request whose body does not decode is refused with
// ErrBadRequest, as are the refusals of hub; an error is a protocol
// violation that ends the connection (an unknown type, a request without
// id, a status or heartbeat hub refused).
func ServeFrame(ctx context.Context, hub Hub, f Frame) (*Reply, error) {
	switch f.Type {
	case TypeHeartbeat:
		return nil, hub.Heartbeat(ctx)
	case TypeStatus:
		var st Status
		if err := f.Decode(&st); err != nil {
			return nil, err
		}
		return nil, hub.Status(ctx, st)
	}
	if !IsRequest(f.Type) {
		return nil, fmt.Errorf("unknown frame type %q", f.Type)
	}
	if f.ID == "" || len(f.ID) > 64 {
		return nil, fmt.Errorf("%s request needs an id of 1-64 characters", f.Type)
	}
	body, err := serveRequest(ctx, hub, f)
	rep := Reply{OK: err == nil}
	if err != nil {
		e, ok := errors.AsType[*rules.Error](err)
		if !ok {
			e = &rules.Error{Code: rules.ErrInternal, Message: "internal error"}
		}
		rep.Error = e
	} else if rep.Body, err = json.Marshal(body); err != nil {
		return nil, fmt.Errorf("encode %s reply: %w", f.Type, err)
	}
	return &rep, nil
}

// ReplyFrame is the frame that answers request id with rep.
func ReplyFrame(id string, rep Reply) (Frame, error) {
	f, err := NewFrame(TypeReply, "", rep)
	f.ReplyTo = id
	return f, err
}

// noBody is the reply body of requests that answer only ok: {}.
type noBody struct{}

func serveRequest(ctx context.Context, hub Hub, f Frame) (any, error) {
	switch f.Type {
	case TypeAccept:
		return serve(ctx, f, func(ctx context.Context, id string, m Accept) (noBody, error) {
			return noBody{}, hub.Accept(ctx, id, m)
		})
	case TypeDecline:
		return serve(ctx, f, func(ctx context.Context, id string, m Decline) (noBody, error) {
			return noBody{}, hub.Decline(ctx, id, m)
		})
	case TypeLog:
		return serve(ctx, f, hub.Log)
	case TypeFinish:
		return serve(ctx, f, hub.Finish)
	case TypeAsk:
		return serve(ctx, f, hub.Ask)
	case TypeDeliver:
		return serve(ctx, f, func(ctx context.Context, id string, m Deliver) (noBody, error) {
			return noBody{}, hub.Deliver(ctx, id, m)
		})
	case TypeContext:
		return serve(ctx, f, hub.Context)
	case TypeTurns:
		return serve(ctx, f, func(ctx context.Context, id string, m Turns) (noBody, error) {
			return noBody{}, hub.Turns(ctx, id, m)
		})
	case TypeTranscript:
		return serve(ctx, f, hub.Transcript)
	}
	return nil, &rules.Error{Code: rules.ErrBadRequest, Message: fmt.Sprintf("unknown request %q", f.Type)}
}

// serve decodes a request frame's body and makes the typed call.
func serve[Req, Rep any](ctx context.Context, f Frame, call func(context.Context, string, Req) (Rep, error)) (any, error) {
	var m Req
	if err := f.Decode(&m); err != nil {
		return nil, &rules.Error{Code: rules.ErrBadRequest, Message: err.Error()}
	}
	rep, err := call(ctx, f.ID, m)
	if err != nil {
		return nil, err
	}
	return rep, nil
}

// ServePush hands one frame the hub sent to runner. It reports false for
// a frame that is no push (a reply, a welcome, a type of a newer hub); an
// error is a push whose body does not decode.
func ServePush(runner Runner, f Frame) (bool, error) {
	switch f.Type {
	case TypeOffer:
		return push(f, runner.Offer)
	case TypeCancel:
		return push(f, runner.Cancel)
	case TypeDrop:
		return push(f, runner.Drop)
	case TypeQueue:
		return push(f, runner.Queue)
	}
	return false, nil
}

func push[M any](f Frame, handle func(M)) (bool, error) {
	var m M
	if err := f.Decode(&m); err != nil {
		return true, err
	}
	handle(m)
	return true, nil
}

// Pusher is Runner over a frame sink: the hub's side of ServePush, which
// encodes each push to the frame ServePush decodes and hands it to Send.
type Pusher struct{ Send func(Frame) }

var _ Runner = Pusher{}

func (p Pusher) Offer(o Offer) { p.push(TypeOffer, o) }

func (p Pusher) Cancel(c CancelOrder) { p.push(TypeCancel, c) }

func (p Pusher) Drop(d DropOrder) { p.push(TypeDrop, d) }

func (p Pusher) Queue(q Queue) { p.push(TypeQueue, q) }

func (p Pusher) push(typ string, body any) {
	f, err := NewFrame(typ, "", body)
	if err != nil {
		return // plain structs of strings, numbers and maps always encode
	}
	p.Send(f)
}

// StatusFrame and HeartbeatFrame are the frames of Hub.Status and
// Hub.Heartbeat, for a runner that queues its frames itself.
func StatusFrame(st Status) Frame {
	f, _ := NewFrame(TypeStatus, "", st) // a Status always encodes
	return f
}

func HeartbeatFrame() Frame { return Frame{Type: TypeHeartbeat} }

// IdleHeartbeatFrame is the heartbeat of a runner that holds no attempts
// and whose hub offered an idle interval (Welcome.IdleHeartbeatInterval):
// its next frame may come that much later. Any other frame means the next
// one comes within HeartbeatInterval.
func IdleHeartbeatFrame() Frame {
	return Frame{Type: TypeHeartbeat, Body: json.RawMessage(`{"idle":true}`)}
}

// KeepAlive is the TCP keepalive both ends set on a runner connection: the
// kernel probes a connection silent for two and a quarter heartbeats and
// drops it after three unanswered probes a quarter heartbeat apart, so a
// peer whose host or network vanished is noticed within three heartbeat
// intervals of its last sign of life however seldom it heartbeats, and
// without waking the process.
func KeepAlive(heartbeat time.Duration) net.KeepAliveConfig {
	q := max(heartbeat/4, time.Second) // the kernel counts in seconds
	return net.KeepAliveConfig{Enable: true, Idle: 2*heartbeat + q, Interval: q, Count: 3}
}

// MaxRetryAfter bounds a hub's "come back later" that a runner honours.
const MaxRetryAfter = 5 * time.Minute

// PlaceHeader carries a runner's place in a busy hub's schedule: the hub
// gives it with a 503 and the runner sends it back on its next dial to
// that hub, which then takes it before runners that come without one. It
// is opaque to the runner and no secret.
const PlaceHeader = "Drover-Place"

// RetryAfter reads a hub's answer to a runner's dial that refused it for
// now: 503 with Retry-After in seconds, the time the hub expects to have
// room for its hello (a fleet back after a restart is given times spread
// over what the hub can take, not left to back off), and the place to
// bring back then (PlaceHeader, "" for none). Not one: ok false.
func RetryAfter(resp *http.Response) (d time.Duration, place string, ok bool) {
	if resp == nil || resp.StatusCode != http.StatusServiceUnavailable {
		return 0, "", false
	}
	n, err := strconv.Atoi(resp.Header.Get("Retry-After"))
	if err != nil || n < 0 {
		return 0, "", false
	}
	return min(time.Duration(n)*time.Second, MaxRetryAfter), resp.Header.Get(PlaceHeader), true
}

// NotListeningCeiling bounds a runner's reconnect backoff while its hub's
// address refuses connections (nothing listens: a hub restarting): asking
// costs that host's kernel a reset and the hub nothing, and a longer wait
// only delays the fleet's return once the hub listens again, where its
// hellos are paced by RetryAfter.
const NotListeningCeiling = 4 * time.Second

// NotListening says whether a dial failed because nothing listens at the
// hub's address.
func NotListening(err error) bool { return errors.Is(err, syscall.ECONNREFUSED) }

// CloseTryAgainLater (the standard 1013) ends a connection for a passing
// reason: a hub stopping, or one that took the runner's dial but could not
// attach its hello in time (a busy store).
const CloseTryAgainLater = 1013

// TryAgainCeiling bounds a runner's reconnect backoff after its hub closed
// the connection with CloseTryAgainLater: the hub is up and its door paces
// the next dial (RetryAfter), so a backoff grown while the hub was down
// (towards a minute) would only leave the runner away from an idle hub.
const TryAgainCeiling = 5 * time.Second

// ReconnectCeiling is the ceiling of a runner's jittered wait before it
// dials again after err, given its policy's ceiling c: bounded while
// nothing listens (NotListeningCeiling) and after a "try again later"
// (TryAgainCeiling).
func ReconnectCeiling(err error, c time.Duration) time.Duration {
	switch {
	case NotListening(err):
		return min(c, NotListeningCeiling)
	case websocket.CloseStatus(err) == CloseTryAgainLater:
		return min(c, TryAgainCeiling)
	}
	return c
}

// LivenessWindow is how long a hub waits for a runner's next frame after
// one: three heartbeat intervals, or after an idle heartbeat its idle
// interval plus two heartbeat intervals (the same slack for a late frame).
func LivenessWindow(heartbeat, idle time.Duration, idleBeat bool) time.Duration {
	if idleBeat && idle > heartbeat {
		return idle + 2*heartbeat
	}
	return 3 * heartbeat
}

// Caller carries frames to the hub for Client: Call sends a request frame
// and waits for its reply (across reconnects, resending it with the same
// id, until ctx ends); attempt names the attempt the request is about, so
// that the caller can drop an attempt's requests when the attempt goes.
// Send queues a frame without reply.
type Caller interface {
	Call(ctx context.Context, attempt string, f Frame) (Reply, error)
	Send(ctx context.Context, f Frame) error
}

// Client is Hub over a Caller: the runner's side of ServeFrame.
type Client struct{ Caller Caller }

var _ Hub = Client{}

func (c Client) Status(ctx context.Context, st Status) error {
	return c.Caller.Send(ctx, StatusFrame(st))
}

func (c Client) Heartbeat(ctx context.Context) error { return c.Caller.Send(ctx, HeartbeatFrame()) }

func (c Client) Accept(ctx context.Context, id string, m Accept) error {
	return c.call(ctx, TypeAccept, id, m.AttemptRef, m, nil)
}

func (c Client) Decline(ctx context.Context, id string, m Decline) error {
	return c.call(ctx, TypeDecline, id, m.AttemptRef, m, nil)
}

// Log: a reply without a body (an older hub) took the whole chunk.
func (c Client) Log(ctx context.Context, id string, m Log) (LogAck, error) {
	ack := LogAck{Size: -1}
	if err := c.call(ctx, TypeLog, id, m.AttemptRef, m, &ack); err != nil {
		return LogAck{}, err
	}
	if ack.Size < 0 {
		ack.Size = m.Offset + int64(len(m.Data))
	}
	return ack, nil
}

func (c Client) Finish(ctx context.Context, id string, m Finish) (FinishAck, error) {
	var ack FinishAck
	return ack, c.call(ctx, TypeFinish, id, m.AttemptRef, m, &ack)
}

func (c Client) Ask(ctx context.Context, id string, m Ask) (AskAck, error) {
	var ack AskAck
	return ack, c.call(ctx, TypeAsk, id, m.AttemptRef, m, &ack)
}

func (c Client) Deliver(ctx context.Context, id string, m Deliver) error {
	return c.call(ctx, TypeDeliver, id, m.AttemptRef, m, nil)
}

func (c Client) Context(ctx context.Context, id string, m GetContext) (JobContext, error) {
	var jc JobContext
	return jc, c.call(ctx, TypeContext, id, m.AttemptRef, m, &jc)
}

func (c Client) Turns(ctx context.Context, id string, m Turns) error {
	return c.call(ctx, TypeTurns, id, m.AttemptRef, m, nil)
}

func (c Client) Transcript(ctx context.Context, id string, m GetTranscript) (TranscriptPage, error) {
	var page TranscriptPage
	return page, c.call(ctx, TypeTranscript, id, m.AttemptRef, m, &page)
}

// call makes one request and decodes its reply's body into out (nil:
// none). A refusal comes back as the reply's *Error.
func (c Client) call(ctx context.Context, typ, id string, ref AttemptRef, body, out any) error {
	f, err := NewFrame(typ, id, body)
	if err != nil {
		return err
	}
	rep, err := c.Caller.Call(ctx, ref.Attempt, f)
	if err != nil {
		return err
	}
	if !rep.OK {
		if rep.Error == nil {
			return &rules.Error{Code: rules.ErrInternal, Message: "the hub refused " + typ + " without an error"}
		}
		return rep.Error
	}
	if out != nil && len(rep.Body) > 0 {
		if err := json.Unmarshal(rep.Body, out); err != nil {
			return fmt.Errorf("the hub's %s reply: %w", typ, err)
		}
	}
	return nil
}
