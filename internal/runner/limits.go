package runner

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"sync"
	"time"

	"drover/internal/agent"
	"drover/internal/fsutil"
	"drover/internal/protocol"
)

// Limits bound what a runner spends, enforced by the runner itself (0: no
// bound). At JobsPerHour or SpendPerDay it declines offers and reports
// itself not ready with the limit and when it resets; TurnsPerJob stops a
// running attempt that takes more turns (limit_turns), its work published.
type Limits struct {
	JobsPerHour int     // attempts taken in any hour
	TurnsPerJob int     // model turns of one attempt, where its agent reports them
	SpendPerDay float64 // USD of reported usage per UTC day
}

func (l Limits) check() error {
	if l.JobsPerHour < 0 || l.TurnsPerJob < 0 || l.SpendPerDay < 0 || math.IsNaN(l.SpendPerDay) || math.IsInf(l.SpendPerDay, 0) {
		return fmt.Errorf("spend limits must be 0 (none) or more: %+v", l)
	}
	return nil
}

// ledgerFile holds the counters of the hourly and daily limits, so that a
// restart does not reset them.
const ledgerFile = "limits.json"

// ledger is what the limits count; under Runner.mu.
type ledger struct {
	Starts []time.Time `json:"starts"`    // attempts taken within the last hour
	Day    string      `json:"day"`       // the UTC day of Spent (2006-01-02)
	Spent  float64     `json:"spent_usd"` // reported cost on Day
}

func loadLedger(home string) (ledger, error) {
	var l ledger
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
	why, until := r.spend.limited(r.cfg.Limits, r.now())
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
	r.spend.prune(r.now())
	r.spend.Starts = append(r.spend.Starts, r.now().UTC())
	r.saveLedgerLocked()
}

// uncountStartLocked gives back the last start (an accept the hub refused).
func (r *Runner) uncountStartLocked() {
	if r.cfg.Limits.JobsPerHour == 0 || len(r.spend.Starts) == 0 {
		return
	}
	r.spend.Starts = r.spend.Starts[:len(r.spend.Starts)-1]
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
	r.spend.prune(r.now())
	r.spend.Spent += u.CostUSD
	r.saveLedgerLocked()
	r.markDirtyLocked()
}

// errTurns is the cause of an attempt stopped by Limits.TurnsPerJob.
var errTurns = errors.New("the runner's turn limit")

// turnLimit counts the model turns an attempt's agent reports and stops
// the attempt, with the agent's grace, on the first beyond TurnsPerJob
// (nil without that limit). Agents that report no turns are not bounded.
func (r *Runner) turnLimit(a *attempt, out io.Writer) agent.Events {
	max := r.cfg.Limits.TurnsPerJob
	if max == 0 {
		return nil
	}
	var mu sync.Mutex
	seen := map[string]bool{}
	n := 0
	return func(e agent.Event) {
		if e.Kind != agent.EventTurn {
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
			fmt.Fprintf(out, "drover: the agent took turn %d; this runner allows %d per job (--max-turns): stopping it\n", n, max)
			a.cancel(fmt.Errorf("%w: stopped at turn %d, the runner allows %d per job (--max-turns)", errTurns, n, max))
		}
	}
}
