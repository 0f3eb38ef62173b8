package hub

import (
	"context"
	"errors"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"drover/internal/apitypes"
	"drover/internal/auth"
	"drover/internal/protocol"
	"drover/internal/rules"
)

func (th *testHub) approve(token string, req apitypes.ApproveRequest) (apitypes.ApproveResponse, int, rules.Error) {
	th.t.Helper()
	var v apitypes.ApproveResponse
	code, e := th.call(token, "POST", "/runners/approve", req, &v)
	return v, code, e
}

// loginName is what the hub tells a runner polling with tok: its name, or
// the HTTP status when it is not approved.
func (th *testHub) loginName(tok string) (string, int) {
	th.t.Helper()
	var v apitypes.RunnerView
	code, _ := th.call(tok, "GET", "/runner/login", nil, &v)
	return v.Name, code
}

func wantClosed(t *testing.T, sr *scriptRunner, code websocket.StatusCode) {
	t.Helper()
	for {
		_, err := sr.tryRead(10 * time.Second)
		if err == nil {
			continue // frames sent before the close
		}
		if websocket.CloseStatus(err) != code {
			t.Fatalf("connection ended with %v, want close %d", err, code)
		}
		return
	}
}

func dialStatus(th *testHub, tok string) int {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws, resp, err := websocket.Dial(ctx, "ws"+strings.TrimPrefix(th.srv.URL, "http")+apitypes.APIPrefix+"/runner/connect",
		&websocket.DialOptions{HTTPHeader: http.Header{"Authorization": {"Bearer " + tok}}})
	if err == nil {
		ws.CloseNow()
		return http.StatusSwitchingProtocols
	}
	if resp == nil {
		th.t.Fatalf("dial: %v", err)
	}
	return resp.StatusCode
}

// The hub decides a runner's name: a login approved under another name than
// the runner asked for is told that name, and the same key cannot later be
// approved under a third.
func TestApproveUnderAnotherName(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	tok := auth.NewToken(auth.PrefixRunner) // its runner asked for "gpu1"
	key := auth.Hash(tok)
	if _, code := th.loginName(tok); code != http.StatusUnauthorized {
		t.Fatalf("unapproved login answered %d, want 401", code)
	}
	if v, code, e := th.approve(th.admin, apitypes.ApproveRequest{Name: "gpu2", Key: key}); code != 200 || v.Name != "gpu2" {
		t.Fatalf("approve as gpu2: %d %+v %+v", code, v, e)
	}
	if name, code := th.loginName(tok); code != 200 || name != "gpu2" {
		t.Fatalf("the runner is told %q (%d), want gpu2", name, code)
	}
	_, w := th.dial(tok, protocol.Hello{})
	if w.RunnerName != "gpu2" {
		t.Fatalf("welcome names the runner %q, want gpu2", w.RunnerName)
	}
	_, code, e := th.approve(th.admin, apitypes.ApproveRequest{Name: "gpu1", Key: key, Replace: true})
	if code != http.StatusConflict || !strings.Contains(e.Message, `"gpu2"`) || !strings.Contains(e.Message, `"gpu1"`) {
		t.Fatalf("re-approving under another name: %d %+v, want 409 naming both names", code, e)
	}
	var l apitypes.RunnerList
	th.call(th.admin, "GET", "/runners", nil, &l)
	if len(l.Runners) != 1 || l.Runners[0].Name != "gpu2" {
		t.Fatalf("runners %+v, want only gpu2", l.Runners)
	}
}

func TestApproveOverAnExistingName(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	bob := th.addUser("bob")
	oldTok := auth.NewToken(auth.PrefixRunner)
	first, code, e := th.approve(th.admin, apitypes.ApproveRequest{Name: "box", Key: auth.Hash(oldTok)})
	if code != 200 || first.Replaced {
		t.Fatalf("first approval: %d %+v %+v", code, first, e)
	}
	old, _ := th.dial(oldTok, protocol.Hello{})
	newTok := auth.NewToken(auth.PrefixRunner)
	newKey := auth.Hash(newTok)

	refusals := []struct {
		name    string
		token   string
		req     apitypes.ApproveRequest
		status  int
		message []string
	}{
		{"same owner without replace", th.admin, apitypes.ApproveRequest{Name: "box", Key: newKey},
			409, []string{`"box" is taken`, "--replace", "revokes the old runner's token", "disconnects"}},
		{"another owner", bob, apitypes.ApproveRequest{Name: "box", Key: newKey},
			409, []string{"another user's runner"}},
		{"another owner with replace", bob, apitypes.ApproveRequest{Name: "box", Key: newKey, Replace: true},
			409, []string{"another user's runner"}},
		{"another owner re-approving the key", bob, apitypes.ApproveRequest{Name: "box", Key: auth.Hash(oldTok)},
			403, []string{"another user"}},
	}
	for _, tt := range refusals {
		t.Run(tt.name, func(t *testing.T) {
			_, code, e := th.approve(tt.token, tt.req)
			if code != tt.status {
				t.Fatalf("got %d %+v, want %d", code, e, tt.status)
			}
			for _, m := range tt.message {
				if !strings.Contains(e.Message, m) {
					t.Errorf("message %q lacks %q", e.Message, m)
				}
			}
			// Nothing changed: the old login works, the new one is unknown.
			if name, code := th.loginName(oldTok); code != 200 || name != "box" {
				t.Fatalf("old login after a refusal: %q %d", name, code)
			}
			if _, code := th.loginName(newTok); code != 401 {
				t.Fatalf("new login after a refusal: %d", code)
			}
		})
	}

	// The same key again needs no replace and changes nothing.
	for _, replace := range []bool{false, true} {
		v, code, e := th.approve(th.admin, apitypes.ApproveRequest{Name: "box", Key: auth.Hash(oldTok), Replace: replace})
		if code != 200 || v.ID != first.ID || v.Replaced {
			t.Fatalf("same key again (replace=%v): %d %+v %+v", replace, code, v, e)
		}
	}

	v, code, e := th.approve(th.admin, apitypes.ApproveRequest{Name: "box", Key: newKey, Replace: true})
	if code != 200 || !v.Replaced || v.ID != first.ID {
		t.Fatalf("replace: %d %+v %+v", code, v, e)
	}
	wantClosed(t, old, protocol.CloseRevoked)
	if _, code := th.loginName(oldTok); code != 401 {
		t.Fatalf("the replaced token still logs in: %d", code)
	}
	if code := dialStatus(th, oldTok); code != 401 {
		t.Fatalf("the replaced token still connects: %d", code)
	}
	if name, code := th.loginName(newTok); code != 200 || name != "box" {
		t.Fatalf("new login: %q %d", name, code)
	}
	th.dial(newTok, protocol.Hello{})
	if v, code, _ := th.approve(th.admin, apitypes.ApproveRequest{Name: "box", Key: newKey}); code != 200 || v.Replaced {
		t.Fatalf("the new key again: %d %+v", code, v)
	}

	// A revoked runner's name is free for its owner: nothing is left to revoke.
	if code, e := th.call(th.admin, "POST", "/runners/box/revoke", nil, nil); code != 200 {
		t.Fatalf("revoke: %d %+v", code, e)
	}
	third := auth.NewToken(auth.PrefixRunner)
	if v, code, e := th.approve(th.admin, apitypes.ApproveRequest{Name: "box", Key: auth.Hash(third)}); code != 200 || v.Replaced || v.Revoked {
		t.Fatalf("approve over a revoked runner: %d %+v %+v", code, v, e)
	}
}

func TestEnsureLocalRunnerReplacesItsOwnLogin(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	ctx := context.Background()
	first, err := th.h.EnsureLocalRunner(ctx, "local")
	if err != nil {
		t.Fatal(err)
	}
	sr, _ := th.dial(first, protocol.Hello{})
	second, err := th.h.EnsureLocalRunner(ctx, "local")
	if err != nil {
		t.Fatalf("second start: %v", err)
	}
	wantClosed(t, sr, protocol.CloseRevoked)
	if _, code := th.loginName(first); code != 401 {
		t.Fatalf("the previous start's token: %d", code)
	}
	if name, code := th.loginName(second); code != 200 || name != "local" {
		t.Fatalf("the new token: %q %d", name, code)
	}
}

// nopLink is a connection that pushes nowhere, for a test that calls the
// core without a gateway.
type nopLink struct{}

func (nopLink) Offer(protocol.Offer)        {}
func (nopLink) Cancel(protocol.CancelOrder) {}
func (nopLink) Drop(protocol.DropOrder)     {}
func (nopLink) Queue(protocol.Queue)        {}
func (nopLink) Welcome(protocol.Welcome)    {}
func (nopLink) Close(int, string)           {}

// A connection authenticated just before its token was replaced or revoked
// is refused at hello, before it reconciles anything.
func TestStaleTokenIsRefusedAtHello(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	tok := th.registerRunner("box")
	var rv apitypes.RunnerView
	th.call(tok, "GET", "/runner/login", nil, &rv)
	c := &runnerSession{runnerID: rv.ID, name: "box", tokenHash: auth.Hash(tok), link: nopLink{}}
	if _, code, e := th.approve(th.admin, apitypes.ApproveRequest{Name: "box", Key: auth.Hash(auth.NewToken(auth.PrefixRunner)), Replace: true}); code != 200 {
		t.Fatalf("replace: %d %+v", code, e)
	}
	err := th.h.attach(context.Background(), c, protocol.Hello{Protocol: protocol.Version, Slots: 1})
	if !errors.Is(err, errStaleToken) {
		t.Fatalf("attach with a replaced token = %v, want errStaleToken", err)
	}
	if th.h.reg.get(rv.ID) != nil {
		t.Fatal("the stale connection was listed")
	}
}
