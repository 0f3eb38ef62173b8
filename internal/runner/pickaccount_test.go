package runner

import (
	"strings"
	"testing"
	"time"

	"drover/internal/accounts"
	"drover/internal/agent/claude"
	"drover/internal/agent/cliagent"
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
	mine, err := s.Add(accounts.Account{Agent: "claude", Kind: accounts.KindLogin, Label: "mine"}, "")
	if err != nil {
		t.Fatal(err)
	}
	shared, err := s.Add(accounts.Account{Agent: "claude", Kind: accounts.KindLogin, Label: "shared"}, "")
	if err != nil {
		t.Fatal(err)
	}
	now := time.Now()
	if err := s.SetLimited(shared.ID, now.Add(time.Hour), "limit"); err != nil {
		t.Fatal(err)
	}
	r := &Runner{accts: s, now: func() time.Time { return now }}
	var c cliAgent = cliagent.New(claude.Adapter(), cliagent.Config{})
	tests := []struct {
		name    string
		account string
		want    string // account id, or "" for a refusal
		errHas  string
	}{
		{"the hub's ready choice", mine.ID, mine.ID, ""},
		{"the hub's choice is limited: no other", shared.ID, "", "limited"},
		{"the hub's choice is gone: no other", "acct-gone", "", "no claude account acct-gone"},
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
