package hub

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/coder/websocket"

	"drover/internal/protocol"
)

// TestSilentRunnerIsClosedAsDead: a runner that sends nothing for three
// heartbeat intervals is closed with 4004, however the timer that finds it
// silent is armed (the hub gives a runner another window only when that
// timer fires late, i.e. the hub itself was stopped).
func TestSilentRunnerIsClosedAsDead(t *testing.T) {
	th := startHub(t, Config{Heartbeat: 100 * time.Millisecond})
	tok := th.registerRunner("quiet")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ws := wsDial(t, ctx, th.srv.URL, tok)
	defer ws.CloseNow()
	f, err := protocol.NewFrame(protocol.TypeHello, "", protocol.Hello{Protocol: protocol.Version, Slots: 1})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(f)
	if err := ws.Write(ctx, websocket.MessageText, b); err != nil {
		t.Fatal(err)
	}
	for { // the welcome, then nothing from us until the hub gives up
		if _, _, err = ws.Read(ctx); err != nil {
			break
		}
	}
	if st := websocket.CloseStatus(err); st != protocol.CloseDead {
		t.Fatalf("closed with %v (%v), want %d", st, err, protocol.CloseDead)
	}
}
