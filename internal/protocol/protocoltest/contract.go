package protocoltest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"testing"

	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/rules"
)

// Work is what Contract publishes and expects of the attempt's job: a
// commit the hub can take as the job's next head, a bundle of it, and the
// job's context files (at least one).
type Work struct {
	Commit  string
	Bundle  []byte
	Context map[string]string
}

// Contract takes ref, an attempt just offered to the runner hub serves,
// through what every implementation of protocol.Hub and of its Transfers
// (tr) must agree on: fencing, the ledger (a resent id gets the first
// reply), log offsets, publications (a damaged one refused, one resent
// applied once), context files, and the finish's check of the log. The
// fake and the real hub both run it.
func Contract(t *testing.T, hub protocol.Hub, tr protocol.Transfers, ref protocol.AttemptRef, w Work) {
	t.Helper()
	ctx := context.Background()
	stale := ref
	stale.Epoch++
	unknown := ref
	unknown.Attempt += "x"
	bad := ref
	bad.Epoch = 0

	wantCode(t, "accept of a stale epoch", rules.ErrFenced, hub.Accept(ctx, "c-1", protocol.Accept{AttemptRef: stale}))
	wantCode(t, "accept of an unknown attempt", rules.ErrNotFound, hub.Accept(ctx, "c-2", protocol.Accept{AttemptRef: unknown}))
	wantCode(t, "accept of a malformed reference", rules.ErrBadRequest, hub.Accept(ctx, "c-3", protocol.Accept{AttemptRef: bad}))
	_, err := hub.Log(ctx, "c-4", protocol.Log{AttemptRef: ref, Data: []byte("early")})
	wantCode(t, "log before the accept", rules.ErrFenced, err)
	_, err = tr.Publish(ctx, ref, publication(w.Commit, w.Bundle, ""))
	wantCode(t, "publication before the accept", rules.ErrFenced, err)

	for _, id := range []string{"c-5", "c-5", "c-6"} { // resent, then accepted again: all ok
		wantCode(t, "accept "+id, "", hub.Accept(ctx, id, protocol.Accept{AttemptRef: ref}))
	}
	transfers(t, tr, ref, stale, unknown, w)
	wantLog(t, hub, "c-7", ref, 0, "hello ", 6, "")
	wantLog(t, hub, "c-7", ref, 0, "hello ", 6, "") // resent chunk
	wantLog(t, hub, "c-8", ref, 3, "lo wor", 6, rules.ErrOffset)
	wantLog(t, hub, "c-9", ref, 6, "world\n", 12, "")
	_, err = hub.Log(ctx, "c-10", protocol.Log{AttemptRef: stale, Offset: 12, Data: []byte("x")})
	wantCode(t, "log of a stale epoch", rules.ErrFenced, err)

	jc, err := hub.Context(ctx, "c-11", protocol.GetContext{AttemptRef: ref})
	wantCode(t, "context", "", err)
	if jc.Job != ref.Job || jc.Attempt != ref.Epoch {
		t.Fatalf("context names job %s attempt %d, want %s %d", jc.Job, jc.Attempt, ref.Job, ref.Epoch)
	}
	wantCode(t, "deliver", "", hub.Deliver(ctx, "c-12", protocol.Deliver{AttemptRef: ref, Summary: "done"}))
	wantCode(t, "deliver resent", "", hub.Deliver(ctx, "c-12", protocol.Deliver{AttemptRef: ref, Summary: "done"}))
	wantCode(t, "a second deliver", rules.ErrConflict, hub.Deliver(ctx, "c-13", protocol.Deliver{AttemptRef: ref, Summary: "other"}))

	log := []byte("hello world\n")
	sum := sha256.Sum256(log)
	zero := 0
	fin := protocol.Finish{AttemptRef: ref, LogSize: 11, LogSHA256: hex.EncodeToString(sum[:]),
		Outcome: job.Outcome{State: job.AttemptCompleted, Reason: job.ReasonExited, ExitCode: &zero}}
	_, err = hub.Finish(ctx, "c-14", fin)
	if e := wantCode(t, "finish short of the log", rules.ErrLogIncomplete, err); e.Size == nil || *e.Size != 12 {
		t.Fatalf("finish short of the log: size %v, want 12", e.Size)
	}
	fin.LogSize = 12
	for _, c := range []struct {
		id    string
		again bool
	}{{"c-15", false}, {"c-15", false}, {"c-16", true}} { // the first, resent, then a new id
		ack, err := hub.Finish(ctx, c.id, fin)
		wantCode(t, "finish "+c.id, "", err)
		if ack.AlreadyFinished != c.again {
			t.Fatalf("finish %s: already finished %v, want %v", c.id, ack.AlreadyFinished, c.again)
		}
	}
	_, err = hub.Log(ctx, "c-17", protocol.Log{AttemptRef: ref, Offset: 12, Data: []byte("late")})
	wantCode(t, "log after the finish", rules.ErrFenced, err)
	wantCode(t, "decline after the finish", rules.ErrConflict, hub.Decline(ctx, "c-18", protocol.Decline{AttemptRef: ref, Reason: "no"}))
}

// transfers checks publication and context files of a running attempt.
func transfers(t *testing.T, tr protocol.Transfers, ref, stale, unknown protocol.AttemptRef, w Work) {
	t.Helper()
	ctx := context.Background()
	for _, c := range []struct {
		what   string
		ref    protocol.AttemptRef
		digest string
		code   string
	}{
		{"publication of a stale epoch", stale, "", rules.ErrFenced},
		{"publication of an unknown attempt", unknown, "", rules.ErrNotFound},
		{"a damaged publication", ref, digestOf([]byte("other bytes")), rules.ErrBadRequest},
		{"publication", ref, "", ""},
		{"publication resent", ref, "", ""}, // its reply was lost: applied once
	} {
		res, err := tr.Publish(ctx, c.ref, publication(w.Commit, w.Bundle, c.digest))
		if wantCode(t, c.what, c.code, err); c.code == "" && res.Head != w.Commit {
			t.Fatalf("%s: head %s, want %s", c.what, res.Head, w.Commit)
		}
	}

	got := map[string]string{}
	err := tr.ContextFiles(ctx, ref, func(name string, data io.Reader) error {
		b, err := io.ReadAll(data)
		got[name] = string(b)
		return err
	})
	if wantCode(t, "context files", "", err); !maps.Equal(got, w.Context) {
		t.Fatalf("context files %v, want %v", got, w.Context)
	}
	none := func(string, io.Reader) error { return errors.New("a file of a refused download") }
	wantCode(t, "context files of a stale epoch", rules.ErrFenced, tr.ContextFiles(ctx, stale, none))
	wantCode(t, "context files of an unknown attempt", rules.ErrNotFound, tr.ContextFiles(ctx, unknown, none))
}

// publication is a bundle to publish, with its digest unless one is given.
func publication(commit string, bundle []byte, digest string) protocol.Publication {
	if digest == "" {
		digest = digestOf(bundle)
	}
	return protocol.Publication{Commit: commit, SHA256: digest, Bundle: bytes.NewReader(bundle), Size: int64(len(bundle))}
}

func digestOf(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func wantLog(t *testing.T, hub protocol.Hub, id string, ref protocol.AttemptRef, off int64, data string, size int64, code string) {
	t.Helper()
	ack, err := hub.Log(context.Background(), id, protocol.Log{AttemptRef: ref, Offset: off, Data: []byte(data)})
	e := wantCode(t, fmt.Sprintf("log at %d", off), code, err)
	got := ack.Size
	if e != nil && e.Size != nil {
		got = *e.Size
	}
	if got != size {
		t.Fatalf("log at %d: the hub holds %d bytes, want %d", off, got, size)
	}
}

// wantCode checks that err is a refusal with code ("" for none) and
// returns it.
func wantCode(t *testing.T, what, code string, err error) *rules.Error {
	t.Helper()
	e, refused := errors.AsType[*rules.Error](err)
	switch {
	case code == "" && err != nil:
		t.Fatalf("%s: %v", what, err)
	case code != "" && (!refused || e.Code != code):
		t.Fatalf("%s: got %v, want a refusal %s", what, err, code)
	}
	return e
}

// Loopback is a protocol.Caller that hands each frame straight to hub
// through protocol.ServeFrame: the codec of both sides without a socket.
type Loopback struct{ Hub protocol.Hub }

func (l Loopback) Call(ctx context.Context, _ string, f protocol.Frame) (protocol.Reply, error) {
	rep, err := l.serve(ctx, f)
	if err != nil {
		return protocol.Reply{}, err
	}
	if rep == nil {
		return protocol.Reply{}, fmt.Errorf("%s request got no reply", f.Type)
	}
	out, err := protocol.ReplyFrame(f.ID, *rep)
	if err != nil {
		return protocol.Reply{}, err
	}
	var back protocol.Frame
	if err := roundTrip(out, &back); err != nil {
		return protocol.Reply{}, err
	}
	var wire protocol.Reply
	return wire, back.Decode(&wire)
}

func (l Loopback) Send(ctx context.Context, f protocol.Frame) error {
	_, err := l.serve(ctx, f)
	return err
}

// serve sends f through its JSON encoding, as the wire would.
func (l Loopback) serve(ctx context.Context, f protocol.Frame) (*protocol.Reply, error) {
	var wire protocol.Frame
	if err := roundTrip(f, &wire); err != nil {
		return nil, err
	}
	return protocol.ServeFrame(ctx, l.Hub, wire)
}

func roundTrip(in, out any) error {
	b, err := json.Marshal(in)
	if err != nil {
		return err
	}
	return json.Unmarshal(b, out)
}
