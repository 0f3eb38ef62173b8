package web

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/job"
	"drover/internal/protocol"
)

// fakeBackend is one user, alice, and one job, j1, with one attempt whose
// log the test writes.
type fakeBackend struct {
	mu       sync.Mutex
	sessions map[string]bool
	log      []byte
	complete bool
	changed  chan struct{}
	acts     []string
	order    []apitypes.AccountView // alice's accounts, best first, then one bob shared
	diff     []byte                 // j1's published change (nil: none)
	reads    int                    // Log calls: what the store would be asked
	hidden   bool                   // alice may no longer see j1 (Job refuses)
	pub      *apitypes.PublicationView
	pipes    []apitypes.PipelineView // the pipelines alice may see (fakePipeline)
	judge    *apitypes.GroupJudge    // fakeGroup's judge
}

const aliceToken = "drv_u_alice"

var alice = User{ID: "u-1", Name: "alice"}

func newFake() *fakeBackend {
	return &fakeBackend{sessions: map[string]bool{}, changed: make(chan struct{}), pipes: []apitypes.PipelineView{fakePipeline()}, order: []apitypes.AccountView{
		{Position: 1, Runner: "box-1", ID: "acct_a", Agent: "claude", Label: "work", Owner: "alice", State: "ready"},
		{Position: 2, Runner: "box-1", ID: "acct_b", Agent: "codex", Owner: "alice", State: "ready"},
		{Position: 3, Runner: "box-2", ID: "acct_c", Agent: "claude", Label: "<i>spare</i>", Owner: "alice", State: "ready"},
		{Position: 1, Runner: "bobs", ID: "acct_z", Agent: "claude", Owner: "bob", State: "ready"},
	}}
}

func (f *fakeBackend) appendLog(s string, complete bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.log = append(f.log, s...)
	f.complete = complete
	close(f.changed)
	f.changed = make(chan struct{})
}

var errNoJob = &Error{Status: http.StatusNotFound, Msg: "no such job"}

func (f *fakeBackend) UserOf(_ context.Context, token string) (User, error) {
	if token != aliceToken {
		return User{}, &Error{Status: http.StatusUnauthorized, Msg: "token not recognised"}
	}
	return alice, nil
}

func (f *fakeBackend) NewSession(context.Context, User) (string, time.Time, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s := fmt.Sprintf("drv_s_%d", len(f.sessions)+1)
	f.sessions[s] = true
	return s, time.Now().Add(time.Hour), nil
}

func (f *fakeBackend) Session(_ context.Context, s string) (User, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.sessions[s] {
		return User{}, &Error{Status: http.StatusUnauthorized, Msg: "the session is not known"}
	}
	return alice, nil
}

func (f *fakeBackend) EndSession(_ context.Context, s string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.sessions, s)
	return nil
}

func (f *fakeBackend) Runners(context.Context, User) ([]apitypes.RunnerView, error) {
	return []apitypes.RunnerView{{Name: "box-<b>1</b>", Owner: "alice", Connected: true, Slots: 2, Access: "private", NotReady: "disk <b>full</b>"},
		{Name: "box-3", Owner: "alice", Connected: true, Slots: 2, Draining: true, Access: "private"}}, nil
}

func (f *fakeBackend) job() apitypes.JobView {
	f.mu.Lock()
	defer f.mu.Unlock()
	st := job.Running
	if f.complete {
		st = job.Completed
	}
	v := apitypes.JobView{ID: "j1", State: st, Agent: "exec", Requester: "alice", CreatedAt: time.Now(),
		Attempts: []apitypes.AttemptView{{Number: 1, State: job.AttemptRunning, Runner: "box-1", LogSize: int64(len(f.log)),
			Usage:     &protocol.Usage{InputTokens: 1200, OutputTokens: 340, CacheReadTokens: 5, CostUSD: 0.0123},
			Isolation: &protocol.Isolation{Kind: "bwrap", Network: "proxy", Denials: []protocol.Denial{{Host: "<b>evil</b>:443", Phase: "agent", Count: 2, Allow: "drover projects network web --agent x"}}}}}}
	v.Publication = f.pub
	if f.diff != nil {
		v.Base, v.Head = strings.Repeat("a", 40), strings.Repeat("b", 40)
	}
	return v
}

func (f *fakeBackend) Diff(_ context.Context, _ User, id string, max int) (Diff, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if id != "j1" {
		return Diff{}, errNoJob
	}
	if len(f.diff) > max {
		return Diff{Patch: f.diff[:max], Cut: true}, nil
	}
	return Diff{Patch: f.diff}, nil
}

func (f *fakeBackend) Jobs(context.Context, User, string) ([]apitypes.JobView, error) {
	return []apitypes.JobView{f.job()}, nil
}

func (f *fakeBackend) Job(_ context.Context, _ User, id string) (apitypes.JobView, error) {
	f.mu.Lock()
	hidden := f.hidden
	f.mu.Unlock()
	if id != "j1" || hidden {
		return apitypes.JobView{}, errNoJob
	}
	return f.job(), nil
}

func (f *fakeBackend) Events(_ context.Context, _ User, id string, after int64) ([]apitypes.EventView, error) {
	if id != "j1" {
		return nil, errNoJob
	}
	evs := []apitypes.EventView{}
	if after < 1 {
		evs = append(evs, apitypes.EventView{Seq: 1, Job: "j1", Kind: "submitted", Message: "<img src=x onerror=alert(1)>"})
	}
	return evs, nil
}

func (f *fakeBackend) Log(_ context.Context, _ User, id string, attempt, offset int64) (LogSlice, error) {
	if id != "j1" {
		return LogSlice{}, errNoJob
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	f.reads++
	size := int64(len(f.log))
	if offset > size {
		return LogSlice{}, &Error{Status: http.StatusBadRequest, Msg: "offset past the end"}
	}
	end := min(size, offset+1<<20)
	return LogSlice{Data: f.log[offset:end], Attempt: 1, Size: size, Complete: f.complete && end == size}, nil
}

func (f *fakeBackend) Changed(string) (<-chan struct{}, func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.changed, func() {}
}

func (f *fakeBackend) Questions(context.Context, User) ([]protocol.QuestionView, error) {
	return []protocol.QuestionView{
		{Job: "j1", Question: "which <i>color</i>?", Choices: []string{"red", "blue"}, Requester: "alice"},
		{Job: "j2", Question: "ok?", Requester: "alice", Answer: &protocol.Answer{Text: "<b>yes</b>", By: "bob"}},
	}, nil
}

func (f *fakeBackend) Projects(context.Context, User) ([]apitypes.ProjectView, error) {
	return []apitypes.ProjectView{{Name: "demo", Owner: "alice", Hosted: true}}, nil
}

func (f *fakeBackend) Members(context.Context, User, string) (apitypes.MemberList, error) {
	return apitypes.MemberList{Project: "demo", Owner: "alice", Members: []string{"alice", "<b>bob</b>"}}, nil
}

func (f *fakeBackend) Act(_ context.Context, _ User, id, action string) error {
	return f.act("%s %s", action, id)
}

func (f *fakeBackend) Answer(context.Context, User, string, apitypes.AnswerRequest) error { return nil }

func (f *fakeBackend) Accounts(context.Context, User) (apitypes.AccountList, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return apitypes.AccountList{Accounts: append([]apitypes.AccountView(nil), f.order...)}, nil
}

// MoveAccount moves one of alice's accounts as the hub's store does:
// to the position, the others renumbered.
func (f *fakeBackend) MoveAccount(_ context.Context, _ User, req apitypes.MoveAccountRequest) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acts = append(f.acts, fmt.Sprintf("move %s/%s %d", req.Runner, req.ID, req.Position))
	var mine []apitypes.AccountView
	var moved *apitypes.AccountView
	for _, a := range f.order[:3] {
		if a.Runner == req.Runner && a.ID == req.ID {
			moved = &a
			continue
		}
		mine = append(mine, a)
	}
	if moved == nil {
		return &Error{Status: http.StatusNotFound, Msg: "no such account"}
	}
	at := min(max(req.Position, 1), len(mine)+1) - 1
	mine = append(mine[:at], append([]apitypes.AccountView{*moved}, mine[at:]...)...)
	for i := range mine {
		mine[i].Position = i + 1
	}
	copy(f.order, mine)
	return nil
}

func (f *fakeBackend) act(format string, args ...any) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.acts = append(f.acts, fmt.Sprintf(format, args...))
	return nil
}

func (f *fakeBackend) RevokeRunner(_ context.Context, _ User, name string) error {
	return f.act("revoke %s", name)
}

func (f *fakeBackend) ShareRunner(_ context.Context, _ User, name string, req apitypes.ShareRequest, share bool) error {
	return f.act("share %s %v %+v", name, share, req)
}

func (f *fakeBackend) ShareAccount(_ context.Context, _ User, req apitypes.AccountShareRequest, share bool) error {
	return f.act("share account %v %+v", share, req)
}

func (f *fakeBackend) ChangeMember(_ context.Context, _ User, project, user string, add bool) error {
	return f.act("member %s %s %v", project, user, add)
}

func (f *fakeBackend) ApproveRunner(context.Context, User, apitypes.ApproveRequest) (apitypes.ApproveResponse, error) {
	return apitypes.ApproveResponse{}, nil
}

func (f *fakeBackend) actions() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]string(nil), f.acts...)
}

// serve starts the pages on a test server.
func serve(t *testing.T, f *fakeBackend, cfg Config) *httptest.Server {
	t.Helper()
	cfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	s, err := New(f, cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	s.Routes(mux)
	srv := httptest.NewServer(mux)
	t.Cleanup(func() { srv.CloseClientConnections(); srv.Close() })
	return srv
}

// postSignin posts the sign-in form, following no redirect.
func postSignin(t *testing.T, srv *httptest.Server, form url.Values) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", srv.URL+"/signin", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Origin", srv.URL)
	resp, err := (&http.Transport{}).RoundTrip(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// signIn returns a session cookie header for alice.
func signIn(t *testing.T, srv *httptest.Server) string {
	t.Helper()
	resp := postSignin(t, srv, url.Values{"token": {aliceToken}})
	for _, c := range resp.Cookies() {
		if c.Name == sessionCookie {
			return c.Name + "=" + c.Value
		}
	}
	t.Fatalf("no session: %d", resp.StatusCode)
	return ""
}

// sseEvent is one server-sent event.
type sseEvent struct{ id, kind, data string }

// readEvents reads events (and comments, as kind ":") until n are read.
func readEvents(t *testing.T, r *bufio.Reader, n int) []sseEvent {
	t.Helper()
	var out []sseEvent
	var ev sseEvent
	for len(out) < n {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("read the stream: %v (after %+v)", err, out)
		}
		line = strings.TrimSuffix(line, "\n")
		switch {
		case line == "":
			if ev.kind != "" {
				out = append(out, ev)
			}
			ev = sseEvent{}
		case strings.HasPrefix(line, ":"):
			out = append(out, sseEvent{kind: ":", data: line})
		case strings.HasPrefix(line, "id: "):
			ev.id = line[4:]
		case strings.HasPrefix(line, "event: "):
			ev.kind = line[7:]
		case strings.HasPrefix(line, "data: "):
			if ev.data != "" {
				ev.data += "\n"
			}
			ev.data += line[6:]
		}
	}
	return out
}

func openStream(t *testing.T, ctx context.Context, srv *httptest.Server, cookie, path, lastID string) (*http.Response, *bufio.Reader) {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+path, nil)
	req.Header.Set("Cookie", cookie)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp, bufio.NewReader(resp.Body)
}

// streamFixture is the fake with log written, its pages, alice's session
// cookie and a context for streams that ends with the test.
func streamFixture(t *testing.T, log string, keepAlive time.Duration) (*fakeBackend, *httptest.Server, string, context.Context) {
	t.Helper()
	f := newFake()
	f.appendLog(log, false)
	srv := serve(t, f, Config{KeepAlive: keepAlive})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	return f, srv, signIn(t, srv), ctx
}

// The live log sends whole lines with their end offset as id, resumes from
// Last-Event-ID exactly, keeps the connection alive, and ends.
func TestLiveLogResumesExactly(t *testing.T) {
	f, srv, cookie, ctx := streamFixture(t, "one\ntwo\nthr", 20*time.Millisecond)
	ctx, cancel := context.WithCancel(ctx) // the first stream's connection drops

	resp, r := openStream(t, ctx, srv, cookie, "/jobs/j1/log/live?attempt=1&from=0", "")
	for k, v := range map[string]string{"Content-Type": "text/event-stream", "X-Accel-Buffering": "no", "Cache-Control": "no-store"} {
		if got := resp.Header.Get(k); got != v {
			t.Errorf("%s = %q, want %q", k, got, v)
		}
	}
	evs := readEvents(t, r, 1)
	if evs[0].kind != "log" || evs[0].id != "8" || !strings.Contains(evs[0].data, `data-o="4">two</div>`) || strings.Contains(evs[0].data, "thr") {
		t.Fatalf("first event: %+v", evs[0])
	}
	if evs := readEvents(t, r, 1); evs[0].kind != ":" || evs[0].data != ": keep-alive" {
		t.Fatalf("a quiet stream: %+v", evs)
	}
	f.appendLog("ee\nfour\n", false)
	for {
		ev := readEvents(t, r, 1)[0]
		if ev.kind == ":" {
			continue
		}
		if ev.id != "19" || !strings.Contains(ev.data, `data-o="8">three</div>`) || !strings.Contains(ev.data, `data-o="14">four</div>`) {
			t.Fatalf("second event: %+v", ev)
		}
		break
	}

	// A reconnect with Last-Event-ID gets exactly what followed it.
	cancel()
	f.appendLog("<script>alert(1)</script>\n\x1b[1;31mred\x1b[0m tail", true)
	_, r2 := openStream(t, context.Background(), srv, cookie, "/jobs/j1/log/live?attempt=1&from=0", "14")
	evs = readEvents(t, r2, 2)
	want := `<div class="l" data-o="14">four</div>` +
		`<div class="l" data-o="19">&lt;script&gt;alert(1)&lt;/script&gt;</div>` +
		`<div class="l" data-o="45"><span class="b f1">red</span> tail</div>`
	if evs[0].kind != "log" || evs[0].data != want || evs[0].id != fmt.Sprint(len(f.log)) {
		t.Fatalf("resumed event: %+v\nwant %s", evs[0], want)
	}
	if evs[1].kind != "end" {
		t.Fatalf("no end: %+v", evs[1])
	}
}

// A browser, in a real headless Chromium: see ../e2e/web_test.go and
// browser_test.go.

// Every page renders, escaping what users and agents wrote.
func TestPagesRender(t *testing.T) {
	f := newFake()
	f.appendLog("hello\n", false)
	srv := serve(t, f, Config{})
	cookie := signIn(t, srv)
	for path, want := range map[string]string{
		"/runners":            "box-&lt;b&gt;1&lt;/b&gt;",
		"/runners?":           "not ready: disk &lt;b&gt;full&lt;/b&gt;",
		"/runners?#":          `<span class="badge s-waiting">draining</span>`,
		"/jobs":               `href="/jobs/j1"`,
		"/jobs?requester=bob": "No jobs",
		"/jobs/j1":            "&lt;img src=x onerror=alert(1)&gt;",
		"/jobs/j1?usage":      "1200 in / 340 out<br><small>cache 5 read / 0 written</small><br><strong>$0.0123</strong>",
		"/jobs/j1?denials":    "refused &lt;b&gt;evil&lt;/b&gt;:443 (agent, 2&times;): <code>drover projects network web --agent x</code>",
		"/questions":          `value="2" class="choice">2) blue</button>`,
		"/signin":             "You are signed in as",
		"/approve?name=r1&key=" + strings.Repeat("ab", 32): "You approve as",
		"/projects":              "<code>&lt;b&gt;bob&lt;/b&gt;</code>",
		"/jobs/j1/log?attempt=1": "hello\n",
	} {
		code, b := get(t, srv, cookie, path)
		if code != 200 || !strings.Contains(b, want) {
			t.Errorf("GET %s: %d, want %q in\n%s", path, code, want, b)
		}
		if strings.Contains(b, "<b>") || strings.Contains(b, "<img") || strings.Contains(b, "<i>") {
			t.Errorf("GET %s: unescaped text", path)
		}
	}
	// The requester is offered to approve bob's pending answer.
	if _, b := get(t, srv, cookie, "/questions"); !strings.Contains(b, `action="/jobs/j2/approve"`) || !strings.Contains(b, "&lt;b&gt;yes&lt;/b&gt;") {
		t.Errorf("the pending answer:\n%s", b)
	}
	if code, _ := get(t, srv, cookie, "/no/such/page"); code != 404 {
		t.Errorf("an unknown page: %d", code)
	}
}

// get is a GET with the session cookie: its status and body.
func get(t *testing.T, srv *httptest.Server, cookie, path string) (int, string) {
	t.Helper()
	req, _ := http.NewRequest("GET", srv.URL+path, nil)
	req.Header.Set("Cookie", cookie)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// A search opens the log at the line of each match in turn, however far
// back, and says when there is none.
func TestLogSearch(t *testing.T) {
	f := newFake()
	var sb strings.Builder
	for i := 0; sb.Len() < 3<<20; i++ {
		fmt.Fprintf(&sb, "line %07d\n", i)
		if i == 10 || i == 200000 {
			sb.WriteString("the <needle> here\n")
		}
	}
	f.appendLog(sb.String(), false)
	srv := serve(t, f, Config{})
	cookie := signIn(t, srv)
	_, b := get(t, srv, cookie, "/jobs/j1?attempt=1&q="+url.QueryEscape("<needle>"))
	first := strings.Index(sb.String(), "the <needle>")
	if !strings.Contains(b, fmt.Sprintf(`<div class="l" data-o="%d">the &lt;needle&gt; here</div>`, first)) || !strings.Contains(b, `data-complete="1"`) {
		t.Fatalf("first match not shown:\n%.3000s", b)
	}
	m := regexp.MustCompile(`id="nexthit" href="([^"]+)"`).FindStringSubmatch(b)
	if m == nil {
		t.Fatalf("no next link:\n%.3000s", b)
	}
	_, b = get(t, srv, cookie, strings.ReplaceAll(m[1], "&amp;", "&"))
	second := strings.LastIndex(sb.String(), "the <needle>")
	if !strings.Contains(b, fmt.Sprintf(`data-o="%d">the &lt;needle&gt; here`, second)) {
		t.Fatalf("second match not shown (at %d)", second)
	}
	m = regexp.MustCompile(`id="nexthit" href="([^"]+)"`).FindStringSubmatch(b)
	if _, b = get(t, srv, cookie, strings.ReplaceAll(m[1], "&amp;", "&")); !strings.Contains(b, `id="nohit"`) {
		t.Fatal("a third match was found")
	}
}

// A stream ends soon after its session, or its user's access to the job:
// signed out, or no longer allowed, it says why and stops.
func TestLiveStreamEndsWithTheSession(t *testing.T) {
	for _, tt := range []struct {
		name string
		end  func(f *fakeBackend)
		why  string
	}{
		{"signed out", func(f *fakeBackend) { clear(f.sessions) }, "session"},
		{"access lost", func(f *fakeBackend) { f.hidden = true }, "no such job"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			f := newFake()
			f.appendLog("one\n", false)
			srv := serve(t, f, Config{KeepAlive: 20 * time.Millisecond})
			cookie := signIn(t, srv)
			_, r := openStream(t, context.Background(), srv, cookie, "/jobs/j1/log/live?attempt=1", "")
			if ev := readEvents(t, r, 1)[0]; ev.kind != "log" {
				t.Fatalf("first event: %+v", ev)
			}
			f.mu.Lock()
			tt.end(f)
			f.mu.Unlock()
			for {
				ev := readEvents(t, r, 1)[0]
				if ev.kind == ":" {
					continue
				}
				if ev.kind != "failure" || !strings.Contains(ev.data, tt.why) {
					t.Fatalf("after the end: %+v", ev)
				}
				break
			}
			if _, err := io.ReadAll(r); err != nil { // returns once the hub ends the stream
				t.Fatalf("the stream did not end cleanly: %v", err)
			}
		})
	}
}

// A result's diff is text: escaped, its lines classed, control characters
// shown as symbols, and a long one cut to a bound with a note, whole lines
// only; the raw diff is the patch as it is.
func TestDiffView(t *testing.T) {
	f := newFake()
	f.diff = []byte("diff --git a/x.html b/x.html\n--- a/x.html\n+++ b/x.html\n@@ -1 +1 @@\n-<b>old</b>\n+<script>alert(1)</script>\x1b[31m\n context\n")
	srv := serve(t, f, Config{})
	cookie := signIn(t, srv)
	_, b := get(t, srv, cookie, "/jobs/j1")
	for _, want := range []string{
		`<div class="dh">diff --git a/x.html b/x.html</div><div class="dh">--- a/x.html</div><div class="dh">+++ b/x.html</div><div class="dk">@@ -1 +1 @@</div>`,
		`<div class="dd">-&lt;b&gt;old&lt;/b&gt;</div>`,
		`<div class="da">+&lt;script&gt;alert(1)&lt;/script&gt;␛[31m</div>`,
		`<div class="dc"> context</div>`, "1 file changed", `href="/jobs/j1/diff"`, "drover fetch j1",
	} {
		if !strings.Contains(b, want) {
			t.Errorf("job page lacks %q:\n%s", want, b)
		}
	}
	if strings.Contains(b, "<script>alert") || strings.Contains(b, "diffcut") {
		t.Fatalf("unescaped or cut:\n%s", b)
	}
	if code, raw := get(t, srv, cookie, "/jobs/j1/diff"); code != 200 || raw != string(f.diff) {
		t.Fatalf("raw diff: %d %q", code, raw)
	}

	var big strings.Builder
	big.WriteString("diff --git a/big b/big\n@@ -0,0 +1,100000 @@\n")
	for i := 0; big.Len() < 3*diffBytes; i++ {
		fmt.Fprintf(&big, "+line %d of a change far too long for one page\n", i)
	}
	f.diff = []byte(big.String())
	_, b = get(t, srv, cookie, "/jobs/j1")
	if !strings.Contains(b, `id="diffcut"`) || len(b) > 2*diffBytes {
		t.Fatalf("a long diff: %d bytes, cut note %v", len(b), strings.Contains(b, "diffcut"))
	}
	if i := strings.LastIndex(b, `<div class="da">`); !strings.HasPrefix(b[i:], `<div class="da">+line `) || !strings.Contains(b[i:i+100], " one page</div>") {
		t.Fatalf("the diff ends on a half line: %q", b[i:i+100])
	}
}

// The job page shows where the job was published, linking only to an
// http(s) URL and escaping what the forge said.
func TestJobPagePublication(t *testing.T) {
	pushed := strings.Repeat("c", 40)
	for _, tc := range []struct {
		name      string
		pub       *apitypes.PublicationView
		want      []string
		wantHref  bool
		forbidden []string
	}{
		{name: "none", forbidden: []string{`id="publication"`}},
		{name: "done", wantHref: true, pub: &apitypes.PublicationView{Job: "j1", Forge: "gh", Repo: "acme/web", Mode: "pr", Branch: "drover/j1", Base: "main",
			Pushed: pushed, PR: 17, URL: "https://github.com/acme/web/pull/17", State: "done"},
			want: []string{`<span class="badge s-done">done</span> <a href="https://github.com/acme/web/pull/17">#17</a> <code>drover/j1</code> &rarr; <code>main</code> at <code>cccccccccccc</code></dd>`}},
		{name: "branch only", wantHref: true, pub: &apitypes.PublicationView{Mode: "branch", Branch: "fix/<b>x</b>", URL: "http://forge.example/acme/web/src/branch/fix", State: "pending"},
			want: []string{`<span class="badge s-pending">pending</span> <a href="http://forge.example/acme/web/src/branch/fix">http://forge.example/acme/web/src/branch/fix</a> <code>fix/&lt;b&gt;x&lt;/b&gt;</code></dd>`}},
		{name: "failed, hostile", pub: &apitypes.PublicationView{Mode: "pr", Branch: "drover/j1", Base: "main", PR: 3, URL: "javascript:alert(1)", State: "failed",
			Code: "remote_moved", Reason: `<script>alert(1)</script> "moved"`},
			want: []string{`<span class="badge s-failed">failed</span> #3 <code>javascript:alert(1)</code>`,
				`<br><small class="reason">remote_moved: &lt;script&gt;alert(1)&lt;/script&gt; &#34;moved&#34;</small></dd>`},
			forbidden: []string{"<script>alert", "ZgotmplZ"}},
		{name: "no host", pub: &apitypes.PublicationView{URL: "https:///pull/1", PR: 1, State: "done"},
			want: []string{`#1 <code>https:///pull/1</code>`}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFake()
			f.pub = tc.pub
			srv := serve(t, f, Config{})
			_, b := get(t, srv, signIn(t, srv), "/jobs/j1")
			for _, w := range tc.want {
				if !strings.Contains(b, w) {
					t.Errorf("job page lacks %q:\n%s", w, b)
				}
			}
			for _, w := range tc.forbidden {
				if strings.Contains(b, w) {
					t.Errorf("job page has %q:\n%s", w, b)
				}
			}
			dd := regexp.MustCompile(`<dd id="publication">.*?</dd>`).FindString(b)
			if (dd != "") != (tc.pub != nil) || strings.Contains(dd, "href") != tc.wantHref {
				t.Errorf("publication %q: a link %v, want %v", dd, !tc.wantHref, tc.wantHref)
			}
		})
	}
}

// Many followers of one live log share one reader of it: each chunk is
// read from the store about once, not once per follower; every follower
// still gets every line, and one that joins late (behind the others)
// catches up from the store and then from the shared tail.
func TestLiveLogFollowersShareOneReader(t *testing.T) {
	f, srv, cookie, ctx := streamFixture(t, "start\n", time.Hour)
	const followers, chunks = 20, 10
	var rs []*bufio.Reader
	for range followers {
		_, r := openStream(t, ctx, srv, cookie, "/jobs/j1/log/live?attempt=1&from=0", "")
		if ev := readEvents(t, r, 1)[0]; ev.id != "6" {
			t.Fatalf("first event: %+v", ev)
		}
		rs = append(rs, r)
	}
	f.mu.Lock()
	before := f.reads
	f.mu.Unlock()
	off := 6
	for i := range chunks {
		line := fmt.Sprintf("chunk %d\n", i)
		f.appendLog(line, false)
		off += len(line)
		for _, r := range rs {
			if ev := readEvents(t, r, 1)[0]; ev.id != strconv.Itoa(off) || !strings.Contains(ev.data, ">"+strings.TrimSpace(line)+"</div>") {
				t.Fatalf("chunk %d: %+v", i, ev)
			}
		}
	}
	f.mu.Lock()
	reads := f.reads - before
	f.mu.Unlock()
	// One reader: a read or two per chunk. A reader per follower would
	// be at least followers*chunks.
	if reads > 3*chunks {
		t.Fatalf("%d followers, %d chunks: %d store reads", followers, chunks, reads)
	}
	_, late := openStream(t, ctx, srv, cookie, "/jobs/j1/log/live?attempt=1&from=0", "")
	if ev := readEvents(t, late, 1)[0]; ev.id != strconv.Itoa(off) || !strings.Contains(ev.data, ">start</div>") {
		t.Fatalf("a late follower's first event: %+v", ev)
	}
	f.appendLog("last\n", true)
	for _, r := range append(rs, late) {
		evs := readEvents(t, r, 2)
		if evs[0].kind != "log" || !strings.Contains(evs[0].data, ">last</div>") || evs[1].kind != "end" {
			t.Fatalf("the end: %+v", evs)
		}
	}
}

// The runners stream sends the table at once to a page that has an older
// one (or none), and again only when it changed; its id is the table's
// version, so a page that reconnects gets nothing it has.
func TestLiveRunnersSendsTheTableWhenItChanges(t *testing.T) {
	f, srv, cookie, ctx := streamFixture(t, "", 20*time.Millisecond)
	// quiet: the next events on r are keep-alives only.
	quiet := func(what string, r *bufio.Reader) {
		t.Helper()
		for _, ev := range readEvents(t, r, 3) {
			if ev.kind != ":" {
				t.Fatalf("%s: sent %+v", what, ev)
			}
		}
	}
	_, r := openStream(t, ctx, srv, cookie, "/runners/live", "")
	ev := readEvents(t, r, 1)[0]
	if ev.kind != "runners" || ev.id == "" || !strings.Contains(ev.data, `id="runner-box-&lt;b&gt;1&lt;/b&gt;"`) || strings.Contains(ev.data, "<b>") {
		t.Fatalf("first event: %+v", ev)
	}
	f.mu.Lock()
	f.order = f.order[:0] // not in the table
	f.mu.Unlock()
	f.appendLog("a change that leaves the table as it was\n", false)
	quiet("an unchanged table", r)

	_, body := get(t, srv, cookie, "/runners")
	if !strings.Contains(body, `data-version="`+ev.id+`"`) {
		t.Fatalf("the page's table version is not %s:\n%s", ev.id, body)
	}
	for _, c := range []struct{ query, lastID string }{{"?version=" + ev.id, ""}, {"?version=old", ev.id}} {
		_, r := openStream(t, ctx, srv, cookie, "/runners/live"+c.query, c.lastID)
		quiet(fmt.Sprintf("a page with the table (%+v)", c), r)
	}
	_, r2 := openStream(t, ctx, srv, cookie, "/runners/live?version=old", "")
	if ev2 := readEvents(t, r2, 1)[0]; ev2.data != ev.data || ev2.id != ev.id {
		t.Fatalf("a page with an older table gets: %+v", ev2)
	}
}

// The job page's live part comes with the events stream when the page's
// version of it is not the job's now (after a reconnect, or a change), and
// not when it is.
func TestLiveJobPartFollowsTheJob(t *testing.T) {
	f, srv, cookie, ctx := streamFixture(t, "one\n", 20*time.Millisecond)
	_, body := get(t, srv, cookie, "/jobs/j1")
	m := regexp.MustCompile(`id="job-live" data-version="([0-9a-f]+)"`).FindStringSubmatch(body)
	if m == nil {
		t.Fatalf("no live part on the page:\n%s", body)
	}
	kinds := func(r *bufio.Reader) string {
		var ks []string
		for _, ev := range readEvents(t, r, 4) {
			ks = append(ks, ev.kind)
		}
		return strings.Join(ks, " ")
	}
	_, r := openStream(t, ctx, srv, cookie, "/jobs/j1/events/live?after=1&state=running&version="+m[1], "")
	if got := kinds(r); got != ": : : :" {
		t.Fatalf("a page with the job as it is gets %q", got)
	}
	_, r = openStream(t, ctx, srv, cookie, "/jobs/j1/events/live?after=1&state=running&version=old", "")
	evs := readEvents(t, r, 1)
	if evs[0].kind != "job" || !strings.Contains(evs[0].data, `id="cancel"`) || !strings.Contains(evs[0].data, `<table id="attempts">`) {
		t.Fatalf("a page with an older part gets %+v", evs)
	}
	f.appendLog("done\n", true) // the fake's job completes
	for {
		ev := readEvents(t, r, 1)[0]
		if ev.kind == "job" {
			if !strings.Contains(ev.data, "completed") || strings.Contains(ev.data, `id="cancel"`) {
				t.Fatalf("the completed job's part: %s", ev.data)
			}
			break
		}
	}
}

// TestSignInReturnsOnlyToAPage: after signing in the browser goes back to
// the page it came from, and to the jobs page for anything a browser could
// read as another host (it drops tabs and newlines, and reads \ as /) or
// that is not one of the dashboard's pages.
func TestSignInReturnsOnlyToAPage(t *testing.T) {
	srv := serve(t, newFake(), Config{})
	for _, tt := range []struct{ next, want string }{
		{"/jobs/j1?attempt=2&q=a%20b", "/jobs/j1?attempt=2&q=a%20b"},
		{"/questions", "/questions"},
		{"/runners", "/runners"},
		{"/projects", "/projects"},
		{"//x", "/jobs"},
		{"/\\x", "/jobs"},
		{"/\t/x", "/jobs"},
		{"/\t/evil.example/", "/jobs"},
		{"%2f%2fx", "/jobs"},
		{"https://x", "/jobs"},
		{"/ /x", "/jobs"},
		{"/\r\n/x", "/jobs"},
		{"/jobs\r\nSet-Cookie: a=b", "/jobs"},
		{"/\u00a0/x", "/jobs"},
		{"/jobs/../x", "/jobs"},
		{"/nowhere", "/jobs"},
		{"/static/app.js", "/jobs"},
		{"", "/jobs"},
	} {
		resp := postSignin(t, srv, url.Values{"token": {aliceToken}, "next": {tt.next}})
		if got := resp.Header.Get("Location"); resp.StatusCode != http.StatusSeeOther || got != tt.want {
			t.Errorf("next=%q: %d to %q; want %q", tt.next, resp.StatusCode, got, tt.want)
		}
	}
}

// TestForgeSignIn: the sign-in page offers the forges next to the token
// paste; a sign-in a forge's redirect ends (crossSite) makes the same
// session cookie and goes on from a page of the hub's own.
func TestForgeSignIn(t *testing.T) {
	f := newFake()
	cfg := Config{Logger: slog.New(slog.NewTextHandler(io.Discard, nil)),
		ForgeButtons: func(_ context.Context, next string) []ForgeButton {
			return []ForgeButton{{Name: "gt", URL: "/auth/forge/gt?next=" + url.QueryEscape(next)},
				{Name: "<b>corp</b>", URL: "/auth/oidc/corp?next=" + url.QueryEscape(next)}}
		}}
	s, err := New(f, cfg)
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	s.Routes(mux)
	mux.HandleFunc("GET /test/forge-done", func(w http.ResponseWriter, r *http.Request) {
		s.SignIn(w, r, alice, Next(r.URL.Query().Get("next")), true)
	})
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)

	resp, err := http.Get(srv.URL + "/signin?next=/runners")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	for _, want := range []string{`href="/auth/forge/gt?next=%2Frunners"`, "Sign in with gt", `id="token"`,
		`href="/auth/oidc/corp?next=%2Frunners"`, "Sign in with &lt;b&gt;corp&lt;/b&gt;"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the sign-in page has no %q:\n%s", want, b)
		}
	}
	if strings.Contains(string(b), "<b>corp") {
		t.Error("a provider's name is on the sign-in page unescaped")
	}

	for next, want := range map[string]string{"/runners": "/runners", "//evil.example": "/jobs"} {
		resp, err = http.Get(srv.URL + "/test/forge-done?next=" + url.QueryEscape(next))
		if err != nil {
			t.Fatal(err)
		}
		b, _ = io.ReadAll(resp.Body)
		resp.Body.Close()
		var sess *http.Cookie
		for _, c := range resp.Cookies() {
			if c.Name == sessionCookie {
				sess = c
			}
		}
		if resp.StatusCode != http.StatusOK || sess == nil || !sess.HttpOnly || sess.SameSite != http.SameSiteStrictMode ||
			!strings.Contains(string(b), `content="0;url=`+want+`"`) || !strings.Contains(string(b), "alice") {
			t.Errorf("next %s: %d, cookie %+v, page:\n%s", next, resp.StatusCode, sess, b)
		}
	}
}
