package chaos

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"time"

	"drover/internal/hub"
	"drover/internal/job"
	"drover/internal/runner"
	"drover/internal/store"
)

// Rules the checker holds a campaign to.
const (
	RuleSubmittedOnce = "acknowledged submission exists exactly once"
	RuleRunOnce       = "no second launch unless retried or released"
	RuleLogExact      = "completed log is byte-exact"
	RuleNothingLeft   = "no attempt active after its job ended"
	RuleUnknownKilled = "every unknown is explained by a killed (or stopped) runner"
	RuleNoFailure     = "no job fails (the campaign's jobs always exit 0) but for a disk the campaign filled"
	RuleSettled       = "every job ends once faults stop"
)

// Violation is one broken promise.
type Violation struct {
	Rule   string
	Job    string
	Detail string
}

func (v Violation) String() string { return fmt.Sprintf("%s: job %s: %s", v.Rule, v.Job, v.Detail) }

// Result is what a campaign did and what the checker found.
type Result struct {
	Seed       uint64
	Planned    int
	Acked      int
	Unacked    int // submissions the hub never answered (unkeyed ones are tried once)
	Keyed      int
	Jobs       int // jobs in the hub's store
	Outcomes   map[job.State]int
	Launched   int // attempts claimed in the runners' journals
	Relaunched int // jobs launched again after a retry or a release
	Injected   map[string]int
	Wall       time.Duration // setup to settled
	Faulting   time.Duration
	Stuck      []string // jobs not ended when Settle ran out
	Violations []Violation
}

// PerMinute is completed jobs per minute of the campaign's wall time.
func (r *Result) PerMinute() float64 {
	if r.Wall <= 0 {
		return 0
	}
	return float64(r.Outcomes[job.Completed]) / r.Wall.Minutes()
}

// OK reports whether the checker found nothing.
func (r *Result) OK() bool { return len(r.Violations) == 0 && len(r.Stuck) == 0 }

// facts is what the checker reads: the hub's store and the runners'
// journals, after every process stopped.
type facts struct {
	jobs     []store.Job
	attempts map[string][]store.Attempt // job id → attempts
	reruns   map[string]int             // job id → retried or restarted events
	logs     map[string][]byte          // attempt id → log, for completed attempts
	runners  map[string]string          // runner id → name
	claims   map[string][]string        // attempt id → names of the runners that claimed it
	held     map[string]string          // attempt id → the runner whose journal still holds it
}

func (c *campaign) readFacts(ctx context.Context) (*facts, error) {
	st, err := hub.OpenStore(ctx, c.hubs[0].dir, c.hubs[0].db)
	if err != nil {
		return nil, fmt.Errorf("open the hub's store: %w", err)
	}
	defer st.Close()
	f := &facts{attempts: map[string][]store.Attempt{}, reruns: map[string]int{}, logs: map[string][]byte{},
		runners: map[string]string{}, claims: map[string][]string{}, held: map[string]string{}}
	err = st.Read(ctx, func(tx store.Tx) error {
		rs, err := tx.Runners()
		if err != nil {
			return err
		}
		for _, r := range rs {
			f.runners[r.ID] = r.Name
		}
		for _, s := range job.States {
			js, err := tx.Jobs(store.JobFilter{State: s, Limit: maxListed})
			if err != nil {
				return err
			}
			if len(js) >= maxListed {
				return fmt.Errorf("over %d %s jobs: more than the checker lists", maxListed, s)
			}
			f.jobs = append(f.jobs, js...)
		}
		for _, j := range f.jobs {
			as, err := tx.Attempts(j.ID)
			if err != nil {
				return err
			}
			f.attempts[j.ID] = as
			evs, err := tx.Events(j.ID, 0, 0)
			if err != nil {
				return err
			}
			for _, e := range evs {
				if e.Kind == "retried" || e.Kind == "restarted" {
					f.reruns[j.ID]++
				}
			}
			for _, a := range as {
				if a.State != job.AttemptCompleted {
					continue
				}
				var b bytes.Buffer
				for {
					chunk, err := tx.ReadLog(a.ID, int64(b.Len()), 1<<20)
					if err != nil {
						return fmt.Errorf("read the log of %s: %w", a.ID, err)
					}
					if len(chunk) == 0 {
						break
					}
					b.Write(chunk)
				}
				f.logs[a.ID] = b.Bytes()
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the hub's store: %w", err)
	}
	for _, r := range c.runners {
		cs, err := runner.Claims(r.home)
		if err != nil {
			return nil, fmt.Errorf("read the journal of %s: %w", r.name, err)
		}
		for _, cl := range cs {
			f.claims[cl.Attempt] = append(f.claims[cl.Attempt], r.name)
		}
		held, err := runner.Held(r.home)
		if err != nil {
			return nil, fmt.Errorf("read the journal of %s: %w", r.name, err)
		}
		for _, a := range held {
			f.held[a] = r.name
		}
	}
	return f, nil
}

// maxListed is the store's cap on one listing; a campaign stays under it
// per state.
const maxListed = 1000

// check reads what the campaign left and holds it to the rules.
func (c *campaign) check(ctx context.Context) (*Result, error) {
	f, err := c.readFacts(ctx)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	res := &Result{Seed: c.o.Seed, Planned: len(c.plan.jobs), Jobs: len(f.jobs), Outcomes: map[job.State]int{}, Injected: map[string]int{}}
	for k, v := range c.injected {
		res.Injected[k] = v
	}
	res.Violations = checkFacts(f, c.plan.jobs, c.subs, c.kills, c.fills)
	for _, s := range c.subs {
		if s.Acked {
			res.Acked++
		} else {
			res.Unacked++
		}
		if s.Spec.Keyed {
			res.Keyed++
		}
	}
	for _, j := range f.jobs {
		res.Outcomes[j.State]++
		n := 0
		for _, a := range f.attempts[j.ID] {
			if len(f.claims[a.ID]) > 0 {
				n++
			}
		}
		res.Launched += n
		if n > 1 {
			res.Relaunched++
		}
	}
	return res, nil
}

// checkFacts is the checker proper, apart from reading, so that a test can
// feed it a broken history.
func checkFacts(f *facts, specs []jobSpec, subs []submission, kills, fills []kill) []Violation {
	var out []Violation
	bad := func(rule, jobID, format string, args ...any) {
		out = append(out, Violation{Rule: rule, Job: jobID, Detail: fmt.Sprintf(format, args...)})
	}
	byTag := map[string][]store.Job{}
	specOf := map[string]jobSpec{}
	for _, s := range specs {
		specOf[s.Tag] = s
	}
	for _, j := range f.jobs {
		tag := tagOf(j.Args)
		if _, ok := specOf[tag]; !ok {
			bad(RuleSubmittedOnce, j.ID, "a job the campaign never submitted (argv %q)", j.Args)
			continue
		}
		byTag[tag] = append(byTag[tag], j)
	}
	for _, s := range subs {
		js := byTag[s.Spec.Tag]
		switch {
		case len(js) > 1:
			bad(RuleSubmittedOnce, js[0].ID, "job %d (keyed %v) exists %d times", s.Spec.Index, s.Spec.Keyed, len(js))
		case s.Acked && len(js) == 0:
			bad(RuleSubmittedOnce, s.JobID, "job %d was acknowledged but is not in the store", s.Spec.Index)
		case s.Acked && js[0].ID != s.JobID:
			bad(RuleSubmittedOnce, s.JobID, "job %d was acknowledged as %s but the store has %s", s.Spec.Index, s.JobID, js[0].ID)
		case s.Acked && s.Spec.Keyed && js[0].Key != s.Spec.key():
			bad(RuleSubmittedOnce, s.JobID, "job %d lost its key: %q", s.Spec.Index, js[0].Key)
		}
	}
	for _, j := range f.jobs {
		spec, ok := specOf[tagOf(j.Args)]
		if !ok {
			continue
		}
		as := f.attempts[j.ID]
		launched, released := 0, 0
		for _, a := range as {
			who := f.claims[a.ID]
			if len(who) == 0 {
				continue
			}
			launched++
			if a.State == job.AttemptReleased {
				released++
			}
			if len(who) > 1 || who[0] != f.runners[a.RunnerID] {
				bad(RuleRunOnce, j.ID, "attempt %d (of %s) claimed by %v", a.Epoch, f.runners[a.RunnerID], who)
			}
		}
		if allowed := 1 + f.reruns[j.ID] + released; launched > allowed {
			bad(RuleRunOnce, j.ID, "launched %d times with %d retries and %d releases: %s", launched, f.reruns[j.ID], released, attemptList(as, f))
		}
		if j.State.Terminal() {
			for _, a := range as {
				if a.State.Active() {
					bad(RuleNothingLeft, j.ID, "job is %s but attempt %d is still %s", j.State, a.Epoch, a.State)
				}
				if who, ok := f.held[a.ID]; ok {
					bad(RuleNothingLeft, j.ID, "job is %s but the journal of %s, stopped, still holds attempt %d (%s at the hub)", j.State, who, a.Epoch, a.State)
				}
			}
		}
		switch j.State {
		case job.Completed:
			completed := 0
			for _, a := range as {
				if a.State != job.AttemptCompleted {
					continue
				}
				completed++
				want, got := spec.expected(), f.logs[a.ID]
				sum := sha256.Sum256(want)
				if !bytes.Equal(got, want) {
					bad(RuleLogExact, j.ID, "attempt %d log differs: %s", a.Epoch, firstDiff(got, want))
				} else if a.LogSize != int64(len(want)) || a.LogSHA256 != hex.EncodeToString(sum[:]) {
					bad(RuleLogExact, j.ID, "attempt %d recorded size %d sha256 %s; the log is %d bytes", a.Epoch, a.LogSize, a.LogSHA256, len(want))
				}
			}
			if completed != 1 {
				bad(RuleRunOnce, j.ID, "%d completed attempts", completed)
			}
		case job.Failed:
			// A runner that could not keep an attempt's output fails it
			// (runner_disk_full) rather than report what it lost: the one
			// failure the campaign causes, when it filled that runner's disk.
			if len(as) == 0 || j.Reason != job.ReasonRunnerDiskFull || !killedDuring(fills, f.runners[as[len(as)-1].RunnerID], as[len(as)-1]) {
				bad(RuleNoFailure, j.ID, "failed: %s; %s", j.Reason, attemptList(as, f))
			}
		}
		for _, a := range as {
			if a.State == job.AttemptUnknown && !killedDuring(kills, f.runners[a.RunnerID], a) {
				bad(RuleUnknownKilled, j.ID, "attempt %d on %s is unknown (%s: %s) with no kill of its runner while it ran", a.Epoch, f.runners[a.RunnerID], a.Reason, a.Message)
			}
		}
	}
	return out
}

// killedDuring reports whether the runner was killed, or stopped, between
// the attempt's offer and its end (with a second of slack for the clocks
// of the reads).
func killedDuring(kills []kill, name string, a store.Attempt) bool {
	end := time.Now()
	if a.FinishedAt != nil {
		end = *a.FinishedAt
	}
	return slices.ContainsFunc(kills, func(k kill) bool {
		until := k.Until
		if until.IsZero() {
			until = k.At
		}
		return k.Runner == name && !until.Before(a.OfferedAt.Add(-time.Second)) && !k.At.After(end.Add(time.Second))
	})
}

func attemptList(as []store.Attempt, f *facts) string {
	var b bytes.Buffer
	for i, a := range as {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "#%d %s on %s (%s; claimed by %v)", a.Epoch, a.State, f.runners[a.RunnerID], a.Reason, f.claims[a.ID])
	}
	return b.String()
}

// firstDiff describes where got first differs from want.
func firstDiff(got, want []byte) string {
	n := 0
	for n < len(got) && n < len(want) && got[n] == want[n] {
		n++
	}
	excerpt := func(b []byte) string {
		end := min(n+40, len(b))
		return fmt.Sprintf("%q", b[n:end])
	}
	return fmt.Sprintf("%d bytes, want %d; first difference at byte %d: got %s, want %s", len(got), len(want), n, excerpt(got), excerpt(want))
}
