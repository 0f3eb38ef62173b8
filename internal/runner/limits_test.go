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
	b, err := json.Marshal(ledger{Day: time.Now().UTC().Format(time.DateOnly), Spent: 1.5})
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
	if saved.Spent != 2.25 {
		t.Fatalf("saved spend %v, want 2.25", saved.Spent)
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
	if fin.Outcome.State != job.AttemptFailed || fin.Outcome.Reason != job.ReasonLimitTurns || !strings.Contains(fin.Outcome.Message, "allows 2 per job") {
		t.Fatalf("outcome %+v, want failed limit_turns\nlog:\n%s", fin.Outcome, h.log(ref.Attempt))
	}
	if n := len(fake.Requests()); n != 3 {
		t.Fatalf("the model was asked %d times, want 3 (stopped at the third turn)\n%s", n, fake.Dump())
	}
	if !strings.Contains(string(h.log(ref.Attempt)), "--max-turns") {
		t.Fatalf("the log does not say why it stopped:\n%s", h.log(ref.Attempt))
	}
}
