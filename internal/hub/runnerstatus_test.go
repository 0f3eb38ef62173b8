package hub

import (
	"context"
	"io"
	"log/slog"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/protocol"
	"drover/internal/store"
	"drover/internal/store/postgres"
	"drover/internal/testkit"
)

// statusWrites counts the write transactions that record a runner's status
// or accounts (once per Write, however often Postgres retried it).
type statusWrites struct {
	*postgres.Store
	n atomic.Int64
}

type statusTx struct {
	store.Tx
	wrote *bool
}

func (t statusTx) SetRunnerStatus(runnerID, hubID string, st store.RunnerStatus) error {
	*t.wrote = true
	return t.Tx.SetRunnerStatus(runnerID, hubID, st)
}

func (t statusTx) SyncRunnerAccounts(runnerID string, accts []store.Account, now time.Time) error {
	*t.wrote = true
	return t.Tx.SyncRunnerAccounts(runnerID, accts, now)
}

func (s *statusWrites) Write(ctx context.Context, fn func(store.Tx) error) error {
	wrote := false
	err := s.Store.Write(ctx, func(tx store.Tx) error { return fn(statusTx{tx, &wrote}) })
	if wrote {
		s.n.Add(1)
	}
	return err
}

// TestCrossHubRunnerStatus: what a runner on hub B reported (agents,
// accounts, not-ready reason) and its running attempts show the same on
// hub A's runners API and dashboard, and follow a status that changes
// them; a status that changes nothing writes nothing.
func TestCrossHubRunnerStatus(t *testing.T) {
	t.Parallel()
	url := testkit.StartPostgres(t)
	cfg := hubsConfig()
	a := openHubOn(t, url, "", cfg)
	st, err := postgres.Open(t.Context(), url)
	if err != nil {
		t.Fatal(err)
	}
	counted := &statusWrites{Store: st}
	bcfg := cfg
	bcfg.DataDir, bcfg.Database = t.TempDir(), url
	bcfg.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	hb, err := New(context.Background(), bcfg, counted)
	if err != nil {
		st.Close()
		t.Fatal(err)
	}
	b := serveTestHub(t, hb, bcfg, a.admin)

	agents := []string{"exec", "claude"}
	accounts := []protocol.AccountInfo{{ID: "acct_1", Agent: "claude", Label: "work", Kind: "login", State: protocol.AccountReady}}
	sr, w := b.dial(a.registerRunner("r1"), protocol.Hello{Slots: 2, Agents: agents, Accounts: accounts, NotReady: "no network yet"})
	view := func(th *testHub) apitypes.RunnerView { return th.runnersOf(th.admin)["r1"] }
	shows := func(v apitypes.RunnerView, notReady string, running int) bool {
		return v.Connected && v.Hub == b.h.id && slices.Equal(v.Agents, agents) && slices.Equal(v.Accounts, accounts) &&
			v.NotReady == notReady && v.Running == running && !v.Draining
	}
	waitFor(t, "A to show B's runner as not ready", func() bool { return shows(view(a), "no network yet", 0) })
	if got, want := view(a), view(b); !shows(want, "no network yet", 0) {
		t.Fatalf("B's own view %+v; A's %+v", want, got)
	}
	web := a.browser()
	web.signIn(a.admin)
	row := regexp.MustCompile(`(?s)id="runner-r1">.*?</tr>`)
	page := func() string {
		t.Helper()
		resp, body := web.do("GET", "/runners", nil, nil)
		m := row.FindString(body)
		if resp.StatusCode != 200 || m == "" {
			t.Fatalf("runners page on hub A: %d\n%s", resp.StatusCode, body)
		}
		return m
	}
	if p := page(); !strings.Contains(p, "not ready: no network yet") || !strings.Contains(p, "<code>claude</code>") || !strings.Contains(p, "0 used / 2") {
		t.Fatalf("hub A's runners page shows B's runner as\n%s", p)
	}

	// Ready now: A shows it, and the job it runs counts there.
	sr.send(protocol.TypeStatus, "", protocol.Status{Slots: 2, Agents: agents, Accounts: accounts})
	waitFor(t, "A to show the runner ready", func() bool { return shows(view(a), "", 0) })
	j := a.submit("sleep", "100")
	o := sr.offer()
	if o.Job != j.ID {
		t.Fatalf("offer for %s, want %s", o.Job, j.ID)
	}
	wantOK(t, sr.request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	if v := view(a); !shows(v, "", 1) || view(b).Running != 1 {
		t.Fatalf("A shows %+v, B %+v; want one running on both", v, view(b))
	}
	if p := page(); strings.Contains(p, "not ready") || !strings.Contains(p, "1 used / 2") {
		t.Fatalf("hub A's runners page shows B's ready runner as\n%s", p)
	}

	// A status that changes nothing (as one at every attempt's start and
	// finish) writes nothing; the next, which does, writes once. Frames are
	// handled in order, so once A shows the second the first was handled.
	held := []protocol.Held{{AttemptRef: o.AttemptRef, Phase: protocol.PhaseRunning}}
	before := counted.n.Load()
	sr.send(protocol.TypeStatus, "", protocol.Status{Slots: 2, Agents: agents, Accounts: accounts, Attempts: held})
	accounts = []protocol.AccountInfo{{ID: "acct_1", Agent: "claude", Label: "work", Kind: "login", State: protocol.AccountLimited,
		LimitedUntil: time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)}}
	sr.send(protocol.TypeStatus, "", protocol.Status{Slots: 2, Agents: agents, Accounts: accounts, Attempts: held, NotReady: "disk full"})
	waitFor(t, "A to show the runner not ready again", func() bool { return shows(view(a), "disk full", 1) })
	if got := counted.n.Load() - before; got != 1 {
		t.Fatalf("two statuses, one changing the runner, made %d status writes; want 1", got)
	}
	if vs := a.accounts(a.admin); len(vs) != 1 || vs[0].State != protocol.AccountLimited || !vs[0].Connected {
		t.Fatalf("hub A's accounts: %+v", vs)
	}

	// Gone from B: A shows it offline, with nothing it reported.
	sr.ws.CloseNow()
	waitFor(t, "B releases the runner", func() bool { return a.holder(w.RunnerID) == "" })
	if v := view(a); v.Connected || v.Agents != nil || v.NotReady != "" {
		t.Fatalf("A shows the runner that left as %+v", v)
	}
}
