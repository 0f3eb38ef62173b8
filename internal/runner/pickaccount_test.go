package runner

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"drover/internal/accounts"
	"drover/internal/agent/claude"
	"drover/internal/agent/facts"
	"drover/internal/protocol"
)

// TestPickAccountUsesOnlyTheHubsChoice: an account the hub chose (the one
// the job's requester may use) is used or nothing is; another ready account
// of the runner would spend for someone who may not use it.
func TestPickAccountUsesOnlyTheHubsChoice(t *testing.T) {
	s, err := accounts.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	add := func(label string, loggedIn bool) accounts.Account {
		t.Helper()
		acct, err := s.Add(accounts.Account{Agent: "claude", Kind: accounts.KindLogin, Label: label}, "")
		if err != nil {
			t.Fatal(err)
		}
		if loggedIn {
			login := `{"claudeAiOauth":{"accessToken":"at","refreshToken":"rt","expiresAt":1}}`
			if err := os.WriteFile(filepath.Join(s.Dir(acct.ID), ".credentials.json"), []byte(login), 0o600); err != nil {
				t.Fatal(err)
			}
		}
		return acct
	}
	// The oldest accounts cannot run: a runner left to choose must pass
	// them over.
	nologin := add("nologin", false)
	refused := add("refused", true)
	if err := s.SetAttention(refused.ID, "auth_failed", "HTTP 401"); err != nil {
		t.Fatal(err)
	}
	mine := add("mine", true)
	shared := add("shared", true)
	now := time.Now()
	if err := s.SetLimited(shared.ID, now.Add(time.Hour), "limit"); err != nil {
		t.Fatal(err)
	}
	r := &Runner{accts: s, agents: newCatalog(t), now: func() time.Time { return now }}
	c := facts.Of(claude.Name)
	tests := []struct {
		name    string
		account string
		want    string // account id, or "" for a refusal
		errHas  string
	}{
		{"the hub's ready choice", mine.ID, mine.ID, ""},
		{"the hub's choice is limited: no other", shared.ID, "", "limited"},
		{"the hub's choice is gone: no other", "acct-gone", "", "no claude account acct-gone"},
		{"the hub's choice needs a login", nologin.ID, "", "needs login (not logged in: no login in "},
		{"the hub's choice was refused", refused.ID, "", "needs attention (HTTP 401): log in again"},
		{"a hub that names none: any ready", "", mine.ID, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newAttempt(protocol.AttemptRef{Job: "j", Attempt: "a", Epoch: 1}, protocol.JobSpec{Agent: "claude"}, "")
			a.account = tt.account
			got, _, err := r.pickAccount(a, c)
			if tt.want == "" {
				if err == nil || !strings.Contains(err.Error(), tt.errHas) {
					t.Fatalf("got %s, %v; want an error mentioning %q", got.ID, err, tt.errHas)
				}
				return
			}
			if err != nil || got.ID != tt.want {
				t.Fatalf("got %s, %v; want %s", got.ID, err, tt.want)
			}
		})
	}
}
