package chaos

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"testing"
	"time"

	"drover/internal/job"
	"drover/internal/store"
)

// history is a small campaign outcome to break in one way at a time.
type history struct {
	specs []jobSpec
	subs  []submission
	kills []kill
	fills []kill
	f     *facts
}

// goodHistory: job 0 completed on r1; job 1 unknown after r2 was killed,
// retried, and completed on r1.
func goodHistory() *history {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	at := func(s int) *time.Time { v := t0.Add(time.Duration(s) * time.Second); return &v }
	s0, s1 := newJobSpec(7, 0), newJobSpec(7, 1)
	log0, log1 := s0.expected(), s1.expected()
	hash := func(b []byte) string { s := sha256.Sum256(b); return hex.EncodeToString(s[:]) }
	h := &history{specs: []jobSpec{s0, s1}}
	h.subs = []submission{{Spec: s0, Acked: true, JobID: "j0"}, {Spec: s1, Acked: true, JobID: "j1"}}
	h.kills = []kill{{Runner: "r2", At: *at(12)}}
	h.f = &facts{
		jobs: []store.Job{
			{ID: "j0", State: job.Completed, Args: s0.argv(), Key: keyOf(s0)},
			{ID: "j1", State: job.Completed, Args: s1.argv(), Key: keyOf(s1)},
		},
		attempts: map[string][]store.Attempt{
			"j0": {{ID: "a0", JobID: "j0", Epoch: 1, RunnerID: "R1", State: job.AttemptCompleted, OfferedAt: t0, FinishedAt: at(5), LogSize: int64(len(log0)), LogSHA256: hash(log0)}},
			"j1": {
				{ID: "a1", JobID: "j1", Epoch: 1, RunnerID: "R2", State: job.AttemptUnknown, OfferedAt: *at(10), FinishedAt: at(25)},
				{ID: "a2", JobID: "j1", Epoch: 2, RunnerID: "R1", State: job.AttemptCompleted, OfferedAt: *at(30), FinishedAt: at(35), LogSize: int64(len(log1)), LogSHA256: hash(log1)},
			},
		},
		reruns:  map[string]int{"j1": 1},
		logs:    map[string][]byte{"a0": log0, "a2": log1},
		runners: map[string]string{"R1": "r1", "R2": "r2"},
		claims:  map[string][]string{"a0": {"r1"}, "a1": {"r2"}, "a2": {"r1"}},
		held:    map[string]string{},
	}
	return h
}

func keyOf(s jobSpec) string {
	if s.Keyed {
		return s.key()
	}
	return ""
}

func (h *history) check() []Violation { return checkFacts(h.f, h.specs, h.subs, h.kills, h.fills) }

func TestCheckerHoldsACleanHistory(t *testing.T) {
	if vs := goodHistory().check(); len(vs) != 0 {
		t.Fatalf("violations in a clean history: %v", vs)
	}
}

// TestCheckerFindsEachBrokenPromise: every rule is caught when broken.
func TestCheckerFindsEachBrokenPromise(t *testing.T) {
	for _, tc := range []struct {
		name   string
		rule   string
		break_ func(h *history)
	}{
		{"a second job of one submission", RuleSubmittedOnce, func(h *history) {
			h.f.jobs = append(h.f.jobs, store.Job{ID: "j0b", State: job.Queued, Args: h.specs[0].argv()})
		}},
		{"an acknowledged job missing", RuleSubmittedOnce, func(h *history) { h.f.jobs = h.f.jobs[1:] }},
		{"a job nobody submitted", RuleSubmittedOnce, func(h *history) {
			h.f.jobs = append(h.f.jobs, store.Job{ID: "jx", State: job.Queued, Args: newJobSpec(7, 9).argv()})
		}},
		{"a second launch without a retry", RuleRunOnce, func(h *history) { h.f.reruns = map[string]int{} }},
		{"an attempt claimed by two runners", RuleRunOnce, func(h *history) { h.f.claims["a0"] = []string{"r1", "r2"} }},
		{"a log missing its last byte", RuleLogExact, func(h *history) { h.f.logs["a0"] = h.f.logs["a0"][:len(h.f.logs["a0"])-1] }},
		{"an attempt running after its job ended", RuleNothingLeft, func(h *history) {
			h.f.attempts["j0"] = append(h.f.attempts["j0"], store.Attempt{ID: "a9", JobID: "j0", Epoch: 2, RunnerID: "R2", State: job.AttemptRunning})
		}},
		{"an attempt its runner still holds after its job ended", RuleNothingLeft, func(h *history) { h.f.held["a1"] = "r2" }},
		{"an unknown with no kill", RuleUnknownKilled, func(h *history) { h.kills = nil }},
		{"an unknown with a kill of another runner", RuleUnknownKilled, func(h *history) { h.kills[0].Runner = "r1" }},
		{"an unknown with a kill after it ended", RuleUnknownKilled, func(h *history) { h.kills[0].At = h.kills[0].At.Add(time.Minute) }},
		{"an unknown with a pause that ended before its offer", RuleUnknownKilled, func(h *history) {
			h.kills[0].At, h.kills[0].Until = h.kills[0].At.Add(-time.Minute), h.kills[0].At.Add(-30*time.Second)
		}},
		{"a failed job", RuleNoFailure, func(h *history) { h.f.jobs[0].State = job.Failed }},
		{"a runner_disk_full with no fill of its disk", RuleNoFailure, func(h *history) { diskFullJob0(h, "r2") }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			h := goodHistory()
			tc.break_(h)
			vs := h.check()
			if !slices.ContainsFunc(vs, func(v Violation) bool { return v.Rule == tc.rule }) {
				t.Fatalf("want a violation of %q, got %v", tc.rule, vs)
			}
		})
	}
}

// TestPauseExplainsAnUnknown: a runner stopped (SIGSTOP) from before the
// attempt's offer until after it explains the attempt's unknown outcome.
func TestPauseExplainsAnUnknown(t *testing.T) {
	h := goodHistory()
	at := h.kills[0].At
	h.kills[0].At, h.kills[0].Until = at.Add(-5*time.Second), at.Add(20*time.Second)
	if vs := h.check(); len(vs) != 0 {
		t.Fatalf("violations: %v", vs)
	}
}

// diskFullJob0 makes job 0 fail runner_disk_full on r1 while the campaign
// held the disk of runner fillOf full.
func diskFullJob0(h *history, fillOf string) {
	a := &h.f.attempts["j0"][0]
	h.f.jobs[0].State, h.f.jobs[0].Reason = job.Failed, job.ReasonRunnerDiskFull
	a.State, a.Reason = job.AttemptFailed, job.ReasonRunnerDiskFull
	h.fills = []kill{{Runner: fillOf, At: a.OfferedAt.Add(time.Second), Until: a.OfferedAt.Add(3 * time.Second)}}
}

// TestFillExplainsARunnerDiskFull: the one failure a campaign causes is
// that of an attempt whose runner's disk it filled.
func TestFillExplainsARunnerDiskFull(t *testing.T) {
	h := goodHistory()
	diskFullJob0(h, "r1")
	if vs := h.check(); len(vs) != 0 {
		t.Fatalf("violations: %v", vs)
	}
}

func TestPlanComesFromTheSeed(t *testing.T) {
	o := Options{Binary: "drover", Dir: t.TempDir(), Seed: 42, Jobs: 30, Duration: 40 * time.Second}
	if err := o.normalize(); err != nil {
		t.Fatal(err)
	}
	a, b := makePlan(o), makePlan(o)
	if !slices.Equal(a.events, b.events) || !slices.Equal(a.submit, b.submit) {
		t.Fatal("two plans of one seed differ")
	}
	o.Seed = 43
	if c := makePlan(o); slices.Equal(a.events, c.events) {
		t.Fatal("two seeds made the same plan")
	}
	for _, e := range a.events {
		if e.At >= o.Duration {
			t.Fatalf("fault at %s, after the %s of faults", e.At, o.Duration)
		}
	}
}

func TestFaultsAreChecked(t *testing.T) {
	o := Options{Binary: "drover", Dir: t.TempDir()}
	if err := o.normalize(); err != nil {
		t.Fatal(err)
	}
	if slices.Contains(o.Faults, FaultDisk) {
		t.Fatal("the disk fault is in the default set")
	}
	o.Faults = []string{FaultCut, FaultDisk}
	if err := o.normalize(); err != nil {
		t.Fatalf("the disk fault asked for: %v", err)
	}
	o.Faults = []string{"flood"}
	if err := o.normalize(); err == nil {
		t.Fatal("an unknown fault was accepted")
	}
}

// TestOneFaultAtATimePerRunner: two faults the executor reaches together
// for one runner (a late executor bunches them) do not both take it; the
// second used to restart a second process on the same home, orphaning one.
func TestOneFaultAtATimePerRunner(t *testing.T) {
	c := &campaign{runners: []*runnerProc{{name: "r", p: &proc{exited: make(chan struct{})}}}}
	if _, p := c.take(0); p == nil {
		t.Fatal("a running runner could not be taken")
	}
	r, p := c.take(0)
	if p != nil {
		t.Fatal("a runner was taken by two faults at once")
	}
	c.release(r)
	if _, p := c.take(0); p == nil {
		t.Fatal("a released runner could not be taken again")
	}
}

// TestHubFaultsSpreadOverTheHubs: with three hubs the plan aims hub and
// frame faults at each of them; several hubs need a shared database.
func TestHubFaultsSpreadOverTheHubs(t *testing.T) {
	o := Options{Binary: "drover", Dir: t.TempDir(), Seed: 20261201, Jobs: 40, Duration: 35 * time.Second, DB: "postgres://db/x", Hubs: 3}
	if err := o.normalize(); err != nil {
		t.Fatal(err)
	}
	hit := map[int]bool{}
	for _, e := range makePlan(o).events {
		if e.Fault == FaultHubKill || e.Fault == FaultHubPause {
			if e.Target < 0 || e.Target >= o.Hubs {
				t.Fatalf("%s aimed at hub %d of %d", e.Fault, e.Target, o.Hubs)
			}
			hit[e.Target] = true
		}
	}
	if len(hit) < 2 {
		t.Fatalf("hub faults hit hubs %v; want them spread", hit)
	}
	o = Options{Binary: "drover", Dir: t.TempDir(), Hubs: 3}
	if err := o.normalize(); err == nil {
		t.Fatal("three hubs on SQLite were accepted")
	}
}
