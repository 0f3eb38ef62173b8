package hub

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"drover/internal/apitypes"
	"drover/internal/auth"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/rules"
	"drover/internal/sandbox/sandboxtest"
	"drover/internal/store"
	"drover/internal/store/sqlite"
	"drover/internal/testkit"
)

// testHub is a hub on a real SQLite file behind a real HTTP server.
type testHub struct {
	t     testing.TB
	h     *Hub
	srv   *httptest.Server
	cfg   Config
	admin string
	// tokens are the users addUser made, by name (a test that shares a
	// runner with one accepts as them).
	tokens map[string]string
}

// TestMain stops the Postgres cluster of DROVER_HUB_TEST_STORE=postgres.
// The tests run side by side (t.Parallel), two per core: most wait on
// sockets, git, Postgres or chromium, not the CPU. Those that hold
// process-wide state (descriptor limits and counts) or need a short
// window of time kept (leases, heartbeats and terms of a second or less,
// leadership over several terms, a few jobs' statements that the hub's
// periodic work must not land among) run alone, before the others, as do
// the measurements (TestBench*).
func TestMain(m *testing.M) {
	testkit.ParallelPerCore(2)
	testkit.PostgresMain(m)
}

func startHub(t testing.TB, cfg Config) *testHub {
	t.Helper()
	return startHubOn(t, cfg, nil)
}

// startHubOn is startHub with the hub's store seen through wrap (when not
// nil), for a test that watches what the hub reads.
func startHubOn(t testing.TB, cfg Config, wrap func(store.Store) store.Store) *testHub {
	t.Helper()
	cfg.DataDir = t.TempDir()
	if wrap == nil && os.Getenv("DROVER_HUB_TEST_STORE") == "postgres" {
		cfg.Database = testkit.StartPostgres(t) // the whole suite on Postgres, on request
	}
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	cfg.Webhooks.AllowPrivate = true // the tests' receivers are on loopback
	var h *Hub
	var err error
	if wrap == nil {
		h, err = Open(context.Background(), cfg)
	} else {
		var st *sqlite.Store
		if st, err = sqlite.Open(context.Background(), StorePath(cfg.DataDir)); err != nil {
			t.Fatal(err)
		}
		if h, err = New(context.Background(), cfg, wrap(st)); err != nil {
			st.Close()
		}
	}
	if err != nil {
		t.Fatal(err)
	}
	return serveTestHub(t, h, cfg, "")
}

// serveTestHub serves h until the test ends, for the admin with token
// admin ("": the one h's first start wrote).
func serveTestHub(t testing.TB, h *Hub, cfg Config, admin string) *testHub {
	t.Helper()
	th := &testHub{t: t, h: h, srv: httptest.NewServer(h.Handler()), cfg: cfg, admin: admin}
	// The fields, not the first hub: reopen replaces them.
	t.Cleanup(func() {
		th.srv.CloseClientConnections()
		th.srv.Close()
		if th.h != nil { // nil once a test crashed it
			th.h.Close()
		}
	})
	if admin == "" {
		tok, err := os.ReadFile(h.AdminTokenPath())
		if err != nil {
			t.Fatal(err)
		}
		th.admin = strings.TrimSpace(string(tok))
	}
	return th
}

// call does one API request and decodes the JSON answer into out (if set).
func (th *testHub) call(token, method, path string, body, out any) (int, rules.Error) {
	th.t.Helper()
	var rd io.Reader
	if body != nil {
		b, _ := json.Marshal(body)
		rd = bytes.NewReader(b)
	}
	code, data := th.send(token, method, apitypes.APIPrefix+path, rd)
	if code >= 300 {
		var eb apitypes.ErrorBody
		_ = json.Unmarshal(data, &eb)
		return code, eb.Error
	}
	if out != nil {
		if err := json.Unmarshal(data, out); err != nil {
			th.t.Fatalf("decode %s: %v", data, err)
		}
	}
	return code, rules.Error{}
}

// send is a request to the hub's path with a bearer token ("": none): the
// status and the body.
func (th *testHub) send(token, method, path string, body io.Reader) (int, []byte) {
	th.t.Helper()
	req, _ := http.NewRequest(method, th.srv.URL+path, body)
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		th.t.Fatal(err)
	}
	defer resp.Body.Close()
	data, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, data
}

func (th *testHub) submit(args ...string) apitypes.JobView {
	th.t.Helper()
	var v apitypes.JobView
	if code, e := th.call(th.admin, "POST", "/jobs", apitypes.SubmitRequest{Agent: "exec", Args: args}, &v); code != http.StatusCreated {
		th.t.Fatalf("submit: %d %v", code, e)
	}
	return v
}

func (th *testHub) job(id string) apitypes.JobView {
	th.t.Helper()
	var v apitypes.JobView
	if code, e := th.call(th.admin, "GET", "/jobs/"+id, nil, &v); code != http.StatusOK {
		th.t.Fatalf("get job: %d %v", code, e)
	}
	return v
}

func (th *testHub) waitJob(id string, cond func(apitypes.JobView) bool) apitypes.JobView {
	th.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		v := th.job(id)
		if cond(v) {
			return v
		}
		if time.Now().After(deadline) {
			th.t.Fatalf("job %s: condition not reached; last %+v", id, v)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// registerRunner approves a runner login and returns its token.
func (th *testHub) registerRunner(name string) string {
	th.t.Helper()
	tok := auth.NewToken(auth.PrefixRunner)
	if code, e := th.call(th.admin, "POST", "/runners/approve", apitypes.ApproveRequest{Name: name, Key: auth.Hash(tok)}, nil); code != http.StatusOK {
		th.t.Fatalf("approve: %d %v", code, e)
	}
	return tok
}

// registerRunnerOf approves a runner login as the user with token owner
// and shares the runner with the named users; it returns the runner's token.
func (th *testHub) registerRunnerOf(owner, name string, shareWith ...string) string {
	th.t.Helper()
	tok := auth.NewToken(auth.PrefixRunner)
	if code, e := th.call(owner, "POST", "/runners/approve", apitypes.ApproveRequest{Name: name, Key: auth.Hash(tok)}, nil); code != http.StatusOK {
		th.t.Fatalf("approve: %d %v", code, e)
	}
	for _, u := range shareWith {
		if code, e := th.call(owner, "POST", "/runners/"+name+"/share", apitypes.ShareRequest{User: u}, nil); code != http.StatusOK {
			th.t.Fatalf("share %s with %s: %d %v", name, u, code, e)
		}
		th.accept(th.tokenOf(u), name, "")
	}
	return tok
}

// scriptRunner is a hand-driven runner connection: the test decides every
// frame, so it can send what a real runner never would.
type scriptRunner struct {
	t      testing.TB
	ws     *websocket.Conn
	seq    int
	frames chan protocol.Frame
	err    chan error
}

// newScriptRunner starts the one reader of ws (a timed-out Read would close
// the connection, so waits are done on the channel instead).
func newScriptRunner(t testing.TB, ws *websocket.Conn) *scriptRunner {
	sr := &scriptRunner{t: t, ws: ws, frames: make(chan protocol.Frame, 1024), err: make(chan error, 1)}
	go func() {
		for {
			_, data, err := ws.Read(context.Background())
			if err != nil {
				sr.err <- err
				return
			}
			var f protocol.Frame
			if err := json.Unmarshal(data, &f); err != nil {
				sr.err <- err
				return
			}
			sr.frames <- f
		}
	}()
	return sr
}

func (th *testHub) dial(token string, hello protocol.Hello) (*scriptRunner, protocol.Welcome) {
	th.t.Helper()
	return th.dialURL(th.srv.URL, token, hello)
}

// wsDial opens a runner connection to the hub at base with token.
func wsDial(t testing.TB, ctx context.Context, base, token string) *websocket.Conn {
	t.Helper()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(base, "http")+apitypes.APIPrefix+"/runner/connect",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + token}}})
	if err != nil {
		t.Fatalf("dial: %v", err)
	}
	return ws
}

// dialURL connects a scripted runner to the hub at base.
func (th *testHub) dialURL(base, token string, hello protocol.Hello) (*scriptRunner, protocol.Welcome) {
	th.t.Helper()
	sr := th.sayHello(base, token, hello)
	f := sr.read()
	if f.Type != protocol.TypeWelcome {
		th.t.Fatalf("want welcome, got %s", f.Type)
	}
	var w protocol.Welcome
	if err := f.Decode(&w); err != nil {
		th.t.Fatal(err)
	}
	return sr, w
}

// sayHello opens a scripted runner's connection to the hub at base and
// sends hello (protocol and slots filled in when zero).
func (th *testHub) sayHello(base, token string, hello protocol.Hello) *scriptRunner {
	th.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws := wsDial(th.t, ctx, base, token)
	ws.SetReadLimit(protocol.MaxFrame)
	sr := newScriptRunner(th.t, ws)
	th.t.Cleanup(func() { ws.CloseNow() })
	// Keep the connection alive the way a runner does.
	beat := th.h.cfg.Heartbeat / 2 // read now: reopen replaces th.h
	go func() {
		for {
			time.Sleep(beat)
			b, _ := json.Marshal(protocol.Frame{Type: protocol.TypeHeartbeat})
			if ws.Write(context.Background(), websocket.MessageText, b) != nil {
				return
			}
		}
	}()
	if hello.Protocol == 0 {
		hello.Protocol = protocol.Version
	}
	if hello.Slots == 0 {
		hello.Slots = 1
	}
	sr.send(protocol.TypeHello, "", hello)
	return sr
}

func (sr *scriptRunner) send(typ, id string, body any) {
	sr.t.Helper()
	f, err := protocol.NewFrame(typ, id, body)
	if err != nil {
		sr.t.Fatal(err)
	}
	b, _ := json.Marshal(f)
	sr.raw(b)
}

// keepAlive sends heartbeats every interval until the test ends, as a real
// runner does, so a slow step on a loaded machine is not taken for a dead
// runner. Write errors end it quietly (the test closes the connection).
func (sr *scriptRunner) keepAlive(interval time.Duration) {
	f, err := protocol.NewFrame(protocol.TypeHeartbeat, "", struct{}{})
	if err != nil {
		sr.t.Fatal(err)
	}
	b, _ := json.Marshal(f)
	done := make(chan struct{})
	sr.t.Cleanup(func() { close(done) })
	go func() {
		tick := time.NewTicker(interval)
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			err := sr.ws.Write(ctx, websocket.MessageText, b)
			cancel()
			if err != nil {
				return
			}
		}
	}()
}

func (sr *scriptRunner) raw(b []byte) {
	sr.t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := sr.ws.Write(ctx, websocket.MessageText, b); err != nil {
		sr.t.Fatalf("write: %v", err)
	}
}

func (sr *scriptRunner) read() protocol.Frame {
	sr.t.Helper()
	f, err := sr.tryRead(10 * time.Second)
	if err != nil {
		sr.t.Fatalf("read: %v", err)
	}
	return f
}

func (sr *scriptRunner) tryRead(d time.Duration) (protocol.Frame, error) {
	select {
	case f := <-sr.frames:
		return f, nil
	default:
	}
	select {
	case f := <-sr.frames:
		return f, nil
	case err := <-sr.err:
		sr.err <- err
		return protocol.Frame{}, err
	case <-time.After(d):
		return protocol.Frame{}, errors.New("timed out")
	}
}

// request sends a request and returns its reply, skipping other frames.
func (sr *scriptRunner) request(typ string, body any) protocol.Reply {
	sr.t.Helper()
	sr.seq++
	id := fmt.Sprintf("rq-%d", sr.seq)
	return sr.requestID(typ, id, body)
}

func (sr *scriptRunner) requestID(typ, id string, body any) protocol.Reply {
	sr.t.Helper()
	sr.send(typ, id, body)
	for {
		f := sr.read()
		if f.Type == protocol.TypeReply && f.ReplyTo == id {
			var r protocol.Reply
			if err := f.Decode(&r); err != nil {
				sr.t.Fatal(err)
			}
			return r
		}
	}
}

func (sr *scriptRunner) expect(typ string) protocol.Frame {
	sr.t.Helper()
	for {
		f := sr.read()
		if f.Type == typ {
			return f
		}
	}
}

func (sr *scriptRunner) offer() protocol.Offer {
	sr.t.Helper()
	var o protocol.Offer
	if err := sr.expect(protocol.TypeOffer).Decode(&o); err != nil {
		sr.t.Fatal(err)
	}
	return o
}

func wantErr(t testing.TB, r protocol.Reply, code string) {
	t.Helper()
	if r.OK || r.Error == nil || r.Error.Code != code {
		t.Fatalf("want error %s, got %+v", code, r)
	}
}

func wantOK(t testing.TB, r protocol.Reply) {
	t.Helper()
	if !r.OK {
		t.Fatalf("want ok, got %+v", r.Error)
	}
}

func sum(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }

func exit(n int) *int { return &n }

// runToEnd takes one offer through accept, log and finish.
func runToEnd(t testing.TB, sr *scriptRunner, o protocol.Offer, out string, code int) {
	t.Helper()
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	wantOK(t, sr.request(protocol.TypeLog, protocol.Log{AttemptRef: o.AttemptRef, Data: []byte(out)}))
	st := job.AttemptCompleted
	if code != 0 {
		st = job.AttemptFailed
	}
	wantOK(t, sr.request(protocol.TypeFinish, protocol.Finish{AttemptRef: o.AttemptRef,
		Outcome: job.Outcome{State: st, Reason: job.ReasonExited, ExitCode: exit(code)},
		LogSize: int64(len(out)), LogSHA256: sum([]byte(out))}))
}

func TestJobRunsThroughTheGateway(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	sr, w := th.dial(th.registerRunner("r1"), protocol.Hello{})
	if w.Lease.D() != 60*time.Second || w.LogChunkBytes != protocol.MaxLogChunk {
		t.Fatalf("welcome timing: %+v", w)
	}
	j := th.submit("echo", "hi")
	o := sr.offer()
	if o.Job != j.ID || o.Epoch != 1 || o.Spec.Agent != "exec" || o.Spec.Requester != "admin" {
		t.Fatalf("offer: %+v", o)
	}
	runToEnd(t, sr, o, "hi\n", 0)
	v := th.job(j.ID)
	if v.State != job.Completed || v.Runner != "r1" || len(v.Attempts) != 1 || *v.ExitCode != 0 || v.Attempts[0].LogSize != 3 {
		t.Fatalf("job after finish: %+v", v)
	}
	// finish again: idempotent
	r := sr.request(protocol.TypeFinish, protocol.Finish{AttemptRef: o.AttemptRef,
		Outcome: job.Outcome{State: job.AttemptCompleted, Reason: job.ReasonExited, ExitCode: exit(0)}, LogSize: 3, LogSHA256: sum([]byte("hi\n"))})
	wantOK(t, r)
	var ack protocol.FinishAck
	_ = json.Unmarshal(r.Body, &ack)
	if !ack.AlreadyFinished {
		t.Fatalf("second finish: %+v", ack)
	}
}

func TestRunnerMutationsAreFencedAndValidated(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	sr, _ := th.dial(th.registerRunner("r1"), protocol.Hello{})
	other, _ := th.dial(th.registerRunner("r2"), protocol.Hello{})
	j := th.submit("true")
	var o protocol.Offer
	// The job goes to whichever runner the dispatcher picked.
	f, err := sr.tryRead(2 * time.Second)
	if err == nil && f.Type == protocol.TypeOffer {
		_ = f.Decode(&o)
	} else {
		sr, other = other, sr
		o = sr.offer()
	}
	if o.Job != j.ID {
		t.Fatalf("offer for %s, want %s", o.Job, j.ID)
	}
	stale := o.AttemptRef
	stale.Epoch = 7
	wrongJob := o.AttemptRef
	wrongJob.Job = "j-nope"
	tests := []struct {
		name string
		c    *scriptRunner
		typ  string
		body any
		code string
	}{
		{"stale epoch", sr, protocol.TypeAccept, protocol.Accept{AttemptRef: stale}, rules.ErrFenced},
		{"another runner's attempt", other, protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}, rules.ErrFenced},
		{"no such attempt", sr, protocol.TypeAccept, protocol.Accept{AttemptRef: protocol.AttemptRef{Job: j.ID, Attempt: "a-nope", Epoch: 1}}, rules.ErrNotFound},
		{"mismatched job", sr, protocol.TypeAccept, protocol.Accept{AttemptRef: wrongJob}, rules.ErrBadRequest},
		{"malformed ref", sr, protocol.TypeAccept, protocol.Accept{}, rules.ErrBadRequest},
		{"log before accept", sr, protocol.TypeLog, protocol.Log{AttemptRef: o.AttemptRef, Data: []byte("x")}, rules.ErrFenced},
		{"finish before accept", sr, protocol.TypeFinish, protocol.Finish{AttemptRef: o.AttemptRef, Outcome: job.Outcome{State: job.AttemptFailed, Reason: job.ReasonExited, ExitCode: exit(1)}}, rules.ErrFenced},
		{"bad outcome", sr, protocol.TypeFinish, protocol.Finish{AttemptRef: o.AttemptRef, Outcome: job.Outcome{State: job.AttemptCompleted, ExitCode: exit(3)}}, rules.ErrBadRequest},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := th.job(j.ID)
			wantErr(t, tt.c.request(tt.typ, tt.body), tt.code)
			after := th.job(j.ID)
			if before.State != after.State || len(before.Attempts) != len(after.Attempts) || after.Attempts[0].State != before.Attempts[0].State {
				t.Fatalf("refused request changed state: %+v → %+v", before, after)
			}
		})
	}

	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef})) // accept again: same attempt
	wantOK(t, sr.request(protocol.TypeLog, protocol.Log{AttemptRef: o.AttemptRef, Data: []byte("abc")}))
	// a chunk at a wrong offset gets the hub's size back
	r := sr.request(protocol.TypeLog, protocol.Log{AttemptRef: o.AttemptRef, Offset: 10, Data: []byte("zz")})
	wantErr(t, r, rules.ErrOffset)
	if r.Error.Size == nil || *r.Error.Size != 3 {
		t.Fatalf("offset mismatch size: %+v", r.Error)
	}
	// a resent chunk is acknowledged without change
	wantOK(t, sr.request(protocol.TypeLog, protocol.Log{AttemptRef: o.AttemptRef, Offset: 0, Data: []byte("abc")}))
	// an offset whose end overflows is no resent chunk
	r = sr.request(protocol.TypeLog, protocol.Log{AttemptRef: o.AttemptRef, Offset: math.MaxInt64 - 1, Data: []byte("zz")})
	wantErr(t, r, rules.ErrBadRequest)
	if !strings.Contains(r.Error.Message, "offset") {
		t.Fatalf("overflowing offset: %+v", r.Error)
	}
	// finish with fewer bytes than sent: log_incomplete with the hub's size
	r = sr.request(protocol.TypeFinish, protocol.Finish{AttemptRef: o.AttemptRef, Outcome: job.Outcome{State: job.AttemptCompleted, Reason: job.ReasonExited, ExitCode: exit(0)}, LogSize: 5, LogSHA256: sum([]byte("abcde"))})
	wantErr(t, r, rules.ErrLogIncomplete)
	if *r.Error.Size != 3 {
		t.Fatalf("log_incomplete size: %+v", r.Error)
	}
	// same size, other bytes: the hub drops its copy and asks for all of it
	r = sr.request(protocol.TypeFinish, protocol.Finish{AttemptRef: o.AttemptRef, Outcome: job.Outcome{State: job.AttemptCompleted, Reason: job.ReasonExited, ExitCode: exit(0)}, LogSize: 3, LogSHA256: sum([]byte("xyz"))})
	wantErr(t, r, rules.ErrLogIncomplete)
	if *r.Error.Size != 0 {
		t.Fatalf("checksum mismatch should reset to 0: %+v", r.Error)
	}
	wantOK(t, sr.request(protocol.TypeLog, protocol.Log{AttemptRef: o.AttemptRef, Data: []byte("xyz")}))
	wantOK(t, sr.request(protocol.TypeFinish, protocol.Finish{AttemptRef: o.AttemptRef, Outcome: job.Outcome{State: job.AttemptCompleted, Reason: job.ReasonExited, ExitCode: exit(0)}, LogSize: 3, LogSHA256: sum([]byte("xyz"))}))
	if v := th.job(j.ID); v.State != job.Completed {
		t.Fatalf("state %s", v.State)
	}
}

func TestRequestIDsAreAppliedOnce(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	tok := th.registerRunner("r1")
	sr, _ := th.dial(tok, protocol.Hello{})
	j := th.submit("true")
	o := sr.offer()
	wantOK(t, sr.requestID(protocol.TypeAccept, "acc-1", protocol.Accept{AttemptRef: o.AttemptRef}))
	fin := protocol.Finish{AttemptRef: o.AttemptRef, Outcome: job.Outcome{State: job.AttemptFailed, Reason: job.ReasonExited, ExitCode: exit(2)}, LogSize: 0, LogSHA256: sum(nil)}
	first := sr.requestID(protocol.TypeFinish, "fin-1", fin)
	wantOK(t, first)
	// The reply was "lost": the runner reconnects and resends the same id.
	sr.ws.CloseNow()
	sr2, _ := th.dial(tok, protocol.Hello{Attempts: []protocol.Held{{AttemptRef: o.AttemptRef, Phase: protocol.PhaseFinishing}}})
	again := sr2.requestID(protocol.TypeFinish, "fin-1", fin)
	if !again.OK || string(again.Body) != string(first.Body) {
		t.Fatalf("resent id got %+v, first got %+v", again, first)
	}
	v := th.job(j.ID)
	if v.State != job.Failed || len(v.Attempts) != 1 {
		t.Fatalf("job: %+v", v)
	}
	if n := th.countEvents(j.ID, "finished"); n != 1 {
		t.Fatalf("finish applied %d times", n)
	}
}

// countEvents counts a job's events of one kind.
func (th *testHub) countEvents(jobID, kind string) int {
	th.t.Helper()
	var evs apitypes.EventList
	th.call(th.admin, "GET", "/jobs/"+jobID+"/events", nil, &evs)
	n := 0
	for _, e := range evs.Events {
		if e.Kind == kind {
			n++
		}
	}
	return n
}

func TestBadFramesCloseTheConnectionAndChangeNothing(t *testing.T) {
	t.Parallel()
	// An accept of the offer, spelled out so that it can be spoiled.
	accept := func(o protocol.Offer, body string) []byte {
		return []byte(fmt.Sprintf(`{"type":"accept","id":"a1","body":{"job":%q,"attempt":%q,"epoch":%d%s}}`, o.Job, o.Attempt, o.Epoch, body))
	}
	tests := []struct {
		name   string
		frame  func(protocol.Offer) []byte
		code   websocket.StatusCode
		reason string // in the close reason
	}{
		{"not json", func(protocol.Offer) []byte { return []byte("{nope") }, protocol.CloseProtocol, "malformed frame"},
		{"unknown type", func(protocol.Offer) []byte { return []byte(`{"type":"explode"}`) }, protocol.CloseProtocol, "explode"},
		{"request without id", func(protocol.Offer) []byte { return []byte(`{"type":"accept","body":{}}`) }, protocol.CloseProtocol, "id"},
		{"oversize", func(protocol.Offer) []byte { return bytes.Repeat([]byte("x"), protocol.MaxFrame+10) }, websocket.StatusMessageTooBig, ""},
		{"duplicate key in an accept", func(o protocol.Offer) []byte { return accept(o, fmt.Sprintf(`,"epoch":%d`, o.Epoch)) },
			protocol.CloseProtocol, `duplicate key "epoch" in the object at $.body`},
		{"duplicate type", func(o protocol.Offer) []byte {
			return []byte(fmt.Sprintf(`{"type":"heartbeat","type":"accept","id":"a1","body":{"job":%q,"attempt":%q,"epoch":%d}}`, o.Job, o.Attempt, o.Epoch))
		}, protocol.CloseProtocol, `duplicate key "type"`},
		{"trailing data after an accept", func(o protocol.Offer) []byte { return append(accept(o, ""), " {}"...) },
			protocol.CloseProtocol, "data after the JSON value"},
		{"invalid UTF-8 in an accept", func(o protocol.Offer) []byte { return accept(o, ",\"x\":\"\xff\"") },
			protocol.CloseProtocol, "not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			th := startHub(t, Config{})
			sr, _ := th.dial(th.registerRunner("r1"), protocol.Hello{})
			j := th.submit("true")
			sr.raw(tt.frame(sr.offer()))
			for {
				_, err := sr.tryRead(10 * time.Second)
				if err != nil {
					if got := websocket.CloseStatus(err); got != tt.code {
						t.Fatalf("close status %d, want %d (%v)", got, tt.code, err)
					}
					var ce websocket.CloseError
					if tt.reason != "" && (!errors.As(err, &ce) || !strings.Contains(ce.Reason, tt.reason)) {
						t.Fatalf("close reason %q, want %q in it", ce.Reason, tt.reason)
					}
					break
				}
			}
			// The frame changed nothing; the closed connection only put the
			// unaccepted offer back in the queue.
			if v := th.job(j.ID); (v.State != job.Offered && v.State != job.Queued) || v.Attempts[0].StartedAt != nil {
				t.Fatalf("job after a bad frame: %+v", v)
			}
		})
	}
}

func TestHelloIsChecked(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	tok := th.registerRunner("r1")
	ctx := context.Background()
	for _, tc := range []struct {
		hello protocol.Hello
		code  websocket.StatusCode
	}{
		{protocol.Hello{Protocol: 99, Slots: 1}, protocol.CloseVersion},
		{protocol.Hello{Protocol: protocol.Version, Slots: 1, RunnerVersion: strings.Repeat("v", protocol.MaxVersion+1)}, protocol.CloseRefused},
	} {
		ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(th.srv.URL, "http")+apitypes.APIPrefix+"/runner/connect",
			&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
		if err != nil {
			t.Fatal(err)
		}
		sr := newScriptRunner(t, ws)
		sr.send(protocol.TypeHello, "", tc.hello)
		_, err = sr.tryRead(5 * time.Second)
		if websocket.CloseStatus(err) != tc.code {
			t.Fatalf("hello %+v: want close %d, got %v", tc.hello, tc.code, err)
		}
	}
}

func TestTokensAreCheckedAtTheDoor(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	runnerTok := th.registerRunner("r1")
	var created apitypes.NewUserResponse
	if code, e := th.call(th.admin, "POST", "/users", apitypes.NewUserRequest{Name: "bob"}, &created); code != http.StatusCreated {
		t.Fatalf("add user: %d %v", code, e)
	}
	tests := []struct {
		name   string
		token  string
		method string
		path   string
		body   any
		status int
	}{
		{"no token", "", "GET", "/jobs", nil, 401},
		{"garbage token", "drv_u_nope", "GET", "/jobs", nil, 401},
		{"runner token on a user route", runnerTok, "GET", "/jobs", nil, 403},
		{"user token on the runner gateway", created.Token, "GET", "/runner/connect", nil, 403},
		{"non-admin adds a user", created.Token, "POST", "/users", apitypes.NewUserRequest{Name: "eve"}, 403},
		{"duplicate user", th.admin, "POST", "/users", apitypes.NewUserRequest{Name: "bob"}, 409},
		{"bad user name", th.admin, "POST", "/users", apitypes.NewUserRequest{Name: "../x"}, 400},
		{"unknown job", th.admin, "GET", "/jobs/j-nope", nil, 404},
		{"unknown agent", th.admin, "POST", "/jobs", apitypes.SubmitRequest{Agent: "skynet", Args: []string{"x"}}, 400},
		{"exec without argv", th.admin, "POST", "/jobs", apitypes.SubmitRequest{Agent: "exec"}, 400},
		{"bad state filter", th.admin, "GET", "/jobs?state=sleeping", nil, 400},
		{"bad approval key", th.admin, "POST", "/runners/approve", apitypes.ApproveRequest{Name: "x", Key: "abc"}, 400},
		{"revoke unknown runner", th.admin, "POST", "/runners/ghost/revoke", nil, 404},
		{"another user's job is not there for bob", created.Token, "POST", "/jobs/" + th.submit("true").ID + "/cancel", nil, 404},
		{"unknown route", th.admin, "GET", "/nothing", nil, 404},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, e := th.call(tt.token, tt.method, tt.path, tt.body, nil)
			if code != tt.status || e.Message == "" {
				t.Fatalf("got %d %+v, want %d with a message", code, e, tt.status)
			}
		})
	}
	// The token file is private and only a hash is stored.
	st, err := os.Stat(th.h.AdminTokenPath())
	if err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("admin token file mode: %v %v", st.Mode(), err)
	}
}

func TestIdempotencyKey(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	var a, b apitypes.JobView
	c1, _ := th.call(th.admin, "POST", "/jobs", apitypes.SubmitRequest{Agent: "exec", Args: []string{"true"}, Key: "k1"}, &a)
	c2, _ := th.call(th.admin, "POST", "/jobs", apitypes.SubmitRequest{Agent: "exec", Args: []string{"true"}, Key: "k1"}, &b)
	if c1 != 201 || c2 != 200 || a.ID != b.ID {
		t.Fatalf("same key: %d %s, %d %s", c1, a.ID, c2, b.ID)
	}
}

func TestRunnerApprovalAndRevocation(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	tok := auth.NewToken(auth.PrefixRunner)
	key := auth.Hash(tok)
	var r1, r2 apitypes.RunnerView
	th.call(th.admin, "POST", "/runners/approve", apitypes.ApproveRequest{Name: "box", Key: key}, &r1)
	th.call(th.admin, "POST", "/runners/approve", apitypes.ApproveRequest{Name: "box", Key: key}, &r2)
	if r1.ID == "" || r1.ID != r2.ID {
		t.Fatalf("approving the same key twice made two runners: %s %s", r1.ID, r2.ID)
	}
	var bob apitypes.NewUserResponse
	th.call(th.admin, "POST", "/users", apitypes.NewUserRequest{Name: "bob"}, &bob)
	if code, _ := th.call(bob.Token, "POST", "/runners/approve", apitypes.ApproveRequest{Name: "box", Key: key}, nil); code != 403 {
		t.Fatalf("another owner re-approving: %d", code)
	}
	if code, _ := th.call(bob.Token, "POST", "/runners/approve", apitypes.ApproveRequest{Name: "box", Key: auth.Hash("other")}, nil); code != 409 {
		t.Fatalf("another owner taking the name: %d", code)
	}
	sr, _ := th.dial(tok, protocol.Hello{})
	if code, _ := th.call(th.admin, "POST", "/runners/box/revoke", nil, nil); code != 200 {
		t.Fatalf("revoke: %d", code)
	}
	_, err := sr.tryRead(5 * time.Second)
	if websocket.CloseStatus(err) != protocol.CloseRevoked {
		t.Fatalf("revoked runner's connection: %v", err)
	}
	_, resp, err := websocket.Dial(context.Background(), "ws"+strings.TrimPrefix(th.srv.URL, "http")+apitypes.APIPrefix+"/runner/connect",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
	if err == nil || resp == nil || resp.StatusCode != 401 {
		t.Fatalf("revoked runner reconnect: %v %v", resp, err)
	}
}

func TestNewerConnectionReplacesOlder(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	tok := th.registerRunner("r1")
	old, _ := th.dial(tok, protocol.Hello{})
	th.dial(tok, protocol.Hello{})
	_, err := old.tryRead(5 * time.Second)
	if websocket.CloseStatus(err) != protocol.CloseReplaced {
		t.Fatalf("old connection: %v", err)
	}
}

func TestLeaseExpiry(t *testing.T) {
	// Heartbeats far apart: the test closes the connection itself, and a
	// loaded machine's pause of a second in the runner's keepAlive must not
	// close it first ("no heartbeat" at load 16).
	th := startHub(t, Config{Lease: time.Second, Heartbeat: 10 * time.Second, Sweep: 50 * time.Millisecond})
	tok := th.registerRunner("r1")
	sr, _ := th.dial(tok, protocol.Hello{Slots: 2})
	sr.keepAlive(50 * time.Millisecond)
	started := th.submit("sleep", "100")
	o := sr.offer()
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	offered := th.submit("true")
	o2 := sr.offer()
	if o2.Job != offered.ID {
		t.Fatalf("second offer for %s", o2.Job)
	}
	sr.ws.CloseNow()
	v := th.waitJob(started.ID, func(v apitypes.JobView) bool { return v.State == job.Unknown })
	if v.Reason != job.ReasonRunnerLost || v.Attempts[0].State != job.AttemptUnknown {
		t.Fatalf("lost job: %+v", v)
	}
	// the never-accepted offer went back to the queue
	th.waitJob(offered.ID, func(v apitypes.JobView) bool { return v.State == job.Queued })
	// a new runner gets the queued job, never the unknown one
	sr2, _ := th.dial(th.registerRunner("r2"), protocol.Hello{Slots: 2})
	sr2.keepAlive(50 * time.Millisecond)
	o3 := sr2.offer()
	if o3.Job != offered.ID || o3.Epoch != 2 {
		t.Fatalf("requeued offer: %+v", o3)
	}
	if f, err := sr2.tryRead(500 * time.Millisecond); err == nil && f.Type == protocol.TypeOffer {
		t.Fatalf("unknown job was offered again: %+v", f)
	}
	// retry is the explicit way back
	if code, e := th.call(th.admin, "POST", "/jobs/"+started.ID+"/retry", nil, nil); code != 200 {
		t.Fatalf("retry: %d %v", code, e)
	}
	o4 := sr2.offer()
	if o4.Job != started.ID || o4.Epoch != 2 {
		t.Fatalf("retried offer: %+v", o4)
	}
	// the old runner comes back with its attempt: it is told to drop it
	_, w := th.dial(tok, protocol.Hello{Attempts: []protocol.Held{{AttemptRef: o.AttemptRef, Phase: protocol.PhaseRunning}}})
	if len(w.Drop) != 1 || w.Drop[0].Attempt != o.Attempt {
		t.Fatalf("welcome drop: %+v", w.Drop)
	}
}

func TestCancel(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	sr, _ := th.dial(th.registerRunner("r1"), protocol.Hello{})
	j := th.submit("sleep", "100")
	o := sr.offer()
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	if code, _ := th.call(th.admin, "POST", "/jobs/"+j.ID+"/cancel", nil, nil); code != 200 {
		t.Fatal("cancel refused")
	}
	var co protocol.CancelOrder
	if err := sr.expect(protocol.TypeCancel).Decode(&co); err != nil || co.Attempt != o.Attempt {
		t.Fatalf("cancel order: %+v %v", co, err)
	}
	wantOK(t, sr.request(protocol.TypeFinish, protocol.Finish{AttemptRef: o.AttemptRef,
		Outcome: job.Outcome{State: job.AttemptCancelled, Reason: job.ReasonCancelled, ExitCode: exit(143)}, LogSHA256: sum(nil)}))
	if v := th.job(j.ID); v.State != job.Cancelled {
		t.Fatalf("state %s", v.State)
	}
	if code, e := th.call(th.admin, "POST", "/jobs/"+j.ID+"/cancel", nil, nil); code != 409 {
		t.Fatalf("cancel a cancelled job: %d %+v", code, e)
	}
	// queued job: cancelled at once
	sr.ws.CloseNow()
	q := th.submit("true")
	th.call(th.admin, "POST", "/jobs/"+q.ID+"/cancel", nil, nil)
	if v := th.job(q.ID); v.State != job.Cancelled {
		t.Fatalf("queued cancel: %s", v.State)
	}
}

func TestReleasedAttemptIsRequeued(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	sr, _ := th.dial(th.registerRunner("r1"), protocol.Hello{})
	j := th.submit("sleep", "100")
	o := sr.offer()
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	sr.send(protocol.TypeStatus, "", protocol.Status{Slots: 0, Attempts: []protocol.Held{{AttemptRef: o.AttemptRef, Phase: protocol.PhaseRunning}}})
	wantOK(t, sr.request(protocol.TypeFinish, protocol.Finish{AttemptRef: o.AttemptRef,
		Outcome: job.Outcome{State: job.AttemptReleased, Reason: job.ReasonRunnerShutdown, ExitCode: exit(143)}, LogSHA256: sum(nil)}))
	sr.ws.Close(websocket.StatusNormalClosure, "")
	sr2, _ := th.dial(th.registerRunner("r2"), protocol.Hello{})
	o2 := sr2.offer()
	if o2.Job != j.ID || o2.Epoch != 2 {
		t.Fatalf("released job offer: %+v", o2)
	}
	runToEnd(t, sr2, o2, "done\n", 0)
	if v := th.job(j.ID); v.State != job.Completed || v.Runner != "r2" || len(v.Attempts) != 2 {
		t.Fatalf("job: %+v", v)
	}
}

func TestLogFollow(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	sr, _ := th.dial(th.registerRunner("r1"), protocol.Hello{})
	j := th.submit("true")
	o := sr.offer()
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	got := th.follow(th.srv.URL, j.ID, "10000", func(_ int, body, complete string) string { return body + "|" + complete })
	time.Sleep(100 * time.Millisecond) // let the long poll park (the test passes either way)
	wantOK(t, sr.request(protocol.TypeLog, protocol.Log{AttemptRef: o.AttemptRef, Data: []byte("hello")}))
	if s := <-got; s != "hello|false" {
		t.Fatalf("long poll got %q", s)
	}
}

// follow reads job id's log from base with ?wait=wait in the background;
// the channel gets show(status, body, the log-complete header), or the
// request's error.
func (th *testHub) follow(base, id, wait string, show func(status int, body, complete string) string) <-chan string {
	got := make(chan string, 1)
	go func() {
		req, _ := http.NewRequest("GET", base+apitypes.APIPrefix+"/jobs/"+id+"/log?wait="+wait, nil)
		req.Header.Set("Authorization", "Bearer "+th.admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			got <- err.Error()
			return
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		got <- show(resp.StatusCode, string(b), resp.Header.Get(apitypes.HeaderLogComplete))
	}()
	return got
}

// waitFollowing waits until a follow of job id is parked in the hub.
func (th *testHub) waitFollowing(t *testing.T, id string) {
	t.Helper()
	sandboxtest.WaitFor(t, "the follow to wait", func() bool {
		th.h.mu.Lock()
		defer th.h.mu.Unlock()
		return th.h.waits[id] != nil
	})
}

// A follower that gets its answer at once, or gives up, must not leave a
// wait entry behind: the map would otherwise grow with every job ever read.
func TestLogReadsLeaveNoWaiters(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	sr, _ := th.dial(th.registerRunner("r1"), protocol.Hello{})
	j := th.submit("true")
	runToEnd(t, sr, sr.offer(), "out\n", 0)
	for _, q := range []string{"", "?wait=50", "?attempt=1&offset=4&wait=50"} {
		req, _ := http.NewRequest("GET", th.srv.URL+apitypes.APIPrefix+"/jobs/"+j.ID+"/log"+q, nil)
		req.Header.Set("Authorization", "Bearer "+th.admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	queued := th.submit("true") // no runner slot: its log read times out empty
	sr.ws.CloseNow()
	req, _ := http.NewRequest("GET", th.srv.URL+apitypes.APIPrefix+"/jobs/"+queued.ID+"/log?wait=50", nil)
	req.Header.Set("Authorization", "Bearer "+th.admin)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	th.h.mu.Lock()
	n := len(th.h.waits)
	th.h.mu.Unlock()
	if n != 0 {
		t.Fatalf("%d wait entries left after the reads returned", n)
	}
}
