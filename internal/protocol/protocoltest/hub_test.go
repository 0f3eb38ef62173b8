package protocoltest

import (
	"strings"
	"testing"

	"drover/internal/protocol"
)

// The fake keeps the contract both called directly and through the codec
// (protocol.Client → frames → protocol.ServeFrame); the hub's package runs
// the same contract against the real hub over its gateway and its HTTP
// transfers.
func TestFakeKeepsTheContract(t *testing.T) {
	ref := protocol.AttemptRef{Job: "j-1", Attempt: "a-1", Epoch: 1}
	commit := strings.Repeat("c0ffee01", 5)
	for name, wrap := range map[string]func(*Hub) protocol.Hub{
		"direct":   func(h *Hub) protocol.Hub { return h },
		"loopback": func(h *Hub) protocol.Hub { return protocol.Client{Caller: Loopback{h}} },
	} {
		t.Run(name, func(t *testing.T) {
			h := NewHub()
			h.Offered(ref)
			h.SetContext(ref.Job, map[string][]byte{"notes/brief.md": []byte("do it\n")})
			Contract(t, wrap(h), h, ref, Work{Commit: commit, Bundle: []byte("# v2 git bundle\n"),
				Context: map[string]string{"notes/brief.md": "do it\n"}})
			if got := string(h.LogOf(ref.Attempt)); got != "hello world\n" {
				t.Fatalf("log = %q", got)
			}
			if got := h.HeadOf(ref.Job); got != commit {
				t.Fatalf("head = %q, want %s", got, commit)
			}
		})
	}
}
