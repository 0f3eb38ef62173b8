package runner

import (
	"errors"
	"io"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"

	"drover/internal/protocol"
	"drover/internal/protocol/protocoltest"
	"drover/internal/sandbox"
	"drover/internal/sandbox/sandboxtest"
)

// A runner starts with exactly the labels the hub takes: one the hub would
// refuse at its hello fails New, with the rule's reason.
func TestNewChecksLabels(t *testing.T) {
	home := filepath.Join(t.TempDir(), "home")
	must(t, SaveLogin(home, Login{Hub: "http://127.0.0.1:1", Name: "r1", Token: newFakeHub(t).token}))
	quiet := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tc := range protocoltest.LabelCases {
		_, err := New(Config{Home: home, Labels: map[string]string{tc.Key: tc.Value}, Sandbox: sandbox.Policy{Kind: sandbox.KindNone}, Logger: quiet, Agents: newCatalog(t)})
		if (err == nil) != tc.OK || err != nil && !strings.Contains(err.Error(), tc.Why) {
			t.Errorf("%s: New with label %q=%q: %v; want ok=%v (%q)", tc.Name, tc.Key, tc.Value, err, tc.OK, tc.Why)
		}
	}
	if _, err := New(Config{Home: home, Labels: protocoltest.TooManyLabels(), Sandbox: sandbox.Policy{Kind: sandbox.KindNone}, Agents: newCatalog(t)}); err == nil {
		t.Error("New with too many labels took them")
	}
}

// A hello the hub refuses for what it says (here labels outside a fleet
// launch's) would be refused again: Run ends with the hub's reason instead
// of reconnecting forever.
func TestRefusedHelloEndsRun(t *testing.T) {
	h := newFakeHub(t)
	const why = "label pool=b is outside the launch's labels (pool=a): launch with it, or start the runner without it"
	h.mu.Lock()
	h.refuseHello = func(hello protocol.Hello) string {
		if hello.Labels["pool"] != "a" {
			return why
		}
		return ""
	}
	h.mu.Unlock()
	tr := startRunner(t, h, "", func(c *Config) { c.Labels = map[string]string{"pool": "b"} })
	sandboxtest.WaitFor(t, "Run to end, or the runner to dial again", func() bool { return len(tr.done) > 0 || h.dialCount() > 1 })
	if n := h.dialCount(); n != 1 {
		t.Fatalf("%d dials after a refused hello, want 1", n)
	}
	if err := tr.wait(t); err == nil || !strings.Contains(err.Error(), why) || !strings.Contains(err.Error(), "refused runner r1") {
		t.Fatalf("Run = %v, want the hub's reason", err)
	} else if !errors.Is(err, ErrEnded) {
		t.Fatalf("Run = %v, want it to wrap ErrEnded (drover runner exits 3, which systemd does not restart)", err)
	}
}
