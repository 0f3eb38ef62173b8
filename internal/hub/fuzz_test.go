package hub

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/coder/websocket"

	"drover/internal/apitypes"
	"drover/internal/auth"
	"drover/internal/protocol"
	"drover/internal/rules"
)

// Fuzz targets for what the hub reads from runners and API clients: the
// gateway's frames (through a real connection), names and labels (git's
// pkt-lines and push commands are internal/githttp's). Each checks that the parser never panics or
// hangs, that a refusal is an error that changes nothing, and round-trips
// where the format has one.

// The documented name rules, written out as a reference.
var (
	refName  = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$`)
	refLabel = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._/-]*$`)
)

// refPlainLine is single-line plain text: UTF-8 without C0, DEL or C1.
func refPlainLine(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r >= 0x7f && r <= 0x9f {
			return false
		}
	}
	return true
}

func FuzzNames(f *testing.F) {
	for _, s := range []string{"r1", "runner.one", "-x", ".x", "a/b", strings.Repeat("a", 64), strings.Repeat("a", 65), "a\n", "ä", "", "gpu", "k8s.io/arch", "a//b"} {
		f.Add(s, "v")
	}
	f.Add("k", "a\x1bb")
	f.Add("k", "\u009b")
	f.Fuzz(func(t *testing.T, k, v string) {
		if len(k)+len(v) > 4096 {
			return
		}
		if rules.ValidName(k) != refName.MatchString(k) {
			t.Fatalf("ValidName(%q) = %v", k, rules.ValidName(k))
		}
		if m := rules.ValidName(k); m && (len(k) > 64 || strings.ContainsAny(k, "/\\ \n\x00")) {
			t.Fatalf("runner name %q accepted", k)
		}
		err := rules.CheckLabels(map[string]string{k: v})
		want := len(k) <= rules.MaxLabelLen && refLabel.MatchString(k) && len(v) <= rules.MaxLabelLen && refPlainLine(v)
		if (err == nil) != want {
			t.Fatalf("label %q=%q: %v, want ok=%v", k, v, err, want)
		}
	})
}

// fuzzHub starts one hub for a whole fuzz run (a hub per input would
// measure SQLite, not the gateway) and approves a runner on it.
func fuzzHub(f *testing.F) (*testHub, string) {
	cfg := Config{DataDir: f.TempDir(), Logger: slog.New(slog.NewTextHandler(io.Discard, nil))}
	h, err := Open(context.Background(), cfg)
	if err != nil {
		f.Fatal(err)
	}
	th := &testHub{h: h, srv: httptest.NewServer(h.Handler()), cfg: cfg}
	f.Cleanup(func() {
		th.srv.CloseClientConnections()
		th.srv.Close()
		th.h.Close()
	})
	tok, err := os.ReadFile(h.AdminTokenPath())
	if err != nil {
		f.Fatal(err)
	}
	th.admin = strings.TrimSpace(string(tok))
	runner := auth.NewToken(auth.PrefixRunner)
	b, _ := json.Marshal(apitypes.ApproveRequest{Name: "fuzz", Key: auth.Hash(runner)})
	req, _ := http.NewRequest("POST", th.srv.URL+apitypes.APIPrefix+"/runners/approve", bytes.NewReader(b))
	req.Header.Set("Authorization", "Bearer "+th.admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		f.Fatalf("approve: %s", resp.Status)
	}
	return th, runner
}

// settleGoroutines waits (generously) until the goroutine count is back
// to base: a connection or request must leave nothing running.
func settleGoroutines(t *testing.T, base int) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for runtime.NumGoroutine() > base {
		if time.Now().After(deadline) {
			buf := make([]byte, 1<<20)
			t.Fatalf("%d goroutines, %d before:\n%s", runtime.NumGoroutine(), base, buf[:runtime.Stack(buf, true)])
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// openFDs counts the process's open sockets and pipes (-1 where /proc is
// not there to tell): what a connection or a git subprocess would leak.
// Files are left out: the store's connection pool grows to its size and
// keeps its database files open.
func openFDs() int {
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return -1
	}
	n := 0
	for _, e := range ents {
		l, err := os.Readlink("/proc/self/fd/" + e.Name())
		if err == nil && (strings.HasPrefix(l, "socket:") || strings.HasPrefix(l, "pipe:")) {
			n++
		}
	}
	return n
}

// settleFDs waits (generously) until that count is back to base.
func settleFDs(t *testing.T, base int) {
	t.Helper()
	if base < 0 {
		return
	}
	deadline := time.Now().Add(10 * time.Second)
	for openFDs() > base {
		if time.Now().After(deadline) {
			t.Fatalf("%d open sockets and pipes, %d before", openFDs(), base)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// FuzzGatewayFrame sends a fuzzed frame after hello on a real runner
// connection. The hub answers it, or closes the connection with a protocol
// code; it never fails internally (a 500's counterpart), and the
// connection leaves no goroutine and no open file behind. The frame also goes first, in
// place of hello, for readHello.
func FuzzGatewayFrame(f *testing.F) {
	for _, s := range frameSeeds() {
		f.Add([]byte(s), false)
	}
	f.Add([]byte(`{"type":"hello","body":{"protocol":1,"slots":1,"labels":{"":"x"}}}`), true)
	f.Add([]byte(`{"type":"hello","body":{"protocol":1,"slots":1,"attempts":[{"job":"","epoch":0}]}}`), true)
	th, tok := fuzzHub(f)
	url := "ws" + strings.TrimPrefix(th.srv.URL, "http") + apitypes.APIPrefix + "/runner/connect"
	hello, _ := json.Marshal(protocol.Frame{Type: protocol.TypeHello, Body: json.RawMessage(`{"protocol":1,"slots":1,"attempts":[]}`)})
	probe, _ := json.Marshal(protocol.Frame{Type: protocol.TypeContext, ID: "fuzz-probe", Body: json.RawMessage(`{"job":"j","attempt":"a","epoch":1}`)})
	f.Fuzz(func(t *testing.T, data []byte, first bool) {
		if len(data) > maxFuzzFrame {
			return
		}
		base, fds := runtime.NumGoroutine(), openFDs()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		ws, _, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
		if err != nil {
			t.Fatalf("dial: %v", err)
		}
		ws.SetReadLimit(protocol.MaxFrame)
		frames := [][]byte{data, probe}
		if !first {
			frames = [][]byte{hello, data, probe}
		}
		for _, fr := range frames {
			if ws.Write(ctx, websocket.MessageText, fr) != nil {
				break // the hub closed already
			}
		}
		for {
			_, msg, err := ws.Read(ctx)
			if err != nil {
				switch st := websocket.CloseStatus(err); st {
				case protocol.CloseProtocol, protocol.CloseRefused, protocol.CloseVersion, websocket.StatusMessageTooBig:
				default:
					t.Fatalf("connection ended with %v (%d), want a protocol close", err, st)
				}
				break
			}
			var fr protocol.Frame
			if err := json.Unmarshal(msg, &fr); err != nil {
				t.Fatalf("hub sent a malformed frame %q", msg)
			}
			if fr.Type != protocol.TypeReply {
				continue
			}
			var rep protocol.Reply
			if err := fr.Decode(&rep); err != nil {
				t.Fatal(err)
			}
			if rep.Error != nil && rep.Error.Code == rules.ErrInternal {
				t.Fatalf("internal error for %q: %s", data, rep.Error.Message)
			}
			if fr.ReplyTo == "fuzz-probe" {
				break
			}
		}
		ws.CloseNow()
		settleGoroutines(t, base)
		settleFDs(t, fds)
	})
}

const maxFuzzFrame = 64 << 10

// frameSeeds are frames a runner might send after hello.
func frameSeeds() []string {
	return []string{
		`{"type":"heartbeat"}`,
		`{"type":"status","body":{"slots":2,"attempts":[{"job":"j","attempt":"a","epoch":1,"phase":"running"}],"agents":["exec"]}}`,
		`{"type":"status","body":{"slots":-1}}`,
		`{"type":"accept","id":"rq-1","body":{"job":"j-1","attempt":"a-1","epoch":3}}`,
		`{"type":"decline","id":"rq-2","body":{"job":"j-1","attempt":"a-1","epoch":3,"reason":"busy"}}`,
		`{"type":"log","id":"rq-3","body":{"job":"j-1","attempt":"a-1","epoch":3,"offset":0,"data":"aGVsbG8K"}}`,
		`{"type":"log","id":"rq-4","body":{"job":"j","attempt":"a","epoch":1,"offset":9223372036854775807,"data":"eA=="}}`,
		`{"type":"finish","id":"rq-5","body":{"job":"j-1","attempt":"a-1","epoch":3,"outcome":{"state":"completed","exit_code":0},"log_size":6}}`,
		`{"type":"ask","id":"rq-6","body":{"job":"j-1","attempt":"a-1","epoch":3,"question":"which?","choices":["a","b"]}}`,
		`{"type":"deliver","id":"rq-8","body":{"job":"j-1","attempt":"a-1","epoch":3,"summary":"done"}}`,
		`{"type":"context","id":"rq-9","body":{"job":"j-1","attempt":"a-1","epoch":3}}`,
		`{"type":"accept","id":"","body":{}}`,
		`{"type":"offer"}`,
		`{nope`,
	}
}

// fuzzRoutes are the API routes FuzzAPIRequest drives; X is replaced by
// the fuzzed path segment. Routes that would end the fuzz run's own
// access (removing users, rotating tokens, revoking the runner) are left
// out; their bodies are parsed by the same decoders.
var fuzzRoutes = []struct {
	method, path string
	runner       bool
}{
	{"POST", "/jobs", false},
	{"GET", "/jobs", false},
	{"GET", "/jobs/X", false},
	{"POST", "/jobs/X/cancel", false},
	{"POST", "/jobs/X/retry", false},
	{"POST", "/jobs/X/answer", false},
	{"POST", "/jobs/X/approve", false},
	{"POST", "/jobs/X/restart", false},
	{"GET", "/jobs/X/log", false},
	{"GET", "/jobs/X/events", false},
	{"GET", "/questions", false},
	{"POST", "/users", false},
	{"POST", "/runners/approve", false},
	{"POST", "/runners/X/share", false},
	{"POST", "/runners/X/unshare", false},
	{"POST", "/accounts/move", false},
	{"POST", "/accounts/share", false},
	{"PUT", "/projects/X", false},
	{"GET", "/projects/X/members", false},
	{"POST", "/projects/X/members", false},
	{"POST", "/runner/publish", true},
	{"GET", "/runner/context", true},
	{"GET", "/runner/login", true},
	{"POST", "/runners/X/accept", false},
	{"POST", "/runners/X/decline", false},
}

// FuzzAPIRequest sends fuzzed paths, queries and bodies to the HTTP API
// as the admin (or the runner). Malformed input gets a 4xx with a JSON
// error, never a 500 or a panic, and the request leaves no goroutine and
// no open file behind.
func FuzzAPIRequest(f *testing.F) {
	f.Add(uint8(0), "", "", []byte(`{"agent":"exec","args":["true"],"labels":{"gpu":"x"}}`))
	f.Add(uint8(0), "", "", []byte(`{"agent":"exec","args":["true"],"timeout":18446744073710}`))
	f.Add(uint8(0), "", "", []byte(`{"agent":"claude","args":[" "],"context":[{"name":"../x","data":"eA=="}]}`))
	f.Add(uint8(0), "", "", []byte(`{"agent":"exec","args":["true"],"repo":{"project":"p","base":"0123456789abcdef0123456789abcdef01234567"}}`))
	f.Add(uint8(1), "", "state=queued&limit=-1", []byte{})
	f.Add(uint8(5), "j-1", "", []byte(`{"text":"yes","choice":2}`))
	f.Add(uint8(8), "j-1", "attempt=1&offset=9223372036854775807&wait=9223372036854775807", []byte{})
	f.Add(uint8(9), "j-1", "after=-5", []byte{})
	f.Add(uint8(11), "", "", []byte(`{"name":"bob"}`))
	f.Add(uint8(12), "", "", []byte(`{"name":"r2","key":"zz"}`))
	f.Add(uint8(13), "fuzz", "", []byte(`{"user":"admin","project":"p"}`))
	f.Add(uint8(17), "p", "", []byte(`{"remote":"https://example.com/x.git"}`))
	f.Add(uint8(20), "", "job=j&attempt=a&epoch=1&commit=0123456789abcdef0123456789abcdef01234567&sha256=00", []byte("# v2 git bundle\n"))
	f.Add(uint8(21), "", "job=j&attempt=a&epoch=x", []byte{})
	f.Add(uint8(0), "", "", []byte(`{"agent":"exec","args":["true"]} trailing`))
	th, runnerTok := fuzzHub(f)
	handler := th.h.Handler()
	f.Fuzz(func(t *testing.T, route uint8, seg, query string, body []byte) {
		if len(body) > 1<<16 || len(seg)+len(query) > 4096 {
			return
		}
		rt := fuzzRoutes[int(route)%len(fuzzRoutes)]
		target := apitypes.APIPrefix + strings.ReplaceAll(rt.path, "X", url.PathEscape(seg))
		if query != "" {
			target += "?" + query
		}
		req, err := http.NewRequest(rt.method, "http://hub"+target, bytes.NewReader(body))
		if err != nil {
			return
		}
		tok := th.admin
		if rt.runner {
			tok = runnerTok
		}
		req.Header.Set("Authorization", "Bearer "+tok)
		base, fds := runtime.NumGoroutine(), openFDs()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		w := httptest.NewRecorder()
		handler.ServeHTTP(w, req.WithContext(ctx))
		if ctx.Err() != nil {
			t.Fatalf("%s %s took over 30 s", rt.method, target)
		}
		if w.Code >= 500 {
			t.Fatalf("%s %s %q: %d %s", rt.method, target, body, w.Code, w.Body.Bytes())
		}
		if w.Code >= 400 {
			var eb apitypes.ErrorBody
			if err := json.Unmarshal(w.Body.Bytes(), &eb); err != nil || eb.Error.Code == "" {
				t.Fatalf("%s %s: %d with a body that is no JSON error: %q", rt.method, target, w.Code, w.Body.Bytes())
			}
		}
		settleGoroutines(t, base)
		settleFDs(t, fds)
	})
}

// FuzzLogAppend sends log chunks of a running attempt at fuzzed offsets
// (absolute, or near the hub's size) and holds the hub to the rule: a
// chunk at the hub's size is appended; one wholly inside what it holds is
// a resend, acknowledged without a change; anything else is refused
// (offset_mismatch with the hub's size, or bad_request) and changes
// nothing. After every chunk the log read back is exactly what was
// appended.
func FuzzLogAppend(f *testing.F) {
	f.Add(uint8(1), int64(0), []byte("hello\n"))
	f.Add(uint8(0), int64(0), []byte("hello again\n"))
	f.Add(uint8(2), int64(3), []byte("xy"))
	f.Add(uint8(1), int64(5), []byte("gap"))
	f.Add(uint8(0), int64(-1), []byte("neg"))
	f.Add(uint8(0), int64(9223372036854775807), []byte("x"))
	f.Add(uint8(0), int64(9223372036854775806), []byte("xyz"))
	f.Add(uint8(1), int64(0), []byte{})
	th, tok := fuzzHub(f)
	ctx := context.Background()
	ws, _, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(th.srv.URL, "http")+apitypes.APIPrefix+"/runner/connect",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { ws.CloseNow() })
	sr := newScriptRunner(nil, ws)
	beat := time.NewTicker(time.Second)
	f.Cleanup(beat.Stop)
	go func() {
		b, _ := json.Marshal(protocol.Frame{Type: protocol.TypeHeartbeat})
		for range beat.C {
			if ws.Write(ctx, websocket.MessageText, b) != nil {
				return
			}
		}
	}()
	send := func(typ, id string, body any) protocol.Frame {
		fr, _ := protocol.NewFrame(typ, id, body)
		b, _ := json.Marshal(fr)
		if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
			f.Fatal(err)
		}
		for {
			got, err := sr.tryRead(20 * time.Second)
			if err != nil {
				f.Fatal(err)
			}
			if id == "" || got.Type == protocol.TypeReply && got.ReplyTo == id {
				return got
			}
		}
	}
	if w := send(protocol.TypeHello, "", protocol.Hello{Protocol: protocol.Version, Slots: 1}); w.Type != protocol.TypeWelcome {
		f.Fatalf("want welcome, got %s", w.Type)
	}
	jb, _ := json.Marshal(apitypes.SubmitRequest{Agent: "exec", Args: []string{"true"}})
	req, _ := http.NewRequest("POST", th.srv.URL+apitypes.APIPrefix+"/jobs", bytes.NewReader(jb))
	req.Header.Set("Authorization", "Bearer "+th.admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		f.Fatal(err)
	}
	var jv apitypes.JobView
	_ = json.NewDecoder(resp.Body).Decode(&jv)
	resp.Body.Close()
	var o protocol.Offer
	for o.Job == "" {
		got, err := sr.tryRead(20 * time.Second)
		if err != nil {
			f.Fatal(err)
		}
		if got.Type == protocol.TypeOffer {
			_ = got.Decode(&o)
		}
	}
	var rep protocol.Reply
	_ = send(protocol.TypeAccept, "accept", protocol.Accept{AttemptRef: o.AttemptRef}).Decode(&rep)
	if !rep.OK {
		f.Fatalf("accept: %+v", rep.Error)
	}
	var model []byte // what the hub must hold
	seq := 0
	f.Fuzz(func(t *testing.T, mode uint8, off int64, data []byte) {
		if len(data) > 4096 {
			return
		}
		size := int64(len(model))
		switch mode % 3 {
		case 1:
			off = size + off%8
		case 2:
			off = size - off%8
		}
		seq++
		id := "log-" + strconv.Itoa(seq)
		var rep protocol.Reply
		if err := send(protocol.TypeLog, id, protocol.Log{AttemptRef: o.AttemptRef, Offset: off, Data: data}).Decode(&rep); err != nil {
			t.Fatal(err)
		}
		end := off + int64(len(data))
		overflow := off > 0 && end < off
		switch {
		case off < 0 || overflow:
			if rep.OK {
				t.Fatalf("chunk at offset %d (+%d) accepted", off, len(data))
			}
		case off == size:
			if !rep.OK {
				t.Fatalf("chunk at the hub's size %d refused: %+v", size, rep.Error)
			}
			model = append(model, data...)
		case end <= size:
			if !rep.OK {
				t.Fatalf("resent chunk %d+%d refused (hub holds %d): %+v", off, len(data), size, rep.Error)
			}
		default:
			if rep.OK || rep.Error.Code != rules.ErrOffset || rep.Error.Size == nil || *rep.Error.Size != size {
				t.Fatalf("chunk at %d (+%d, hub holds %d): %+v", off, len(data), size, rep)
			}
		}
		if rep.OK {
			var ack protocol.LogAck
			if err := json.Unmarshal(rep.Body, &ack); err != nil || ack.Size != int64(len(model)) {
				t.Fatalf("ack %s, want size %d", rep.Body, len(model))
			}
		}
		req, _ := http.NewRequest("GET", th.srv.URL+apitypes.APIPrefix+"/jobs/"+o.Job+"/log?offset=0", nil)
		req.Header.Set("Authorization", "Bearer "+th.admin)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if !bytes.Equal(got, model) {
			t.Fatalf("log holds %d bytes, want %d (%q...)", len(got), len(model), got[:min(len(got), 40)])
		}
	})
}
