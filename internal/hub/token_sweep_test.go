package hub

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/coder/websocket"

	"drover/internal/protocol"
	"drover/internal/sandbox/sandboxtest"
	"drover/internal/store"
)

// tokenReads counts, of the statements st ran since it started counting
// (CountStatementsByText), those that read every runner's token and those
// that read the tokens changed since a version.
func tokenReads(st statementsByText) (every, changed int64) {
	for q, n := range st.StatementsByText() {
		switch {
		case strings.Contains(q, "token_hash FROM runners WHERE revoked_at IS NULL"):
			every += n
		case strings.Contains(q, "token_seq >"):
			changed += n
		}
	}
	return every, changed
}

// changeRunner changes a runner's row as another hub would, with no hint
// and no connection of its own to close.
func changeRunner(t *testing.T, th *testHub, name string, change func(*store.Runner)) {
	t.Helper()
	if err := th.h.store.Write(t.Context(), func(tx store.Tx) error {
		rn, err := tx.RunnerByName(name)
		if err != nil {
			return err
		}
		change(&rn)
		return tx.UpdateRunner(rn)
	}); err != nil {
		t.Fatal(err)
	}
}

// TestIdleCrossSweepReadsNoTokens: cross sweeps with no token changed read
// no runner's token (every sweep read every runner's before: the largest
// part of an idle Postgres hub's CPU with 10,000 runners); a token revoked
// or replaced behind the hub's back is read, and its connection closed, by
// the next sweep; the safety net reads every token every crossFullEvery
// sweeps.
func TestIdleCrossSweepReadsNoTokens(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{CrossSweep: noSweep})
	st, ok := th.h.store.(statementsByText)
	if !ok {
		t.Skipf("the store (%T) does not count its statements by text", th.h.store)
	}
	ctx := t.Context()
	srs, ids := map[string]*scriptRunner{}, map[string]string{}
	for i := range 3 {
		name := fmt.Sprintf("idle%d", i)
		var w protocol.Welcome
		srs[name], w = th.dial(th.registerRunner(name), protocol.Hello{Slots: 1})
		ids[name] = w.RunnerID
	}
	sweep := func() {
		t.Helper()
		if err := th.h.syncHeld(ctx, false); err != nil {
			t.Fatal(err)
		}
	}
	st.CountStatementsByText()
	// reads is what the sweeps did since the last call.
	var every0, changed0 int64
	reads := func() (every, changed int64) {
		e, c := tokenReads(st)
		every, changed, every0, changed0 = e-every0, c-changed0, e, c
		return every, changed
	}
	sweep() // the first look reads every token
	if every, _ := reads(); every != 1 {
		t.Fatalf("the first sweep read every token %d times, want once", every)
	}
	for range crossFullEvery - 1 {
		sweep()
	}
	if every, changed := reads(); every != 0 || changed != 0 {
		t.Fatalf("%d idle sweeps read every token %d times and changed tokens %d times, want neither", crossFullEvery-1, every, changed)
	}
	sweep()
	if every, _ := reads(); every != 1 {
		t.Fatalf("the safety net's sweep read every token %d times, want once", every)
	}

	changeRunner(t, th, "idle0", func(rn *store.Runner) { rn.RevokedAt = new(time.Now()) })
	changeRunner(t, th, "idle1", func(rn *store.Runner) { rn.TokenHash = "replaced" })
	sweep()
	if every, changed := reads(); every != 0 || changed != 1 {
		t.Errorf("the sweep after two changes read every token %d times and changed tokens %d times, want 0 and 1", every, changed)
	}
	for _, name := range []string{"idle0", "idle1"} {
		if err := srs[name].closed(); websocket.CloseStatus(err) != protocol.CloseRevoked {
			t.Errorf("%s's connection after its token changed: %v, want closed as revoked", name, err)
		}
	}
	sandboxtest.WaitFor(t, "the two closed connections to leave", func() bool { return th.h.reg.count() == 1 })
	if th.h.reg.get(ids["idle2"]) == nil {
		t.Error("idle2, unchanged, is no longer connected")
	}
}

// TestCrossHubRevokeWithHintsLost: with every hint lost, a runner revoked
// on hub A is disconnected by hub B's next cross sweep, one that reads
// only the tokens changed since B's last look, and a runner whose token
// A replaced likewise.
func TestCrossHubRevokeWithHintsLost(t *testing.T) {
	t.Parallel()
	hs := startHubs(t, 2, Config{CrossSweep: noSweep}, true)
	a, b := hs[0], hs[1]
	ctx := t.Context()
	box, _ := b.dial(a.registerRunner("box"), protocol.Hello{})
	other, _ := b.dial(a.registerRunner("other"), protocol.Hello{})
	b.h.crossSweep(ctx, false) // the first look reads every token
	b.h.crossSweep(ctx, false)
	if code, e := a.call(a.admin, "POST", "/runners/box/revoke", nil, nil); code != 200 {
		t.Fatalf("revoke on A: %d %v", code, e)
	}
	changeRunner(t, a, "other", func(rn *store.Runner) { rn.TokenHash = "replaced" })
	b.h.x.tokens.mu.Lock()
	next := b.h.x.tokens.sweeps + 1
	b.h.x.tokens.mu.Unlock()
	if next >= crossFullEvery {
		t.Fatal("the next sweep is the safety net's: it would not show the sweep of changes")
	}
	b.h.crossSweep(ctx, false)
	for name, sr := range map[string]*scriptRunner{"box": box, "other": other} {
		if err := sr.closed(); websocket.CloseStatus(err) != protocol.CloseRevoked {
			t.Errorf("B's connection of %s: %v, want closed as revoked", name, err)
		}
	}
}
