package chaos

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// A hub that never answers at start is stopped, not left running: the
// campaign's setup fails before the hub is in its list, so nothing else
// would stop it (a stray hub then writes to a database that is gone).
func TestHubThatNeverAnswersIsStopped(t *testing.T) {
	dir := t.TempDir()
	fake := filepath.Join(dir, "fake-drover") // a "hub" that listens to nothing and never exits
	if err := os.WriteFile(fake, []byte("#!/bin/sh\nexec sleep 600\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	h := &hubProc{bin: fake, name: "hub", dir: filepath.Join(dir, "hub"), addr: "127.0.0.1:1"}
	ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
	defer cancel()
	err := h.start(ctx)
	if err == nil || !strings.Contains(err.Error(), "did not answer") {
		t.Fatalf("start of a hub that never answers: %v", err)
	}
	select {
	case <-h.p.exited:
	case <-time.After(time.Minute):
		h.p.kill()
		t.Fatal("the hub that never answered still runs after its start failed")
	}
}
