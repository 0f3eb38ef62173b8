package runner

import (
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"drover/internal/accounts"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/sandbox/sandboxtest"
	"drover/internal/testkit/fakemodel"
)

// chatAccount adds a no-key openai-compatible native account, never
// probed, for a Chat fake at base (its URL plus path) to a fresh runner
// home.
func chatAccount(t *testing.T, h *fakeHub, base string) (string, *accounts.Store, accounts.Account) {
	t.Helper()
	home := filepath.Join(t.TempDir(), "home")
	must(t, SaveLogin(home, Login{Hub: h.srv.URL, Name: "r1", Token: h.token}))
	s, err := accounts.Open(home)
	must(t, err)
	acct, err := s.Add(accounts.Account{Agent: "native", Kind: accounts.KindNoKey, Provider: "openai-compatible", BaseURL: base, Model: "m"}, "")
	must(t, err)
	return home, s, acct
}

// TestNativeEndpointRefusalParksTheAccount: a model the server does not
// serve (Ollama's 404) and a base URL without /v1 (a bare 404) end the
// attempt with their own reasons, the server's words in the message and
// in the job's log, and the account needs attention, so that no job is
// offered to it, until a probe passes.
func TestNativeEndpointRefusalParksTheAccount(t *testing.T) {
	for _, tt := range []struct {
		name   string
		opts   []fakemodel.Option
		path   string
		reason job.Reason
		said   string
	}{
		{"model not found", []fakemodel.Option{fakemodel.Models("other")}, "/v1", job.ReasonModelNotFound, `model "m" not found`},
		{"no /v1", nil, "", job.ReasonEndpointRefused, "HTTP 404"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newFakeHub(t)
			fake := fakemodel.NewFakeChat(t, []fakemodel.Turn{fakemodel.Text("done")}, tt.opts...)
			home, s, acct := chatAccount(t, h, fake.URL+tt.path)
			tr := startRunner(t, h, home, nil)
			h.waitConn(0)
			ref := newRef()
			h.offer(ref, nativeSpec("do it"))
			fin := h.waitFinish(ref.Attempt)
			log := string(h.log(ref.Attempt))
			if fin.Outcome.State != job.AttemptFailed || fin.Outcome.Reason != tt.reason || !strings.Contains(fin.Outcome.Message, tt.said) {
				t.Fatalf("outcome %+v, want failed %s\nlog:\n%s", fin.Outcome, tt.reason, log)
			}
			if !strings.Contains(log, "drover: the attempt failed ("+string(tt.reason)+")") || !strings.Contains(log, tt.said) {
				t.Fatalf("the log does not end with why:\n%s", log)
			}
			var st protocol.Status
			sandboxtest.WaitFor(t, "the account needing attention", func() bool {
				st, _ = h.lastStatus()
				return len(st.Accounts) == 1 && st.Accounts[0].State == protocol.AccountNeedsAttention
			})
			if slices.Contains(st.Agents, "native") {
				t.Fatalf("status %+v: native is still offered", st)
			}
			got, err := s.Get(acct.ID)
			must(t, err)
			if got.Refused != string(tt.reason) {
				t.Fatalf("account %+v", got)
			}
			// A probe that passes makes it ready again.
			must(t, s.SetCapabilities(acct.ID, accounts.Capabilities{Probed: time.Now(), ToolCalls: true, StreamedToolCalls: true}))
			tr.markDirty() // what the runner's recheck of refused accounts does within 15 s
			sandboxtest.WaitFor(t, "the account ready again", func() bool {
				st, _ = h.lastStatus()
				return len(st.Accounts) == 1 && st.Accounts[0].State == protocol.AccountReady && slices.Contains(st.Agents, "native")
			})
		})
	}
}

// TestJobModelNotFoundLeavesTheAccountReady: a model the job named
// (run --model) that the server does not serve fails that job
// model_not_found; the account, whose own model may be fine, stays ready.
func TestJobModelNotFoundLeavesTheAccountReady(t *testing.T) {
	h := newFakeHub(t)
	fake := fakemodel.NewFakeChat(t, []fakemodel.Turn{fakemodel.Text("done")}, fakemodel.Models("m"))
	home, s, acct := chatAccount(t, h, fake.URL+"/v1")
	startRunner(t, h, home, nil)
	h.waitConn(0)
	ref := newRef()
	spec := nativeSpec("do it")
	spec.Model = "typo"
	h.offer(ref, spec)
	if fin := h.waitFinish(ref.Attempt); fin.Outcome.Reason != job.ReasonModelNotFound {
		t.Fatalf("outcome %+v\nlog:\n%s", fin.Outcome, h.log(ref.Attempt))
	}
	if got, err := s.Get(acct.ID); err != nil || got.NeedsAttention() {
		t.Fatalf("account %+v, %v: want it ready", got, err)
	}
}

// TestNativeLearnsHowTheServerTakesTools: a server that answers streamed
// requests whole, or refuses tools, gets the job done on an account never
// probed, which then records what the attempt found (whole answers, the
// text protocol) and stays ready.
func TestNativeLearnsHowTheServerTakesTools(t *testing.T) {
	write := fakemodel.CallTool("write_file", map[string]any{"path": "a.txt", "content": "x"})
	for _, tt := range []struct {
		name string
		turn fakemodel.Turn
		opt  fakemodel.Option
		want accounts.Capabilities
	}{
		{"whole", write, fakemodel.WholeStreams(), accounts.Capabilities{ToolCalls: true}},
		{"refuses tools", fakemodel.Text("```drover-tool write_file\n{\"path\":\"a.txt\",\"content\":\"x\"}\n```"), fakemodel.RefuseTools(), accounts.Capabilities{}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := newFakeHub(t)
			fake := fakemodel.NewFakeChat(t, []fakemodel.Turn{tt.turn, fakemodel.Text("done")}, tt.opt)
			home, s, acct := chatAccount(t, h, fake.URL+"/v1")
			startRunner(t, h, home, nil)
			h.waitConn(0)
			ref := newRef()
			h.offer(ref, nativeSpec("do it"))
			if fin := h.waitFinish(ref.Attempt); fin.Outcome.State != job.AttemptCompleted {
				t.Fatalf("outcome %+v\nlog:\n%s\n%s", fin.Outcome, h.log(ref.Attempt), fake.Dump())
			}
			got, err := s.Get(acct.ID)
			must(t, err)
			if c := got.Capabilities; c == nil || c.ToolCalls != tt.want.ToolCalls || c.StreamedToolCalls != tt.want.StreamedToolCalls || got.NeedsAttention() {
				t.Fatalf("account %+v, capabilities %+v; want %+v", got, got.Capabilities, tt.want)
			}
		})
	}
}
