package cli

import (
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
)

// newAccountsHub is the fake hub holding accts, the caller's accounts in
// order.
func newAccountsHub(t *testing.T, accts []apitypes.AccountView) *fakeHub {
	t.Helper()
	h := newFakeHub(t)
	h.mu.Lock()
	h.accts = accts
	h.mu.Unlock()
	return h
}

func TestHubAccounts(t *testing.T) {
	reset := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)
	h := newAccountsHub(t, []apitypes.AccountView{
		{Runner: "gpu1", ID: "acc-1", Agent: "claude", Label: "work", Kind: "login", State: "ready", Connected: true,
			Owner: "admin", SharedWith: []apitypes.Share{{User: "bob"}, {Project: "web"}}},
		{Runner: "gpu1", ID: "acc-2", Agent: "codex", Kind: "api-key", State: "limited", LimitedUntil: &reset, Connected: true,
			Owner: "admin"},
		{Runner: "gpu2", ID: "acc-1", Agent: "claude", Label: "work", Kind: "login", State: "ready", Owner: "carol"},
	})
	env := map[string]string{"DROVER_HUB": h.URL, "DROVER_TOKEN": h.token}
	limited := "limited until " + reset.Local().Format("2006-01-02 15:04:05")

	for _, args := range [][]string{{"accounts"}, {"accounts", "list"}} {
		r := runCLI(t, env, "", args...)
		lines := strings.Split(strings.TrimSuffix(r.stdout, "\n"), "\n")
		if r.code != 0 || len(lines) != 4 {
			t.Fatalf("%q: code %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
		for i, want := range [][]string{
			{"POSITION", "RUNNER", "OWNER", "ACCOUNT", "AGENT", "KIND", "STATE", "CONNECTED", "SHARED"},
			{"1", "gpu1", "admin", "work", "claude", "login", "ready", "yes", "user:bob,project:web"},
			append(append([]string{"2", "gpu1", "admin", "acc-2", "codex", "api-key"}, strings.Fields(limited)...), "yes", "-"),
			{"3", "gpu2", "carol", "work", "claude", "login", "ready", "no", "-"},
		} {
			if got := strings.Fields(lines[i]); !slices.Equal(got, want) {
				t.Errorf("%q line %d: %q, want %q", args, i, got, want)
			}
		}
	}
	r := runCLI(t, env, "", "accounts", "--json")
	var l apitypes.AccountList
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || len(l.Accounts) != 3 ||
		l.Accounts[1].LimitedUntil == nil || !l.Accounts[1].LimitedUntil.Equal(reset) {
		t.Fatalf("accounts --json printed %q: %v", r.stdout, err)
	}

	r = runCLI(t, env, "", "accounts", "move", "gpu2", "work", "1")
	if r.code != 0 || !strings.Contains(r.stdout, "POSITION") {
		t.Fatalf("move: code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
	if first := strings.Fields(strings.Split(r.stdout, "\n")[1]); !slices.Equal(first[:4], []string{"1", "gpu2", "carol", "work"}) {
		t.Errorf("after the move, first line %q", first)
	}
	r = runCLI(t, env, "", "accounts", "move", "--json", "gpu1", "acc-2", "9")
	if err := json.Unmarshal([]byte(r.stdout), &l); err != nil || l.Accounts[2].ID != "acc-2" || l.Accounts[2].Position != 3 {
		t.Fatalf("move --json printed %q: %v", r.stdout, err)
	}
	want := []apitypes.MoveAccountRequest{{Runner: "gpu2", ID: "work", Position: 1}, {Runner: "gpu1", ID: "acc-2", Position: 9}}
	if !slices.Equal(h.moves, want) {
		t.Errorf("moves sent %+v, want %+v", h.moves, want)
	}

	// The hub's refusal is one line on stderr.
	r = runCLI(t, env, "", "accounts", "move", "gpu1", "nope", "1")
	if r.code != 1 || strings.Count(r.stderr, "\n") != 1 || !strings.Contains(r.stderr, "has no account nope") {
		t.Errorf("move of an unknown account: code %d, stderr %q", r.code, r.stderr)
	}

	// Bad command lines are usage errors and send nothing.
	for _, args := range [][]string{
		{"accounts", "bogus"},
		{"accounts", "move"},
		{"accounts", "move", "gpu1", "acc-2"},
		{"accounts", "move", "gpu1", "acc-2", "0"},
		{"accounts", "move", "gpu1", "acc-2", "-1"},
		{"accounts", "move", "gpu1", "acc-2", "first"},
		{"accounts", "move", "gpu 1", "acc-2", "1"},
		{"accounts", "move", "gpu1", "", "1"},
		{"accounts", "list", "extra"},
	} {
		r := runCLI(t, env, "", args...)
		if r.code != 2 || !strings.HasPrefix(r.stderr, "drover: ") || r.stdout != "" {
			t.Errorf("%q: code %d, stdout %q, stderr %q", args, r.code, r.stdout, r.stderr)
		}
	}
	if len(h.moves) != 3 {
		t.Errorf("bad command lines sent moves: %+v", h.moves[3:])
	}
}

func TestHubAccountsEmpty(t *testing.T) {
	h := newAccountsHub(t, []apitypes.AccountView{})
	r := runCLI(t, map[string]string{"DROVER_HUB": h.URL, "DROVER_TOKEN": h.token}, "", "accounts")
	if r.code != 0 || !strings.Contains(r.stdout, "No accounts") {
		t.Errorf("code %d, stdout %q, stderr %q", r.code, r.stdout, r.stderr)
	}
}
