package hub

import (
	"bytes"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/hub/httpapi"
	"drover/internal/protocol"
	"drover/internal/rules"
	"drover/internal/store"
)

// seedAccounts makes accts the accounts of the runner named name, through
// the store (as the gateway does when a runner reports them).
func (th *testHub) seedAccounts(name string, accts ...protocol.AccountInfo) {
	th.t.Helper()
	if err := th.h.store.Write(th.t.Context(), func(tx store.Tx) error {
		rn, err := tx.RunnerByName(name)
		if err != nil {
			return err
		}
		return tx.SyncRunnerAccounts(rn.ID, storeAccounts(accts), th.h.now())
	}); err != nil {
		th.t.Fatalf("seed accounts of %s: %v", name, err)
	}
}

func (th *testHub) accounts(token string) []apitypes.AccountView {
	th.t.Helper()
	var l apitypes.AccountList
	if code, e := th.call(token, "GET", "/accounts", nil, &l); code != http.StatusOK {
		th.t.Fatalf("list accounts: %d %+v", code, e)
	}
	return l.Accounts
}

// accountOrder is "RUNNER/ID" of each account, with its position checked.
func accountOrder(t *testing.T, vs []apitypes.AccountView) []string {
	t.Helper()
	out := []string{}
	for i, v := range vs {
		if v.Position != i+1 {
			t.Errorf("account %d (%s/%s) has position %d", i+1, v.Runner, v.ID, v.Position)
		}
		out = append(out, v.Runner+"/"+v.ID)
	}
	return out
}

func TestAccountsListAndMove(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	reset := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	box1 := []protocol.AccountInfo{
		{ID: "acc-1", Agent: "claude", Label: "work", Kind: "login", State: protocol.AccountReady},
		{ID: "acc-2", Agent: "codex", Label: "home", Kind: "api-key", State: protocol.AccountLimited, LimitedUntil: reset},
	}
	box2 := []protocol.AccountInfo{
		{ID: "acc-1", Agent: "claude", Label: "work", Kind: "login", State: protocol.AccountReady},
		{ID: "acc-3", Agent: "claude", Label: "spare", Kind: "login", State: protocol.AccountReady},
		{ID: "acc-4", Agent: "gemini", Label: "spare", Kind: "login", State: protocol.AccountReady},
	}
	tok1 := th.registerRunner("box-1")
	th.registerRunner("box-2")
	bob := th.addUser("bob")
	if code, e := th.call(bob, "POST", "/runners/approve", apitypes.ApproveRequest{Name: "bobs-box", Key: strings.Repeat("ab", 32)}, nil); code != http.StatusOK {
		t.Fatalf("bob approves his runner: %d %+v", code, e)
	}
	// box-1 is connected, box-2 is not.
	th.dial(tok1, protocol.Hello{Agents: []string{"exec", "claude"}, Accounts: box1})
	th.seedAccounts("box-1", box1...)
	th.seedAccounts("box-2", box2...)
	th.seedAccounts("bobs-box", protocol.AccountInfo{ID: "acc-9", Agent: "claude", Kind: "login", State: protocol.AccountReady})

	got := th.accounts(th.admin)
	want := []apitypes.AccountView{
		{Position: 1, Runner: "box-1", ID: "acc-1", Agent: "claude", Label: "work", Kind: "login", State: "ready", Connected: true, Owner: "admin"},
		{Position: 2, Runner: "box-1", ID: "acc-2", Agent: "codex", Label: "home", Kind: "api-key", State: "limited", LimitedUntil: &reset, Connected: true, Owner: "admin"},
		{Position: 3, Runner: "box-2", ID: "acc-1", Agent: "claude", Label: "work", Kind: "login", State: "ready", Owner: "admin"},
		{Position: 4, Runner: "box-2", ID: "acc-3", Agent: "claude", Label: "spare", Kind: "login", State: "ready", Owner: "admin"},
		{Position: 5, Runner: "box-2", ID: "acc-4", Agent: "gemini", Label: "spare", Kind: "login", State: "ready", Owner: "admin"},
	}
	gj, _ := json.Marshal(got)
	wj, _ := json.Marshal(want)
	if !bytes.Equal(gj, wj) {
		t.Fatalf("accounts:\n got %s\nwant %s", gj, wj)
	}
	if got := accountOrder(t, th.accounts(bob)); strings.Join(got, " ") != "bobs-box/acc-9" {
		t.Fatalf("bob's accounts: %v", got)
	}

	for _, tc := range []struct {
		name string
		req  apitypes.MoveAccountRequest
		want string
	}{
		{"by label, to the top", apitypes.MoveAccountRequest{Runner: "box-2", ID: "work", Position: 1},
			"box-2/acc-1 box-1/acc-1 box-1/acc-2 box-2/acc-3 box-2/acc-4"},
		{"by id, down", apitypes.MoveAccountRequest{Runner: "box-1", ID: "acc-1", Position: 3},
			"box-2/acc-1 box-1/acc-2 box-1/acc-1 box-2/acc-3 box-2/acc-4"},
		{"past the end", apitypes.MoveAccountRequest{Runner: "box-2", ID: "acc-1", Position: 99},
			"box-1/acc-2 box-1/acc-1 box-2/acc-3 box-2/acc-4 box-2/acc-1"},
		{"a shared label by id", apitypes.MoveAccountRequest{Runner: "box-2", ID: "acc-4", Position: 2},
			"box-1/acc-2 box-2/acc-4 box-1/acc-1 box-2/acc-3 box-2/acc-1"},
	} {
		var l apitypes.AccountList
		if code, e := th.call(th.admin, "POST", "/accounts/move", tc.req, &l); code != http.StatusOK {
			t.Fatalf("%s: %d %+v", tc.name, code, e)
		}
		if got := strings.Join(accountOrder(t, l.Accounts), " "); got != tc.want {
			t.Fatalf("%s: answered\n %s\nwant %s", tc.name, got, tc.want)
		}
		if got := strings.Join(accountOrder(t, th.accounts(th.admin)), " "); got != tc.want {
			t.Fatalf("%s: listed\n %s\nwant %s", tc.name, got, tc.want)
		}
	}
	if got := accountOrder(t, th.accounts(bob)); strings.Join(got, " ") != "bobs-box/acc-9" {
		t.Fatalf("bob's accounts after the admin's moves: %v", got)
	}
}

func TestAccountMovesRefused(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	th.registerRunner("box-1")
	bob := th.addUser("bob")
	if code, e := th.call(bob, "POST", "/runners/approve", apitypes.ApproveRequest{Name: "bobs-box", Key: strings.Repeat("cd", 32)}, nil); code != http.StatusOK {
		t.Fatalf("bob approves his runner: %d %+v", code, e)
	}
	th.seedAccounts("box-1",
		protocol.AccountInfo{ID: "acc-1", Agent: "claude", Label: "spare", Kind: "login", State: protocol.AccountReady},
		protocol.AccountInfo{ID: "acc-2", Agent: "claude", Label: "spare", Kind: "login", State: protocol.AccountReady},
		protocol.AccountInfo{ID: "acc-3", Agent: "codex", Label: "acc-1", Kind: "login", State: protocol.AccountReady})
	th.seedAccounts("bobs-box", protocol.AccountInfo{ID: "acc-9", Agent: "claude", Kind: "login", State: protocol.AccountReady})
	mine := strings.Join(accountOrder(t, th.accounts(th.admin)), " ")
	bobs := strings.Join(accountOrder(t, th.accounts(bob)), " ")

	move := func(runner, id string, pos int) string {
		b, _ := json.Marshal(apitypes.MoveAccountRequest{Runner: runner, ID: id, Position: pos})
		return string(b)
	}
	for _, tc := range []struct {
		name   string
		token  string
		body   string
		status int
		code   string
	}{
		{"unknown runner", th.admin, move("box-9", "acc-1", 1), http.StatusNotFound, rules.ErrNotFound},
		{"another owner's runner", th.admin, move("bobs-box", "acc-9", 1), http.StatusNotFound, rules.ErrNotFound},
		{"my runner by another owner", bob, move("box-1", "acc-1", 1), http.StatusNotFound, rules.ErrNotFound},
		{"unknown account", th.admin, move("box-1", "acc-7", 1), http.StatusNotFound, rules.ErrNotFound},
		{"ambiguous label", th.admin, move("box-1", "spare", 1), http.StatusBadRequest, rules.ErrBadRequest},
		{"position 0", th.admin, move("box-1", "acc-2", 0), http.StatusBadRequest, rules.ErrBadRequest},
		{"negative position", th.admin, move("box-1", "acc-2", -1), http.StatusBadRequest, rules.ErrBadRequest},
		{"no runner", th.admin, move("", "acc-2", 1), http.StatusBadRequest, rules.ErrBadRequest},
		{"no account", th.admin, move("box-1", "", 1), http.StatusBadRequest, rules.ErrBadRequest},
		{"malformed body", th.admin, `{"runner": "box-1", "id": `, http.StatusBadRequest, rules.ErrBadRequest},
		{"wrongly typed body", th.admin, `{"runner": "box-1", "id": "acc-2", "position": "1"}`, http.StatusBadRequest, rules.ErrBadRequest},
		{"body too large", th.admin, move("box-1", strings.Repeat("x", httpapi.MaxBody+1), 1), http.StatusRequestEntityTooLarge, rules.ErrTooLarge},
		{"no token", "", move("box-1", "acc-2", 1), http.StatusUnauthorized, rules.ErrUnauthorized},
	} {
		req, _ := http.NewRequest("POST", th.srv.URL+apitypes.APIPrefix+"/accounts/move", strings.NewReader(tc.body))
		if tc.token != "" {
			req.Header.Set("Authorization", "Bearer "+tc.token)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		data, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var eb apitypes.ErrorBody
		_ = json.Unmarshal(data, &eb)
		if resp.StatusCode != tc.status || eb.Error.Code != tc.code || eb.Error.Message == "" {
			t.Errorf("%s: %d %s, want %d %s", tc.name, resp.StatusCode, data, tc.status, tc.code)
		}
		if got := strings.Join(accountOrder(t, th.accounts(th.admin)), " "); got != mine {
			t.Fatalf("%s changed my accounts: %s, was %s", tc.name, got, mine)
		}
		if got := strings.Join(accountOrder(t, th.accounts(bob)), " "); got != bobs {
			t.Fatalf("%s changed bob's accounts: %s, was %s", tc.name, got, bobs)
		}
	}

	// An id wins over another account's label.
	var l apitypes.AccountList
	if code, e := th.call(th.admin, "POST", "/accounts/move", apitypes.MoveAccountRequest{Runner: "box-1", ID: "acc-1", Position: 3}, &l); code != http.StatusOK {
		t.Fatalf("move by id: %d %+v", code, e)
	}
	if got := strings.Join(accountOrder(t, l.Accounts), " "); got != "box-1/acc-2 box-1/acc-3 box-1/acc-1" {
		t.Fatalf("after moving acc-1 last: %s", got)
	}
}
