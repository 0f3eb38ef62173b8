package job

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strings"
	"testing"
)

var update = flag.Bool("update", false, "rewrite docs/states.md from the transition table")

var events = []Event{EvOffer, EvAccept, EvDecline, EvOfferExpired, EvLeaseExpired, EvComplete, EvFail,
	EvCancelled, EvInterrupted, EvRelease, EvCancel, EvRetry, EvAsk, EvAnswer, EvRestart, EvExpire}

func TestNextFollowsTable(t *testing.T) {
	tests := []struct {
		from State
		ev   Event
		want State
		ok   bool
	}{
		{Queued, EvOffer, Offered, true},
		{Offered, EvAccept, Running, true},
		{Offered, EvOfferExpired, Queued, true},
		{Running, EvLeaseExpired, Unknown, true},
		{Running, EvRelease, Queued, true},
		{Running, EvCancel, Running, true},
		{Unknown, EvRetry, Queued, true},
		{Unknown, EvComplete, Completed, true},
		{Completed, EvRetry, Completed, false},
		{Queued, EvAccept, Queued, false},
		{Unknown, EvOffer, Unknown, false},
		{Unknown, EvCancel, Unknown, false},
		{Cancelled, EvCancel, Cancelled, false},
		{Running, EvAsk, Waiting, true},
		{Unknown, EvAsk, Waiting, true},
		{Waiting, EvAnswer, Queued, true},
		{Waiting, EvRestart, Queued, true},
		{Waiting, EvExpire, Failed, true},
		{Waiting, EvOffer, Waiting, false},
		{Waiting, EvAccept, Waiting, false},
		{Waiting, EvRetry, Waiting, false},
		{Queued, EvAnswer, Queued, false},
		{Offered, EvAsk, Offered, false},
		{Completed, EvRestart, Completed, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s+%s", tt.from, tt.ev), func(t *testing.T) {
			got, err := Next(tt.from, tt.ev)
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("Next(%s, %s) = %s, %v; want %s, ok=%v", tt.from, tt.ev, got, err, tt.want, tt.ok)
			}
		})
	}
}

// TestRandomWalks drives the machine with random events and checks the
// properties the rest of drover relies on.
func TestRandomWalks(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for walk := range 2000 {
		s := Queued
		runs := 0 // times the job entered Running since it was last queued by a retry
		for step := range 60 {
			e := events[rng.IntN(len(events))]
			n, err := Next(s, e)
			if err != nil {
				if n != s {
					t.Fatalf("walk %d step %d: refused %s+%s changed the state to %s", walk, step, s, e, n)
				}
				continue
			}
			if !n.Valid() {
				t.Fatalf("walk %d: %s+%s led to an unknown state %q", walk, s, e, n)
			}
			// Nothing leaves Completed.
			if s == Completed {
				t.Fatalf("walk %d: left completed by %s", walk, e)
			}
			// A started job never goes back to the queue on its own once its
			// outcome is unknown: only an explicit retry or restart does that.
			if s == Unknown && n == Queued && e != EvRetry && e != EvRestart {
				t.Fatalf("walk %d: unknown job requeued by %s", walk, e)
			}
			// A lost runner never requeues a started job.
			if e == EvLeaseExpired && n == Queued {
				t.Fatalf("walk %d: lease expiry requeued a started job", walk)
			}
			// Terminal states are left only by retry, restart or a late result.
			if s.Terminal() && e != EvRetry && e != EvRestart && !(s == Unknown && slices.Contains([]Event{EvComplete, EvFail, EvCancelled, EvAsk}, e)) {
				t.Fatalf("walk %d: terminal %s left by %s", walk, s, e)
			}
			// A waiting job holds no slot and runs nothing: only a person's
			// decision or the question's expiry moves it, and never straight
			// to a runner.
			if s == Waiting && !slices.Contains([]Event{EvAnswer, EvRestart, EvCancel, EvExpire}, e) {
				t.Fatalf("walk %d: waiting job left by %s", walk, e)
			}
			if s == Waiting && (n == Offered || n == Running) {
				t.Fatalf("walk %d: waiting job went to %s without the queue", walk, n)
			}
			// Only an attempt that ran can ask.
			if n == Waiting && s != Running && s != Unknown {
				t.Fatalf("walk %d: %s became waiting by %s", walk, s, e)
			}
			if n == Running && s != Running {
				runs++
			}
			if e == EvRetry || e == EvRestart || n == Queued {
				runs = 0
			}
			if runs > 1 {
				t.Fatalf("walk %d: entered running twice without passing through the queue", walk)
			}
			s = n
		}
	}
}

func TestEveryStateHasARow(t *testing.T) {
	for _, s := range States {
		if _, ok := Transitions[s]; !ok {
			t.Errorf("state %s has no row in Transitions", s)
		}
	}
	for s, row := range Transitions {
		for e, n := range row {
			if !slices.Contains(events, e) || !n.Valid() {
				t.Errorf("row %s: bad entry %s → %s", s, e, n)
			}
		}
	}
}

func TestOutcomeValidate(t *testing.T) {
	zero, one := 0, 1
	tests := []struct {
		name string
		o    Outcome
		ok   bool
	}{
		{"completed", Outcome{State: AttemptCompleted, Reason: ReasonExited, ExitCode: &zero}, true},
		{"failed", Outcome{State: AttemptFailed, Reason: ReasonExited, ExitCode: &one}, true},
		{"completed non-zero", Outcome{State: AttemptCompleted, Reason: ReasonExited, ExitCode: &one}, false},
		{"completed no code", Outcome{State: AttemptCompleted, Reason: ReasonExited}, false},
		{"offered is no outcome", Outcome{State: AttemptOffered}, false},
		{"unknown reason", Outcome{State: AttemptFailed, Reason: "gremlins"}, false},
		{"long message", Outcome{State: AttemptFailed, Reason: ReasonAgentError, Message: strings.Repeat("x", 5000)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if err := tt.o.Validate(); (err == nil) != tt.ok {
				t.Fatalf("Validate() = %v, want ok=%v", err, tt.ok)
			}
		})
	}
}

// TestStatesDoc keeps docs/states.md generated from the table.
func TestStatesDoc(t *testing.T) {
	const path = "../../docs/states.md"
	want := StatesMarkdown()
	if *update {
		if err := os.WriteFile(path, []byte(want), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("read %s: %v (run go test ./internal/job -run TestStatesDoc -update)", path, err)
	}
	if string(got) != want {
		t.Fatalf("%s is out of date with the transition table; run go test ./internal/job -run TestStatesDoc -update", path)
	}
}
