package hub

import (
	"context"
	"testing"

	"drover/internal/protocol"
	"drover/internal/protocol/protocoltest"
)

// wireCaller carries a protocol.Client's frames over a scripted runner's
// connection, so the contract runs through the real gateway and store.
type wireCaller struct{ sr *scriptRunner }

func (w wireCaller) Call(_ context.Context, _ string, f protocol.Frame) (protocol.Reply, error) {
	return w.sr.requestID(f.Type, f.ID, f.Body), nil
}

func (w wireCaller) Send(_ context.Context, f protocol.Frame) error {
	w.sr.send(f.Type, "", f.Body)
	return nil
}

// The real hub keeps the contract the fake of protocoltest keeps
// (TestFakeKeepsTheContract), so runner tests on the fake hold for it.
func TestHubKeepsTheProtocolContract(t *testing.T) {
	th := startHub(t, Config{})
	sr, _ := th.dial(th.registerRunner("r1"), protocol.Hello{})
	th.submit("echo", "hi")
	o := sr.offer()
	protocoltest.Contract(t, protocol.Client{Caller: wireCaller{sr}}, o.AttemptRef)
}
