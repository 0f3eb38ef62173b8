package runner

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"drover/internal/accounts"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/sandbox/sandboxtest"
	"drover/internal/testkit/fakemodel"
)

// clock is a runner clock the test moves forward.
type clock struct{ off atomic.Int64 }

func (c *clock) now() time.Time          { return time.Now().Add(time.Duration(c.off.Load())) }
func (c *clock) advance(d time.Duration) { c.off.Add(int64(d)) }

func (c *clock) use(r *Runner) { r.now = c.now }

// waitNotReady waits for a status whose not_ready matches.
func waitNotReady(t *testing.T, h *fakeHub, what string, match func(string) bool) protocol.Status {
	t.Helper()
	var st protocol.Status
	sandboxtest.WaitFor(t, what, func() bool {
		var ok bool
		st, ok = h.lastStatus()
		return ok && match(st.NotReady)
	})
	return st
}

// declined offers ref and returns the decline's reason.
func declined(t *testing.T, h *fakeHub, ref protocol.AttemptRef) string {
	t.Helper()
	h.offer(ref, shSpec("echo should not run"))
	g := h.waitFrame("decline of "+ref.Attempt, func(g got) bool {
		var d protocol.Decline
		return g.f.Type == protocol.TypeDecline && g.f.Decode(&d) == nil && d.Attempt == ref.Attempt
	})
	var d protocol.Decline
	must(t, g.f.Decode(&d))
	return d.Reason
}

// --max-jobs-per-hour: the runner at its limit declines offers and says
// until when; the count survives a restart; an hour after the first take
// it runs again.
func TestJobsPerHourLimit(t *testing.T) {
	h := newFakeHub(t)
	var clk clock
	lim := func(c *Config) { c.Limits.JobsPerHour = 1 }
	tr := startRunner(t, h, "", lim, clk.use)
	h.waitConn(0)
	first := newRef()
	h.offer(first, shSpec("echo one"))
	wantOutcome(t, h.waitFinish(first.Attempt), job.AttemptCompleted, job.ReasonExited, intp(0))
	atLimit := func(s string) bool { return strings.Contains(s, "1 jobs per hour") && strings.Contains(s, "until") }
	waitNotReady(t, h, "the limit reported", atLimit)
	if why := declined(t, h, newRef()); !atLimit(why) {
		t.Fatalf("declined for %q, want the hourly limit", why)
	}

	// A restart keeps the count: the hello says so already.
	must(t, tr.stop(t))
	tr = startRunner(t, h, tr.home, lim, clk.use)
	c := h.waitConn(1)
	var hello protocol.Hello
	must(t, h.waitFrame("hello 1", func(g got) bool { return g.n == c.n && g.f.Type == protocol.TypeHello }).f.Decode(&hello))
	if !atLimit(hello.NotReady) {
		t.Fatalf("hello after restart: not_ready %q, want the hourly limit", hello.NotReady)
	}
	if why := declined(t, h, newRef()); !atLimit(why) {
		t.Fatalf("after restart declined for %q", why)
	}

	clk.advance(time.Hour + time.Minute)
	tr.markDirty() // what the reset timer does an hour on
	waitNotReady(t, h, "ready again", func(s string) bool { return s == "" })
	again := newRef()
	h.offer(again, shSpec("echo two"))
	wantOutcome(t, h.waitFinish(again.Attempt), job.AttemptCompleted, job.ReasonExited, intp(0))
}

// --max-spend-per-day: reported cost counts against the day (persisted);
// at the limit the runner declines; the next UTC day it is ready again.
func TestSpendPerDayLimit(t *testing.T) {
	h := newFakeHub(t)
	var clk clock
	home := filepath.Join(t.TempDir(), "home")
	must(t, SaveLogin(home, Login{Hub: h.srv.URL, Name: "r1", Token: h.token}))
	// Spent earlier today, by a run before a restart.
	b, err := json.Marshal(ledgers{Runner: ledger{Day: time.Now().UTC().Format(time.DateOnly), Spent: 1.5}})
	must(t, err)
	must(t, os.WriteFile(filepath.Join(home, ledgerFile), b, 0o600))
	tr := startRunner(t, h, home, func(c *Config) { c.Limits.SpendPerDay = 2 }, clk.use)
	h.waitConn(0)
	ran := newRef()
	h.offer(ran, shSpec("echo under the limit"))
	h.waitFinish(ran.Attempt)

	tr.countSpend(&protocol.Usage{CostUSD: 0.75}) // what an agent's finish reports
	atLimit := func(s string) bool { return strings.Contains(s, "$2.00 per day") && strings.Contains(s, "$2.25 spent") }
	waitNotReady(t, h, "the daily limit", atLimit)
	if why := declined(t, h, newRef()); !atLimit(why) {
		t.Fatalf("declined for %q", why)
	}
	saved, err := loadLedger(home)
	must(t, err)
	if saved.Runner.Spent != 2.25 {
		t.Fatalf("saved spend %v, want 2.25", saved.Runner.Spent)
	}

	clk.advance(24 * time.Hour)
	tr.markDirty()
	waitNotReady(t, h, "ready the next day", func(s string) bool { return s == "" })
}

// --max-turns: a native agent's attempt that takes more model turns than
// the runner allows is stopped and fails limit_turns; the model is not
// asked again after the turn that crossed it.
func TestTurnsPerJobLimit(t *testing.T) {
	h := newFakeHub(t)
	const key = "sk-test-turns"
	var turns []fakemodel.Turn
	for range 6 {
		turns = append(turns, fakemodel.CallTool("run_command", map[string]any{"command": "echo step >> steps.txt"}))
	}
	fake := fakemodel.NewFakeAnthropic(t, append(turns, fakemodel.Text("Done.")), fakemodel.RequireKey(key))
	home := filepath.Join(t.TempDir(), "home")
	must(t, SaveLogin(home, Login{Hub: h.srv.URL, Name: "r1", Token: h.token}))
	s, err := accounts.Open(home)
	must(t, err)
	_, err = s.Add(accounts.Account{Agent: "native", Kind: accounts.KindAPIKey, Label: "main", Provider: "anthropic", BaseURL: fake.URL}, key)
	must(t, err)
	startRunner(t, h, home, func(c *Config) { c.Limits.TurnsPerJob = 2 })
	h.waitConn(0)
	ref := newRef()
	spec := protocol.JobSpec{Agent: "native", Args: []string{"append a step to steps.txt six times"}, Requester: "u", LogCap: 1 << 20}
	h.offer(ref, spec)
	fin := h.waitFinish(ref.Attempt)
	if fin.Outcome.State != job.AttemptFailed || fin.Outcome.Reason != job.ReasonLimitTurns || !strings.Contains(fin.Outcome.Message, "the limit is 2 per job") {
		t.Fatalf("outcome %+v, want failed limit_turns\nlog:\n%s", fin.Outcome, h.log(ref.Attempt))
	}
	if n := len(fake.Requests()); n != 3 {
		t.Fatalf("the model was asked %d times, want 3 (stopped at the third turn)\n%s", n, fake.Dump())
	}
	if !strings.Contains(string(h.log(ref.Attempt)), "--max-turns") {
		t.Fatalf("the log does not say why it stopped:\n%s", h.log(ref.Attempt))
	}
}

// nativeAccount adds a native account with limits to a fresh runner home
// for the fake model's turns.
func nativeAccount(t *testing.T, h *fakeHub, lim accounts.Limits, turns ...fakemodel.Turn) (home string, fake *fakemodel.FakeServer, acct accounts.Account) {
	t.Helper()
	const key = "sk-test-limits"
	fake = fakemodel.NewFakeAnthropic(t, turns, fakemodel.RequireKey(key))
	home = filepath.Join(t.TempDir(), "home")
	must(t, SaveLogin(home, Login{Hub: h.srv.URL, Name: "r1", Token: h.token}))
	s, err := accounts.Open(home)
	must(t, err)
	acct, err = s.Add(accounts.Account{Agent: "native", Kind: accounts.KindAPIKey, Label: "main", Provider: "anthropic", BaseURL: fake.URL}, key)
	must(t, err)
	if acct, err = s.SetLimits(acct.ID, lim); err != nil {
		t.Fatal(err)
	}
	return home, fake, acct
}

func nativeSpec(prompt string) protocol.JobSpec {
	return protocol.JobSpec{Agent: "native", Args: []string{prompt}, Requester: "u", LogCap: 1 << 20}
}

// An account's own limits: its turn limit stops an attempt under it
// (limit_turns), and at its hourly limit the account sits out (the hub sees
// it limited until the reset) while the runner stays ready for others.
func TestAccountLimits(t *testing.T) {
	h := newFakeHub(t)
	step := fakemodel.CallTool("run_command", map[string]any{"command": "echo step >> steps.txt"})
	home, fake, acct := nativeAccount(t, h, accounts.Limits{JobsPerHour: 1, TurnsPerJob: 1}, step, step, step, fakemodel.Text("Done."))
	startRunner(t, h, home, nil)
	h.waitConn(0)
	ref := newRef()
	h.offer(ref, nativeSpec("append steps"))
	fin := h.waitFinish(ref.Attempt)
	if fin.Outcome.Reason != job.ReasonLimitTurns || !strings.Contains(fin.Outcome.Message, "the limit is 1 per job") {
		t.Fatalf("outcome %+v, want limit_turns at the account's 1 turn\nlog:\n%s", fin.Outcome, h.log(ref.Attempt))
	}
	if n := len(fake.Requests()); n != 2 {
		t.Fatalf("the model was asked %d times, want 2", n)
	}
	var st protocol.Status
	sandboxtest.WaitFor(t, "the account limited", func() bool {
		st, _ = h.lastStatus()
		return len(st.Accounts) == 1 && st.Accounts[0].State == protocol.AccountLimited
	})
	if st.NotReady != "" || time.Until(st.Accounts[0].LimitedUntil) < 50*time.Minute {
		t.Fatalf("status %+v: want the runner ready and the account limited for about an hour", st)
	}
	next := newRef()
	h.offer(next, nativeSpec("again"))
	if fin := h.waitFinish(next.Attempt); fin.Outcome.State != job.AttemptReleased || fin.Outcome.Reason != job.ReasonLimited {
		t.Fatalf("outcome under the limited account %+v, want released limited", fin.Outcome)
	}
	saved, err := loadLedger(home)
	must(t, err)
	if l := saved.Accounts[acct.ID]; l == nil || len(l.Starts) != 1 {
		t.Fatalf("saved account counts %+v", saved.Accounts)
	}
}

// An account's daily spend: reported cost past its limit makes it sit out
// until the next UTC day.
func TestAccountSpendPerDayLimit(t *testing.T) {
	h := newFakeHub(t)
	home, _, acct := nativeAccount(t, h, accounts.Limits{SpendPerDay: 1})
	tr := startRunner(t, h, home, nil)
	h.waitConn(0)
	tr.countAccount(acct, false, 0.6)
	tr.countAccount(acct, false, 0.6) // what two finishes under it report
	got, err := tr.accts.Get(acct.ID)
	must(t, err)
	d := time.Now().UTC()
	midnight := time.Date(d.Year(), d.Month(), d.Day()+1, 0, 0, 0, 0, time.UTC)
	if !got.LimitedUntil.Equal(midnight) || !strings.Contains(got.LimitMessage, "$1.00 per day") {
		t.Fatalf("account limited until %v (%q), want %v for its daily spend", got.LimitedUntil, got.LimitMessage, midnight)
	}
}
