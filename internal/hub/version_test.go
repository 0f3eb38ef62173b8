package hub

import (
	"testing"
	"time"

	"drover/internal/protocol"
)

// A runner's version from its hello is stored and shown in the runners
// view, also once it has gone.
func TestRunnerVersionIsStoredAndShown(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	sr, _ := th.dial(th.registerRunner("r1"), protocol.Hello{Slots: 1, RunnerVersion: "v9.8.7"})
	if v := th.runnersOf(th.admin)["r1"].Version; v != "v9.8.7" {
		t.Fatalf("connected runner's version %q", v)
	}
	sr.ws.CloseNow()
	for deadline := time.Now().Add(10 * time.Second); th.runnersOf(th.admin)["r1"].Connected; time.Sleep(10 * time.Millisecond) {
		if time.Now().After(deadline) {
			t.Fatal("runner still connected")
		}
	}
	if v := th.runnersOf(th.admin)["r1"].Version; v != "v9.8.7" {
		t.Fatalf("gone runner's version %q, want the stored one", v)
	}
}
