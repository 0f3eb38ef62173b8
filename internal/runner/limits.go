package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"drover/internal/accounts"
	"drover/internal/agent"
	"drover/internal/fsutil"
	"drover/internal/protocol"
)

// Limits bound what a runner spends, enforced by the runner itself (0: no
// bound). At JobsPerHour or SpendPerDay it declines offers and reports
// itself not ready with the limit and when it resets; TurnsPerJob stops a
// running attempt that takes more turns (limit_turns), its work published.
// An account's own limits work alike, but an account at one sits out
// (limited) instead of the runner.
type Limits = accounts.Limits

// ledgerFile holds the counters of the hourly and daily limits, so that a
// restart does not reset them.
const ledgerFile = "limits.json"

// ledgers are the runner's counts and each account's; under Runner.mu.
type ledgers struct {
	Runner   ledger             `json:"runner"`
	Accounts map[string]*ledger `json:"accounts,omitempty"`
}

// ledger is what one set of limits counts.
type ledger struct {
	Starts []time.Time `json:"starts"`    // attempts taken within the last hour
	Day    string      `json:"day"`       // the UTC day of Spent (2006-01-02)
	Spent  float64     `json:"spent_usd"` // reported cost on Day
}

func loadLedger(home string) (ledgers, error) {
	var l ledgers
	b, err := os.ReadFile(filepath.Join(home, ledgerFile))
	if errors.Is(err, fs.ErrNotExist) {
		return l, nil
	}
	if err != nil {
		return l, fmt.Errorf("read the runner's spend counters: %w", err)
	}
	if err := json.Unmarshal(b, &l); err != nil {
		return l, fmt.Errorf("read the runner's spend counters %s: %w (remove it to start counting afresh)", filepath.Join(home, ledgerFile), err)
	}
	return l, nil
}

// prune forgets what no longer counts at now.
func (l *ledger) prune(now time.Time) {
	keep := l.Starts[:0]
	for _, t := range l.Starts {
		if now.Sub(t) < time.Hour {
			keep = append(keep, t)
		}
	}
	l.Starts = keep
	if day := now.UTC().Format(time.DateOnly); l.Day != day {
		l.Day, l.Spent = day, 0
	}
}

// limited says which limit the runner is at, if any, and when it resets.
func (l *ledger) limited(lim Limits, now time.Time) (why string, until time.Time) {
	l.prune(now)
	if n := lim.JobsPerHour; n > 0 && len(l.Starts) >= n {
		until = l.Starts[len(l.Starts)-n].Add(time.Hour)
		return fmt.Sprintf("at its limit of %d jobs per hour (--max-jobs-per-hour) until %s", n, until.UTC().Format(time.TimeOnly+" UTC")), until
	}
	if lim.SpendPerDay > 0 && l.Spent >= lim.SpendPerDay {
		d := now.UTC()
		until = time.Date(d.Year(), d.Month(), d.Day()+1, 0, 0, 0, 0, time.UTC)
		return fmt.Sprintf("at its limit of $%.2f per day (--max-spend-per-day, $%.2f spent) until %s", lim.SpendPerDay, l.Spent, until.Format(time.DateTime+" UTC")), until
	}
	return "", time.Time{}
}

// saveLedgerLocked writes the counters; a failure is logged, not fatal:
// the limits still hold in memory.
func (r *Runner) saveLedgerLocked() {
	b, err := json.Marshal(r.spend)
	if err == nil {
		err = fsutil.WriteFileAtomic(filepath.Join(r.cfg.Home, ledgerFile), b)
	}
	if err != nil {
		r.log.Error("keep the runner's spend counters", "err", err)
	}
}

// notReadyLocked is why the runner takes no offers though connected: its
// disk, else a spend limit ("": ready). A limit re-arms the timer that
// reports the runner ready again when it resets.
func (r *Runner) notReadyLocked() string {
	if r.notReady != "" {
		return r.notReady
	}
	why, until := r.spend.Runner.limited(r.cfg.Limits, r.now())
	if why != "" && (r.spendTimer == nil || !r.spendUntil.Equal(until)) {
		if r.spendTimer != nil {
			r.spendTimer.Stop()
		}
		r.spendUntil = until
		r.spendTimer = time.AfterFunc(until.Sub(r.now())+10*time.Millisecond, r.markDirty)
	}
	return clip(why, protocol.MaxNotReady)
}

// countStartLocked counts an attempt taken for JobsPerHour.
func (r *Runner) countStartLocked() {
	if r.cfg.Limits.JobsPerHour == 0 {
		return
	}
	r.spend.Runner.prune(r.now())
	r.spend.Runner.Starts = append(r.spend.Runner.Starts, r.now().UTC())
	r.saveLedgerLocked()
}

// uncountStartLocked gives back the last start (an accept the hub refused).
func (r *Runner) uncountStartLocked() {
	l := &r.spend.Runner
	if r.cfg.Limits.JobsPerHour == 0 || len(l.Starts) == 0 {
		return
	}
	l.Starts = l.Starts[:len(l.Starts)-1]
	r.saveLedgerLocked()
	r.markDirtyLocked()
}

// countSpend adds what an attempt's agent reported it cost.
func (r *Runner) countSpend(u *protocol.Usage) {
	if u == nil || u.CostUSD <= 0 || r.cfg.Limits.SpendPerDay == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spend.Runner.prune(r.now())
	r.spend.Runner.Spent += u.CostUSD
	r.saveLedgerLocked()
	r.markDirtyLocked()
}

// errTurns is the cause of an attempt stopped by Limits.TurnsPerJob.
var errTurns = errors.New("the runner's turn limit")

// turnLimit counts the model turns an attempt's agent reports and stops
// the attempt, with the agent's grace, on the first beyond TurnsPerJob
// (nil without that limit). Agents that report no turns are not bounded.
func (r *Runner) turnLimit(a *attempt, out io.Writer) agent.Events {
	a.turnMax.Store(int64(r.cfg.Limits.TurnsPerJob)) // its account's may lower it
	var mu sync.Mutex
	seen := map[string]bool{}
	n := 0
	return func(e agent.Event) {
		max := int(a.turnMax.Load())
		if e.Kind != agent.EventTurn || max == 0 {
			return
		}
		mu.Lock()
		defer mu.Unlock()
		if e.Turn != "" {
			if seen[e.Turn] {
				return
			}
			seen[e.Turn] = true
		}
		if n++; n == max+1 {
			fmt.Fprintf(out, "drover: the agent took turn %d; the limit is %d per job (--max-turns of the runner or its account): stopping it\n", n, max)
			a.cancel(fmt.Errorf("%w: stopped at turn %d, the limit is %d per job (--max-turns of the runner or its account)", errTurns, n, max))
		}
	}
}

// accountLimits applies acct's own limits to an attempt about to run under
// it: its turn limit if lower, and a start counted; an account reaching its
// hourly limit sits out until it resets.
func (r *Runner) accountLimits(a *attempt, acct accounts.Account) {
	if n := int64(acct.Limits.TurnsPerJob); n > 0 && (a.turnMax.Load() == 0 || n < a.turnMax.Load()) {
		a.turnMax.Store(n)
	}
	r.countAccount(acct, true, 0)
}

// countAccount counts a start or a reported cost against acct's own
// limits. An account at one sits out until it resets, as it would for its
// provider's limit (SetLimited): the hub sees it limited until then.
func (r *Runner) countAccount(acct accounts.Account, start bool, cost float64) {
	lim := acct.Limits
	if lim.JobsPerHour == 0 && lim.SpendPerDay == 0 {
		return
	}
	r.mu.Lock()
	if r.spend.Accounts == nil {
		r.spend.Accounts = map[string]*ledger{}
	}
	l := r.spend.Accounts[acct.ID]
	if l == nil {
		l = &ledger{}
		r.spend.Accounts[acct.ID] = l
	}
	now := r.now()
	l.prune(now)
	if start && lim.JobsPerHour > 0 {
		l.Starts = append(l.Starts, now.UTC())
	}
	if cost > 0 {
		l.Spent += cost
	}
	why, until := l.limited(lim, now)
	r.saveLedgerLocked()
	r.mu.Unlock()
	if why == "" {
		return
	}
	if err := r.accts.SetLimited(acct.ID, until, "account "+why); err != nil {
		r.log.Error("record account spend limit", "account", acct.ID, "err", err)
	}
	r.log.Info("account at its spend limit", "account", acct.ID, "why", why)
	r.markDirty()
}
