package protocoltest

import (
	"testing"

	"drover/internal/protocol"
)

// The fake keeps the contract both called directly and through the codec
// (protocol.Client → frames → protocol.ServeFrame); the hub's package runs
// the same contract against the real hub over its gateway.
func TestFakeKeepsTheContract(t *testing.T) {
	ref := protocol.AttemptRef{Job: "j-1", Attempt: "a-1", Epoch: 1}
	for name, wrap := range map[string]func(*Hub) protocol.Hub{
		"direct":   func(h *Hub) protocol.Hub { return h },
		"loopback": func(h *Hub) protocol.Hub { return protocol.Client{Caller: Loopback{h}} },
	} {
		t.Run(name, func(t *testing.T) {
			h := NewHub()
			h.Offered(ref)
			Contract(t, wrap(h), ref)
			if got := string(h.LogOf(ref.Attempt)); got != "hello world\n" {
				t.Fatalf("log = %q", got)
			}
		})
	}
}
