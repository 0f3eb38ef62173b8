package hub

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/auth"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/rules"
)

// rawCall sends body as it is (nil: no body) and returns the status and
// the error the hub answered, if any.
func (th *testHub) rawCall(token, method, path string, body []byte) (int, rules.Error) {
	th.t.Helper()
	var rd io.Reader
	if body != nil {
		rd = strings.NewReader(string(body))
	}
	code, data := th.send(token, method, apitypes.APIPrefix+path, rd)
	var eb apitypes.ErrorBody
	if code >= 300 {
		_ = json.Unmarshal(data, &eb)
	}
	return code, eb.Error
}

// dbDump is every row of every table of the hub's database: what "changes
// no state" compares.
func (th *testHub) dbDump() string {
	th.t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(th.cfg.DataDir, "drover.db")+"?_pragma=query_only(1)")
	if err != nil {
		th.t.Fatal(err)
	}
	defer db.Close()
	var tables []string
	rows, err := db.Query(`SELECT name FROM sqlite_master WHERE type = 'table' ORDER BY name`)
	if err != nil {
		th.t.Fatal(err)
	}
	for rows.Next() {
		var n string
		if err := rows.Scan(&n); err != nil {
			th.t.Fatal(err)
		}
		tables = append(tables, n)
	}
	rows.Close()
	var b strings.Builder
	for _, tbl := range tables {
		if tbl == "hubs" || tbl == "leader" {
			continue // heartbeats: they change with time, not with requests
		}
		rows, err := db.Query(`SELECT * FROM "` + tbl + `" ORDER BY rowid`)
		if err != nil {
			rows, err = db.Query(`SELECT * FROM "` + tbl + `"`) // WITHOUT ROWID
		}
		if err != nil {
			th.t.Fatalf("dump %s: %v", tbl, err)
		}
		cols, _ := rows.Columns()
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				th.t.Fatal(err)
			}
			fmt.Fprintf(&b, "%s %q\n", tbl, fmt.Sprint(vals...))
		}
		rows.Close()
	}
	return b.String()
}

// firstDiff shows the first line where two dumps differ.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := range max(len(al), len(bl)) {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d was %s, is %s", i+1, x, y)
		}
	}
	return "no difference"
}

// Every malformed body, plain-text field with a control character and
// out-of-range number is refused with 400 naming what is wrong, and
// changes nothing.
func TestBadInputIsRefusedAndChangesNothing(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	rtok := th.registerRunner("r1")
	sr, _ := th.dial(rtok, protocol.Hello{Slots: 2})
	waiting := th.submitTools("task")
	askAndFinish(t, sr, sr.offer(), "Pick one", []string{"a", "b"}, "")
	if v := th.job(waiting.ID); v.State != job.Waiting {
		t.Fatalf("job is %s, want waiting", v.State)
	}
	// Finished, so that no lease renewal writes while the cases run.
	done := th.submit("true")
	o := sr.offer()
	runToEnd(t, sr, o, "out\n", 0)
	if code, e := th.call(th.admin, "PUT", "/projects/lib", apitypes.MapProjectRequest{Remote: "https://git.example/lib.git"}, nil); code != http.StatusOK {
		t.Fatalf("map: %d %+v", code, e)
	}
	th.addUser("bob")
	key := auth.Hash("k1")
	ref := fmt.Sprintf("job=%s&attempt=%s", o.Job, o.Attempt)

	const over = "9223372036854775808" // one past the largest int64
	tests := []struct {
		name   string
		token  string // "" is the admin
		method string
		path   string
		body   string
		status int
		want   string // in the message
	}{
		// JSON that encoding/json would take silently
		{"trailing value", "", "POST", "/jobs", `{"agent":"exec","args":["true"]} {"agent":"exec"}`, 400, "data after the JSON value"},
		{"trailing garbage", "", "POST", "/jobs", `{"agent":"exec","args":["true"]}x`, 400, "data after the JSON value"},
		{"duplicate key", "", "POST", "/jobs", `{"agent":"exec","args":["true"],"agent":"claude"}`, 400, `duplicate key "agent"`},
		{"duplicate nested key", "", "POST", "/jobs", `{"agent":"exec","args":["true"],"labels":{"gpu":"a","gpu":"b"}}`, 400, `duplicate key "gpu" in the object at $.labels`},
		{"duplicate escaped key", "", "POST", "/jobs", `{"agent":"exec","args":["true"],"\u0061gent":"exec"}`, 400, `duplicate key "agent"`},
		{"invalid UTF-8", "", "POST", "/jobs", "{\"agent\":\"exec\",\"args\":[\"true\xff\"]}", 400, "not valid UTF-8"},
		{"unknown field", "", "POST", "/jobs", `{"agent":"exec","args":["true"],"labelz":{"a":"b"}}`, 400, `unknown field "labelz"`},
		{"keys differing in case", "", "POST", "/jobs", `{"agent":"exec","args":["true"],"Agent":"claude"}`, 400, `duplicate key "Agent" in the object at $: it differs from "agent" only in case`},
		{"nested keys differing in case", "", "POST", "/jobs", `{"agent":"exec","args":["true"],"labels":{"gpu":"a","GPU":"b"}}`, 400, `duplicate key "GPU" in the object at $.labels`},
		{"nesting past the limit", "", "POST", "/jobs", `{"agent":"exec","args":["true"],"labels":` + strings.Repeat(`{"a":`, 64) + "1" + strings.Repeat("}", 65), 400, "nested deeper than 64 levels"},
		{"empty body", "", "POST", "/jobs", ``, 400, "no JSON value"},
		{"malformed", "", "POST", "/jobs", `{"agent":`, 400, "request body"},
		// plain-text fields
		{"label value with ESC", "", "POST", "/jobs", `{"agent":"exec","args":["true"],"labels":{"gpu":"a\u001b[31m"}}`, 400, "label gpu"},
		{"label value with a C1 CSI", "", "POST", "/jobs", `{"agent":"exec","args":["true"],"labels":{"gpu":"\u009b31m"}}`, 400, "label gpu"},
		{"label value with a tab", "", "POST", "/jobs", `{"agent":"exec","args":["true"],"labels":{"gpu":"a\tb"}}`, 400, "label gpu"},
		{"label key with NUL", "", "POST", "/jobs", `{"agent":"exec","args":["true"],"labels":{"g\u0000":"a"}}`, 400, "label key"},
		{"idempotency key with a newline", "", "POST", "/jobs", `{"agent":"exec","args":["true"],"key":"k\n1"}`, 400, "idempotency key"},
		{"idempotency key with DEL", "", "POST", "/jobs", `{"agent":"exec","args":["true"],"key":"k\u007f"}`, 400, "idempotency key"},
		{"account with BEL", "", "POST", "/jobs", `{"agent":"claude","args":["hi"],"account":"a\u0007"}`, 400, "account"},
		{"argument with a C1 CSI", "", "POST", "/jobs", `{"agent":"exec","args":["printf","\u009b31m"]}`, 400, "argument 2 has a control character (U+009B)"},
		{"argument with a C1 NEL", "", "POST", "/jobs", `{"agent":"exec","args":["echo","a\u0085b"]}`, 400, "argument 2"},
		{"argument with ESC", "", "POST", "/jobs", `{"agent":"exec","args":["printf","\u001b[1m"]}`, 400, "argument 2"},
		{"argument with NUL", "", "POST", "/jobs", `{"agent":"exec","args":["a\u0000"]}`, 400, "argument 1"},
		{"argument with a lone CR", "", "POST", "/jobs", `{"agent":"exec","args":["echo","a\rb"]}`, 400, "argument 2"},
		{"prompt with a C1 CSI", "", "POST", "/jobs", `{"agent":"claude","args":["fix","it\u009b2J"]}`, 400, "argument 2"},
		{"answer with ESC", "", "POST", "/jobs/" + waiting.ID + "/answer", `{"text":"yes\u001b[2J"}`, 400, "answer"},
		{"answer with a lone CR", "", "POST", "/jobs/" + waiting.ID + "/answer", `{"text":"yes\rno"}`, 400, "answer"},
		{"answer with a C1 CSI", "", "POST", "/jobs/" + waiting.ID + "/answer", `{"text":"\u009b31mred"}`, 400, "answer"},
		{"answer with NUL", "", "POST", "/jobs/" + waiting.ID + "/answer", `{"text":"a\u0000"}`, 400, "answer"},
		{"answer not UTF-8", "", "POST", "/jobs/" + waiting.ID + "/answer", "{\"text\":\"\xc3\"}", 400, "not valid UTF-8"},
		{"answer twice in one body", "", "POST", "/jobs/" + waiting.ID + "/answer", `{"text":"a","text":"b"}`, 400, `duplicate key "text"`},
		{"answer with an unknown field", "", "POST", "/jobs/" + waiting.ID + "/answer", `{"text":"a","choise":1}`, 400, `unknown field "choise"`},
		// mapping a project
		{"map with null", "", "PUT", "/projects/lib", `null`, 400, `"remote"`},
		{"map with {}", "", "PUT", "/projects/lib", `{}`, 400, `"remote"`},
		{"map with a null remote", "", "PUT", "/projects/lib", `{"remote":null}`, 400, `"remote"`},
		{"map with two remotes", "", "PUT", "/projects/lib", `{"remote":"https://x/a.git","remote":""}`, 400, `duplicate key "remote"`},
		{"map with trailing data", "", "PUT", "/projects/lib", `{"remote":""} {}`, 400, "data after the JSON value"},
		{"map with an unknown field", "", "PUT", "/projects/lib", `{"remote":"","hosted":true}`, 400, `unknown field "hosted"`},
		{"remote with an OSC", "", "PUT", "/projects/lib", `{"remote":"https://x/\u001b]8;;evil"}`, 400, "remote URL"},
		{"remote with a C1 NEL", "", "PUT", "/projects/lib", `{"remote":"https://x/\u0085"}`, 400, "remote URL"},
		// names and the other bodies
		{"user named twice", "", "POST", "/users", `{"name":"eve","name":"mallory"}`, 400, `duplicate key "name"`},
		{"user name with ESC", "", "POST", "/users", `{"name":"eve\u001b"}`, 400, "user name"},
		{"user with trailing data", "", "POST", "/users", `{"name":"eve"}{"name":"x"}`, 400, "data after the JSON value"},
		{"approval with two keys", "", "POST", "/runners/approve", `{"name":"r9","key":"` + key + `","key":"` + auth.Hash("k2") + `"}`, 400, `duplicate key "key"`},
		{"runner name with a newline", "", "POST", "/runners/approve", `{"name":"r9\nr1","key":"` + key + `"}`, 400, "runner name"},
		{"move with two positions", "", "POST", "/accounts/move", `{"runner":"r1","id":"a","position":1,"position":2}`, 400, `duplicate key "position"`},
		// integer query parameters
		{"limit over int64", "", "GET", "/jobs?limit=" + over, "", 400, "limit"},
		{"limit 0", "", "GET", "/jobs?limit=0", "", 400, "limit"},
		{"limit over the cap", "", "GET", "/jobs?limit=1001", "", 400, "limit"},
		{"after over int64", "", "GET", "/jobs/" + done.ID + "/events?after=" + over, "", 400, "after"},
		{"negative after", "", "GET", "/jobs/" + done.ID + "/events?after=-1", "", 400, "after"},
		{"offset over int64", "", "GET", "/jobs/" + done.ID + "/log?offset=" + over, "", 400, "offset"},
		{"offset far past the log", "", "GET", "/jobs/" + done.ID + "/log?offset=9223372036854775807", "", 400, "offset"},
		{"attempt over int64", "", "GET", "/jobs/" + done.ID + "/log?attempt=99999999999999999999", "", 400, "attempt"},
		{"wait over int64", "", "GET", "/jobs/" + done.ID + "/log?wait=" + over, "", 400, "wait"},
		{"negative wait", "", "GET", "/jobs/" + done.ID + "/log?wait=-5", "", 400, "wait"},
		{"context epoch over int64", rtok, "GET", "/runner/context?" + ref + "&epoch=" + over, "", 400, "epoch"},
		{"context epoch 0", rtok, "GET", "/runner/context?" + ref + "&epoch=0", "", 400, "epoch"},
		{"context without an epoch", rtok, "GET", "/runner/context?" + ref, "", 400, "epoch"},
		{"publish epoch over int64", rtok, "POST", "/runner/publish?" + ref + "&epoch=" + over + "&commit=" + strings.Repeat("a", 40) + "&sha256=" + sum(nil), "x", 400, "epoch"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tok := tt.token
			if tok == "" {
				tok = th.admin
			}
			var body []byte
			if tt.method != "GET" {
				body = []byte(tt.body)
			}
			before := th.dbDump()
			code, e := th.rawCall(tok, tt.method, tt.path, body)
			if code != tt.status || e.Code != rules.ErrBadRequest || !strings.Contains(e.Message, tt.want) {
				t.Fatalf("got %d %+v, want %d bad_request with %q in the message", code, e, tt.status, tt.want)
			}
			if after := th.dbDump(); after != before {
				t.Fatalf("the refusal changed the database: %s", firstDiff(before, after))
			}
		})
	}

	// Job arguments are multiline plain text: tab, newline and CRLF go.
	var v apitypes.JobView
	if code, e := th.call(th.admin, "POST", "/jobs", apitypes.SubmitRequest{Agent: "exec", Args: []string{"printf", "a\tb\nc\r\n\u00a0é"}}, &v); code != http.StatusCreated {
		t.Fatalf("args with tab, newline and CRLF: %d %+v", code, e)
	}
	if got := th.job(v.ID).Args; len(got) != 2 || got[1] != "a\tb\nc\r\n\u00a0é" {
		t.Fatalf("args came back as %q", got)
	}
	// An explicit empty remote still makes a project hosted again.
	var pv apitypes.ProjectView
	if code, e := th.call(th.admin, "PUT", "/projects/lib", apitypes.MapProjectRequest{Remote: ""}, &pv); code != http.StatusOK || pv.Remote != "" {
		t.Fatalf("unmap with an empty remote: %d %+v %+v", code, e, pv)
	}
}

// A wait so large that it would overflow a Duration in nanoseconds holds
// the follow (up to the cap) instead of wrapping around to an empty answer.
func TestLogFollowWithAHugeWait(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	sr, _ := th.dial(th.registerRunner("r1"), protocol.Hello{})
	j := th.submit("true")
	o := sr.offer()
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	got := th.follow(th.srv.URL, j.ID, "9223372036854775807", func(status int, body, _ string) string { return fmt.Sprintf("%d %s", status, body) })
	th.waitFollowing(t, j.ID)
	select {
	case s := <-got:
		t.Fatalf("the follow answered before there was output: %q", s)
	case <-time.After(50 * time.Millisecond): // a wrapped wait answers at once; a right one still waits either way
	}
	wantOK(t, sr.request(protocol.TypeLog, protocol.Log{AttemptRef: o.AttemptRef, Data: []byte("hello")}))
	if s := <-got; s != "200 hello" {
		t.Fatalf("follow got %q", s)
	}
}

// watchedBody is a request body that counts the bytes a handler read.
type watchedBody struct {
	r    io.Reader
	read int
}

func (b *watchedBody) Read(p []byte) (int, error) {
	n, err := b.r.Read(p)
	b.read += n
	return n, err
}

func (b *watchedBody) Close() error { return nil }

// Register checks its caller before it reads the body: a 549 KB body of
// objects nested with 50-byte keys, sent with any bearer starting drv_g_,
// took the hub from 66 MB to 2.58 GB before the token was looked up
// (issue 24). A caller without a registration token the hub issued gets
// 401 with nothing read; one with such a token gets 400 at the nesting
// limit. Neither changes anything.
func TestRegisterChecksTheTokenBeforeReadingTheBody(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	rtok := th.registerRunner("r1")
	reg := th.launch(th.admin, apitypes.LaunchRequest{Target: "local", Count: 1, Slots: 1}).Registrations[0].Token
	key := `"` + strings.Repeat("k", 50) + `":`
	deep := strings.Repeat("{"+key, 10000) + "0" + strings.Repeat("}", 10000)
	tests := []struct {
		name   string
		bearer string // "" sends no Authorization
		status int
		code   string
		msg    string
		read   bool // whether the handler may read the body
	}{
		{"no bearer", "", 401, rules.ErrUnauthorized, "needs a fleet registration token", false},
		{"the bare prefix", auth.PrefixRegistration, 401, rules.ErrUnauthorized, "registration token not recognised", false},
		{"a registration token never issued", auth.NewToken(auth.PrefixRegistration), 401, rules.ErrUnauthorized, "registration token not recognised", false},
		{"a user token", th.admin, 401, rules.ErrUnauthorized, "needs a fleet registration token", false},
		{"a runner token", rtok, 401, rules.ErrUnauthorized, "needs a fleet registration token", false},
		{"an issued registration token", reg, 400, rules.ErrBadRequest, "nested deeper than 64 levels", true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := th.dbDump()
			body := &watchedBody{r: strings.NewReader(deep)}
			req := httptest.NewRequest("POST", apitypes.APIPrefix+"/runner/register", body)
			if tt.bearer != "" {
				req.Header.Set("Authorization", "Bearer "+tt.bearer)
			}
			rec := httptest.NewRecorder()
			th.h.Handler().ServeHTTP(rec, req)
			var eb apitypes.ErrorBody
			_ = json.Unmarshal(rec.Body.Bytes(), &eb)
			if rec.Code != tt.status || eb.Error.Code != tt.code || !strings.Contains(eb.Error.Message, tt.msg) {
				t.Fatalf("got %d %+v, want %d %s with %q", rec.Code, eb.Error, tt.status, tt.code, tt.msg)
			}
			if !tt.read && body.read > 0 {
				t.Fatalf("the hub read %d bytes of the body of a caller it refused", body.read)
			}
			if after := th.dbDump(); after != before {
				t.Fatalf("the refusal changed the database: %s", firstDiff(before, after))
			}
		})
	}
	if _, code, e := th.registerWith(reg, nil); code != http.StatusCreated {
		t.Fatalf("the token no longer registers after the refusals: %d %+v", code, e)
	}
}
