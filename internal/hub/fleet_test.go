package hub

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/auth"
	"drover/internal/protocol"
	"drover/internal/rules"
)

func (th *testHub) launch(token string, req apitypes.LaunchRequest) apitypes.LaunchResponse {
	th.t.Helper()
	var v apitypes.LaunchResponse
	if code, e := th.call(token, "POST", "/fleet/launches", req, &v); code != http.StatusCreated {
		th.t.Fatalf("launch: %d %v", code, e)
	}
	return v
}

// registerWith exchanges a registration token for a new runner token.
func (th *testHub) registerWith(reg string, labels map[string]string) (string, int, rules.Error) {
	th.t.Helper()
	own := auth.NewToken(auth.PrefixRunner)
	code, e := th.call(reg, "POST", "/runner/register", apitypes.RegisterRequest{Key: auth.Hash(own), Labels: labels}, nil)
	return own, code, e
}

func (th *testHub) launchView(token, id string) apitypes.LaunchView {
	th.t.Helper()
	var v apitypes.LaunchView
	if code, e := th.call(token, "GET", "/fleet/launches/"+id, nil, &v); code != http.StatusOK {
		th.t.Fatalf("launch %s: %d %v", id, code, e)
	}
	return v
}

func TestRegistrationTokensAreSingleUseScopedAndRevocable(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{Lease: 5 * time.Second, Heartbeat: time.Second})
	pool := map[string]string{"pool": "a"}
	l := th.launch(th.admin, apitypes.LaunchRequest{Target: "local", Count: 2, Slots: 1, Labels: pool})
	if len(l.Registrations) != 2 || !strings.HasPrefix(l.Registrations[0].Token, auth.PrefixRegistration) {
		t.Fatalf("launch tokens: %+v", l.Registrations)
	}
	reg := l.Registrations[0].Token

	// Refusals change nothing: the token still registers afterwards.
	for _, tc := range []struct {
		name   string
		token  string
		labels map[string]string
		code   int
		msg    string
	}{
		{"label outside scope", reg, map[string]string{"pool": "b"}, http.StatusForbidden, "outside the launch's labels"},
		{"extra label", reg, map[string]string{"pool": "a", "gpu": "1"}, http.StatusForbidden, "gpu=1 is outside"},
		{"unknown token", auth.NewToken(auth.PrefixRegistration), pool, http.StatusUnauthorized, "not recognised"},
		{"a user token", th.admin, pool, http.StatusUnauthorized, "needs a fleet registration token"},
	} {
		if _, code, e := th.registerWith(tc.token, tc.labels); code != tc.code || !strings.Contains(e.Message, tc.msg) {
			t.Errorf("%s: %d %q, want %d %q", tc.name, code, e.Message, tc.code, tc.msg)
		}
	}
	if v := th.launchView(th.admin, l.ID); v.Runners[0].Registered {
		t.Fatalf("a refused registration registered: %+v", v.Runners[0])
	}

	own, code, e := th.registerWith(reg, pool)
	if code != http.StatusCreated {
		t.Fatalf("register: %d %v", code, e)
	}
	if _, code, e := th.registerWith(reg, pool); code != http.StatusUnauthorized || !strings.Contains(e.Message, "used already") {
		t.Fatalf("reuse: %d %v", code, e)
	}
	// The same key again is a retry of the same registration.
	if code, e := th.call(reg, "POST", "/runner/register", apitypes.RegisterRequest{Key: auth.Hash(own), Labels: pool}, nil); code != http.StatusCreated {
		t.Fatalf("retry with the same key: %d %v", code, e)
	}

	// The runner is its launch owner's, and held to the launch's labels at
	// every connect.
	rv := th.runnersOf(th.admin)[l.Registrations[0].Name]
	if rv.Owner != "admin" {
		t.Fatalf("registered runner: %+v", rv)
	}
	bad := dialRaw(t, th, own, protocol.Hello{Protocol: protocol.Version, Slots: 1, Labels: map[string]string{"pool": "b"}})
	if st := bad.waitClosed(); st != protocol.CloseRefused {
		t.Fatalf("hello outside scope closed with %d", st)
	}
	sr, _ := th.dial(own, protocol.Hello{Labels: pool})

	// Another user cannot see or revoke the launch.
	bob := th.addUser("bob")
	if code, _ := th.call(bob, "POST", "/fleet/launches/"+l.ID+"/revoke", nil, nil); code != http.StatusNotFound {
		t.Fatalf("another user's revoke: %d", code)
	}
	var list apitypes.LaunchList
	th.call(bob, "GET", "/fleet/launches", nil, &list)
	if len(list.Launches) != 0 {
		t.Fatalf("bob sees %+v", list.Launches)
	}

	// Revoking the launch revokes its runner and its unused token.
	if code, e := th.call(th.admin, "POST", "/fleet/launches/"+l.ID+"/revoke", nil, nil); code != http.StatusOK {
		t.Fatalf("revoke: %d %v", code, e)
	}
	if st := sr.waitClosed(); st != protocol.CloseRevoked {
		t.Fatalf("revoked runner closed with %d", st)
	}
	if st := th.dialStatus(own); st != http.StatusUnauthorized {
		t.Fatalf("revoked runner's token: %d", st)
	}
	if _, code, e := th.registerWith(l.Registrations[1].Token, pool); code != http.StatusUnauthorized || !strings.Contains(e.Message, "revoked") {
		t.Fatalf("unused token of a revoked launch: %d %v", code, e)
	}
	if v := th.launchView(th.admin, l.ID); !v.Revoked || !v.Runners[0].Revoked || v.Runners[1].Registered {
		t.Fatalf("revoked launch: %+v", v)
	}
}

func TestRegistrationTokensExpire(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{Lease: 5 * time.Second, Heartbeat: time.Second})
	l := th.launch(th.admin, apitypes.LaunchRequest{Target: "local", Count: 1, Slots: 1, TTLSeconds: 1})
	time.Sleep(1100 * time.Millisecond)
	if _, code, e := th.registerWith(l.Registrations[0].Token, nil); code != http.StatusUnauthorized || !strings.Contains(e.Message, "expired") {
		t.Fatalf("expired token: %d %v", code, e)
	}
	if len(th.runnersOf(th.admin)) != 0 {
		t.Fatal("an expired token registered a runner")
	}
	for _, req := range []apitypes.LaunchRequest{
		{Target: "", Count: 1, Slots: 1},
		{Target: "local", Count: 0, Slots: 1},
		{Target: "local", Count: 1, Slots: 0},
		{Target: "local", Count: 1, Slots: 1, TTLSeconds: -1},
	} {
		if code, _ := th.call(th.admin, "POST", "/fleet/launches", req, nil); code != http.StatusBadRequest {
			t.Errorf("launch %+v: %d, want 400", req, code)
		}
	}
}

// dialRaw connects and sends hello without waiting for a welcome.
func dialRaw(t *testing.T, th *testHub, token string, hello protocol.Hello) *scriptRunner {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	ws := wsDial(t, ctx, th.srv.URL, token)
	t.Cleanup(func() { ws.CloseNow() })
	sr := newScriptRunner(t, ws)
	sr.send(protocol.TypeHello, "", hello)
	return sr
}

func TestDemandAnswersWhenTheQueueChanges(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{Lease: 5 * time.Second, Heartbeat: time.Second})
	var d0 apitypes.Demand
	if code, e := th.call(th.admin, "GET", "/fleet/demand?labels=pool=a", nil, &d0); code != http.StatusOK || d0.Queued != 0 {
		t.Fatalf("demand: %d %v %+v", code, e, d0)
	}
	got := make(chan apitypes.Demand, 1)
	go func() {
		var d apitypes.Demand
		th.call(th.admin, "GET", fmt.Sprintf("/fleet/demand?labels=pool=a&after=%d&wait=30000", d0.Generation), nil, &d)
		got <- d
	}()
	submit := func(labels map[string]string) apitypes.JobView {
		var v apitypes.JobView
		if code, e := th.call(th.admin, "POST", "/jobs", apitypes.SubmitRequest{Agent: "exec", Args: []string{"true"}, Labels: labels}, &v); code != http.StatusCreated {
			t.Fatalf("submit: %d %v", code, e)
		}
		return v
	}
	submit(map[string]string{"pool": "b"}) // not for these runners
	j := submit(map[string]string{"pool": "a"})
	deadline := time.After(20 * time.Second)
	for d := range got {
		if d.Queued == 1 && d.Generation > d0.Generation {
			break
		}
		// An earlier pass (the pool=b job's) may answer first: wait again.
		go func() {
			var d2 apitypes.Demand
			th.call(th.admin, "GET", fmt.Sprintf("/fleet/demand?labels=pool=a&after=%d&wait=30000", d.Generation), nil, &d2)
			got <- d2
		}()
		select {
		case <-deadline:
			t.Fatalf("demand never counted the job: %+v", d)
		default:
		}
	}

	// A launch failure shows on the waiting job, until cleared.
	l := th.launch(th.admin, apitypes.LaunchRequest{Target: "local", Count: 1, Slots: 1, Labels: map[string]string{"pool": "a"}})
	report := func(reason string) {
		if code, e := th.call(th.admin, "POST", "/fleet/launches/"+l.ID+"/failure", apitypes.LaunchFailure{Reason: reason}, nil); code != http.StatusNoContent {
			t.Fatalf("report: %d %v", code, e)
		}
	}
	report("host box unreachable")
	if w := th.job(j.ID).Waiting; !strings.Contains(w, "infrastructure failure") || !strings.Contains(w, "host box unreachable") {
		t.Fatalf("waiting: %q", w)
	}
	// It is stored: a restarted hub still says why the job waits.
	th.reopen()
	if w := th.job(j.ID).Waiting; !strings.Contains(w, "host box unreachable") {
		t.Fatalf("waiting after a hub restart: %q", w)
	}
	report("")
	if w := th.job(j.ID).Waiting; strings.Contains(w, "unreachable") {
		t.Fatalf("waiting after the failure cleared: %q", w)
	}
	th.reopen()
	if w := th.job(j.ID).Waiting; strings.Contains(w, "unreachable") {
		t.Fatalf("waiting after the cleared failure and a restart: %q", w)
	}
	if code, _ := th.call(th.admin, "POST", "/fleet/launches/"+l.ID+"/failure", apitypes.LaunchFailure{Reason: "\x1b[31mred"}, nil); code != http.StatusBadRequest {
		t.Fatalf("a reason with control characters: %d", code)
	}
}
