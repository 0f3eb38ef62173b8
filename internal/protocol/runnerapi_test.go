package protocol_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"syscall"
	"testing"
	"time"

	"drover/internal/protocol"
	"drover/internal/protocol/protocoltest"

	"github.com/coder/websocket"
)

// ServeFrame's replies are the frames docs/protocol.md describes, byte for
// byte as the gateway wrote them before the protocol became an interface.
func TestServeFrameWireFormat(t *testing.T) {
	ref := `{"job":"j-1","attempt":"a-1","epoch":1}`
	cases := []struct {
		name, in, want string
		fails          bool // a protocol violation: no reply, the connection ends
	}{
		{name: "ok without body", in: `{"type":"accept","id":"rq-1","body":` + ref + `}`,
			want: `{"type":"reply","reply_to":"rq-1","body":{"ok":true,"body":{}}}`},
		{name: "ok with body", in: `{"type":"log","id":"rq-2","body":{"job":"j-1","attempt":"a-1","epoch":1,"offset":0,"data":"aGk="}}`,
			want: `{"type":"reply","reply_to":"rq-2","body":{"ok":true,"body":{"size":2}}}`},
		{name: "refusal with size", in: `{"type":"log","id":"rq-3","body":{"job":"j-1","attempt":"a-1","epoch":1,"offset":5,"data":"aGk="}}`,
			want: `{"type":"reply","reply_to":"rq-3","body":{"ok":false,"error":{"code":"offset_mismatch","message":"log chunk at offset 5, the hub holds 2 bytes","size":2}}}`},
		{name: "refusal", in: `{"type":"accept","id":"rq-4","body":{"job":"j-1","attempt":"a-2","epoch":1}}`,
			want: `{"type":"reply","reply_to":"rq-4","body":{"ok":false,"error":{"code":"not_found","message":"no attempt a-2"}}}`},
		{name: "body that does not decode", in: `{"type":"finish","id":"rq-5","body":{"log_size":"x"}}`,
			want: `{"type":"reply","reply_to":"rq-5","body":{"ok":false,"error":{"code":"bad_request","message":"decode finish frame: json: cannot unmarshal string into Go struct field Finish.log_size of type int64"}}}`},
		{name: "request without body", in: `{"type":"decline","id":"rq-6"}`,
			want: `{"type":"reply","reply_to":"rq-6","body":{"ok":false,"error":{"code":"bad_request","message":"decline frame has no body"}}}`},
		{name: "heartbeat", in: `{"type":"heartbeat"}`},
		{name: "status", in: `{"type":"status","body":{"slots":1,"attempts":[]}}`},
		{name: "status out of bounds", in: `{"type":"status","body":{"slots":-1,"attempts":[]}}`, fails: true},
		{name: "request without id", in: `{"type":"accept","body":` + ref + `}`, fails: true},
		{name: "unknown type", in: `{"type":"teleport","id":"rq-7"}`, fails: true},
		{name: "hello again", in: `{"type":"hello","body":{}}`, fails: true},
	}
	hub := protocoltest.NewHub()
	hub.Offered(protocol.AttemptRef{Job: "j-1", Attempt: "a-1", Epoch: 1})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			var f protocol.Frame
			if err := json.Unmarshal([]byte(c.in), &f); err != nil {
				t.Fatal(err)
			}
			rep, err := protocol.ServeFrame(context.Background(), hub, f)
			if c.fails {
				if err == nil || rep != nil {
					t.Fatalf("got %v, %v; want a protocol violation", rep, err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			got := ""
			if rep != nil {
				out, err := protocol.ReplyFrame(f.ID, *rep)
				if err != nil {
					t.Fatal(err)
				}
				b, err := json.Marshal(out)
				if err != nil {
					t.Fatal(err)
				}
				got = string(b)
			}
			if got != c.want {
				t.Fatalf("reply\n got %s\nwant %s", got, c.want)
			}
		})
	}
}

type recorder struct{ got []any }

func (r *recorder) Offer(o protocol.Offer)        { r.got = append(r.got, o) }
func (r *recorder) Cancel(c protocol.CancelOrder) { r.got = append(r.got, c) }
func (r *recorder) Drop(d protocol.DropOrder)     { r.got = append(r.got, d) }
func (r *recorder) Queue(q protocol.Queue)        { r.got = append(r.got, q) }

// Each typed push goes out as the frame docs/protocol.md describes, byte
// for byte as the hub built it by hand before, and ServePush hands the
// same value back to the method of its type.
func TestServePushHandsEachPushToItsMethod(t *testing.T) {
	ref := protocol.AttemptRef{Job: "j-1", Attempt: "a-1", Epoch: 2}
	refJSON := `"job":"j-1","attempt":"a-1","epoch":2`
	pushes := []struct {
		value any
		push  func(protocol.Runner)
		wire  string
	}{
		{protocol.Offer{AttemptRef: ref, Spec: protocol.JobSpec{Agent: "exec"}, Account: "acc-1"},
			func(r protocol.Runner) {
				r.Offer(protocol.Offer{AttemptRef: ref, Spec: protocol.JobSpec{Agent: "exec"}, Account: "acc-1"})
			},
			`{"type":"offer","body":{` + refJSON + `,"spec":{"agent":"exec","args":null,"requester":"","log_cap":0},"account":"acc-1"}}`},
		{protocol.CancelOrder{AttemptRef: ref, Reason: "cancelled by a user"},
			func(r protocol.Runner) {
				r.Cancel(protocol.CancelOrder{AttemptRef: ref, Reason: "cancelled by a user"})
			},
			`{"type":"cancel","body":{` + refJSON + `,"reason":"cancelled by a user"}}`},
		{protocol.DropOrder{AttemptRef: ref, Reason: "fenced"},
			func(r protocol.Runner) { r.Drop(protocol.DropOrder{AttemptRef: ref, Reason: "fenced"}) },
			`{"type":"drop","body":{` + refJSON + `,"reason":"fenced"}}`},
		{protocol.Queue{Waiting: true},
			func(r protocol.Runner) { r.Queue(protocol.Queue{Waiting: true}) },
			`{"type":"queue","body":{"waiting":true}}`},
	}
	var r recorder
	for i, p := range pushes {
		var sent []protocol.Frame
		p.push(protocol.Pusher{Send: func(f protocol.Frame) { sent = append(sent, f) }})
		if len(sent) != 1 {
			t.Fatalf("push %d: %d frames sent, want 1", i, len(sent))
		}
		b, err := json.Marshal(sent[0])
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != p.wire {
			t.Fatalf("push %d on the wire\n got %s\nwant %s", i, b, p.wire)
		}
		var f protocol.Frame
		if err := json.Unmarshal(b, &f); err != nil {
			t.Fatal(err)
		}
		if known, err := protocol.ServePush(&r, f); !known || err != nil {
			t.Fatalf("%s: known %v, err %v", f.Type, known, err)
		}
		if !reflect.DeepEqual(r.got[i], p.value) {
			t.Fatalf("push %d: handed %#v, want %#v", i, r.got[i], p.value)
		}
	}
	if known, _ := protocol.ServePush(&r, protocol.Frame{Type: "newer"}); known {
		t.Fatal("a type of a newer hub was taken for a push")
	}
	if _, err := protocol.ServePush(&r, protocol.Frame{Type: protocol.TypeOffer, Body: json.RawMessage(`[]`)}); err == nil {
		t.Fatal("a malformed offer was handed on")
	}
	if len(r.got) != len(pushes) {
		t.Fatalf("%d pushes handed on, want %d", len(r.got), len(pushes))
	}
}

// The runner's status and heartbeat frames, which it queues itself, are
// the ones Client sends and ServeFrame reads.
func TestStatusAndHeartbeatFrames(t *testing.T) {
	st := protocol.Status{Slots: 2, Attempts: []protocol.Held{}, NotReady: "no agent"}
	for _, c := range []struct {
		f    protocol.Frame
		wire string
	}{
		{protocol.StatusFrame(st), `{"type":"status","body":{"slots":2,"attempts":[],"not_ready":"no agent"}}`},
		{protocol.HeartbeatFrame(), `{"type":"heartbeat"}`},
	} {
		b, err := json.Marshal(c.f)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.wire {
			t.Fatalf("on the wire\n got %s\nwant %s", b, c.wire)
		}
	}
	var back protocol.Status
	if err := protocol.StatusFrame(st).Decode(&back); err != nil || !reflect.DeepEqual(back, st) {
		t.Fatalf("status back %#v, %v; want %#v", back, err, st)
	}
}

// A runner's wait is bounded while nothing listens and after a 1013, and
// is its backoff's otherwise.
func TestReconnectCeiling(t *testing.T) {
	const c = time.Minute
	for _, tc := range []struct {
		name string
		err  error
		want time.Duration
	}{
		{"nothing listening", fmt.Errorf("dial: %w", syscall.ECONNREFUSED), protocol.NotListeningCeiling},
		{"1013 after the upgrade", fmt.Errorf("wait for welcome: %w", websocket.CloseError{Code: websocket.StatusTryAgainLater}), protocol.TryAgainCeiling},
		{"another close", fmt.Errorf("wait for welcome: %w", websocket.CloseError{Code: websocket.StatusGoingAway}), c},
		{"another error", errors.New("EOF"), c},
	} {
		if got := protocol.ReconnectCeiling(tc.err, c); got != tc.want {
			t.Errorf("%s: %v; want %v", tc.name, got, tc.want)
		}
	}
	if got := protocol.ReconnectCeiling(fmt.Errorf("dial: %w", syscall.ECONNREFUSED), time.Second); got != time.Second {
		t.Errorf("a backoff below the bound: %v; want it kept", got)
	}
}
