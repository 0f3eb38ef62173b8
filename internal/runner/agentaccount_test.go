package runner

import (
	"testing"
	"time"

	"drover/internal/accounts"
	"drover/internal/agent"
)

// TestAgentAccountCarriesProbedCapabilities: what the doctor's probe
// recorded of a native account reaches the agent; an account never probed
// is taken to do all.
func TestAgentAccountCarriesProbedCapabilities(t *testing.T) {
	s, err := accounts.Open(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	r := &Runner{accts: s}
	for _, tt := range []struct {
		caps *accounts.Capabilities
		want agent.Account
	}{
		{nil, agent.Account{}},
		{&accounts.Capabilities{ToolCalls: true, StreamedToolCalls: true}, agent.Account{}},
		{&accounts.Capabilities{ToolCalls: true, ContextLength: 8192}, agent.Account{NoStreamedToolCalls: true, ContextLength: 8192}},
		{&accounts.Capabilities{}, agent.Account{NoToolCalls: true, NoStreamedToolCalls: true}},
	} {
		acct, err := s.Add(accounts.Account{Agent: "native", Kind: accounts.KindNoKey, Provider: "openai-compatible",
			BaseURL: "http://127.0.0.1:11434/v1", Model: "m"}, "")
		if err != nil {
			t.Fatal(err)
		}
		if tt.caps != nil {
			tt.caps.Probed = time.Now()
			if err := s.SetCapabilities(acct.ID, *tt.caps); err != nil {
				t.Fatal(err)
			}
		}
		if acct, err = s.Get(acct.ID); err != nil {
			t.Fatal(err)
		}
		got, err := r.agentAccount(acct)
		if err != nil {
			t.Fatal(err)
		}
		if got.NoToolCalls != tt.want.NoToolCalls || got.NoStreamedToolCalls != tt.want.NoStreamedToolCalls || got.ContextLength != tt.want.ContextLength {
			t.Errorf("caps %+v: the agent got %+v", tt.caps, got)
		}
	}
}
