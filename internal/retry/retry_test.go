package retry

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// topRand draws the largest value, bottomRand the smallest: with them the
// jittered delays are exact.
func topRand(n int64) int64  { return n - 1 }
func bottomRand(int64) int64 { return 0 }

func TestDelay(t *testing.T) {
	ms := time.Millisecond
	for _, tc := range []struct {
		name string
		p    Policy
		want []time.Duration // Delay(0), Delay(1), …
	}{
		{"doubling capped", Policy{First: 100 * ms, Max: 350 * ms}, []time.Duration{100 * ms, 200 * ms, 350 * ms, 350 * ms}},
		{"no cap", Policy{First: time.Second}, []time.Duration{time.Second, 2 * time.Second, 4 * time.Second}},
		{"multiplier", Policy{First: ms, Multiplier: 3}, []time.Duration{ms, 3 * ms, 9 * ms}},
		{"full jitter top", Policy{First: 2 * ms, Max: 64 * ms, Jitter: FullJitter, Rand: topRand}, []time.Duration{2 * ms, 4 * ms, 8 * ms}},
		{"full jitter bottom", Policy{First: 2 * ms, Jitter: FullJitter, Rand: bottomRand}, []time.Duration{0, 0}},
		{"equal jitter top", Policy{First: 250 * ms, Max: 5 * time.Second, Jitter: EqualJitter, Rand: topRand}, []time.Duration{250 * ms, 500 * ms, time.Second}},
		{"equal jitter bottom", Policy{First: 250 * ms, Jitter: EqualJitter, Rand: bottomRand}, []time.Duration{125 * ms, 250 * ms}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			for n, want := range tc.want {
				if got := tc.p.Delay(n); got != want {
					t.Errorf("Delay(%d) = %v, want %v", n, got, want)
				}
			}
		})
	}
}

func TestCeilingDoesNotOverflow(t *testing.T) {
	p := Policy{First: time.Second}
	if d := p.Ceiling(1000); d <= 0 {
		t.Fatalf("Ceiling(1000) = %v, want positive", d)
	}
}

var errTransient = errors.New("transient")

func TestDo(t *testing.T) {
	final := errors.New("final")
	for _, tc := range []struct {
		name      string
		p         Policy
		errs      []error // fn's answers in order; nil past the end
		wantTries int
		wantErr   error
		wantWaits []time.Duration
	}{
		{"success at once", Policy{Tries: 3}, nil, 1, nil, nil},
		{"transient then success", Policy{First: time.Nanosecond, Tries: 3}, []error{errTransient}, 2, nil, []time.Duration{time.Nanosecond}},
		{"tries run out", Policy{First: time.Nanosecond, Tries: 3}, []error{errTransient, errTransient, errTransient, errTransient}, 3, errTransient, []time.Duration{time.Nanosecond, 2 * time.Nanosecond}},
		{"permanent stops", Policy{First: time.Nanosecond}, []error{errTransient, Permanent(final)}, 2, final, []time.Duration{time.Nanosecond}},
		{"after replaces the delay", Policy{First: time.Nanosecond, Max: time.Microsecond}, []error{After(errTransient, 3*time.Nanosecond)}, 2, nil, []time.Duration{3 * time.Nanosecond}},
		{"after bounded by max", Policy{First: time.Nanosecond, Max: 5 * time.Nanosecond}, []error{After(errTransient, time.Hour)}, 2, nil, []time.Duration{5 * time.Nanosecond}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var waits []time.Duration
			tc.p.OnRetry = func(_ int, _ error, d time.Duration) { waits = append(waits, d) }
			tries := 0
			err := Do(context.Background(), tc.p, func(context.Context) error {
				tries++
				if tries <= len(tc.errs) {
					return tc.errs[tries-1]
				}
				return nil
			})
			if err != tc.wantErr {
				t.Errorf("err = %v, want %v", err, tc.wantErr)
			}
			if tries != tc.wantTries {
				t.Errorf("tries = %d, want %d", tries, tc.wantTries)
			}
			if fmt.Sprint(waits) != fmt.Sprint(tc.wantWaits) {
				t.Errorf("waits = %v, want %v", waits, tc.wantWaits)
			}
		})
	}
}

func TestMarks(t *testing.T) {
	wrapped := fmt.Errorf("call: %w", After(Permanent(errTransient), time.Second))
	if !IsPermanent(wrapped) || !errors.Is(wrapped, errTransient) {
		t.Errorf("marks hide the error or each other: %v", wrapped)
	}
	if d, ok := RetryAfter(wrapped); !ok || d != time.Second {
		t.Errorf("RetryAfter = %v, %v, want 1s, true", d, ok)
	}
	if _, ok := RetryAfter(errTransient); ok || IsPermanent(errTransient) {
		t.Error("an unmarked error reads as marked")
	}
	if Permanent(nil) != nil || After(nil, time.Second) != nil {
		t.Error("marking nil made an error")
	}
	if wrapped.Error() != "call: transient" {
		t.Errorf("marks changed the text: %q", wrapped.Error())
	}
}

// TestCancelDuringSleep: an ended context ends the wait at once, however
// long the policy would wait.
func TestCancelDuringSleep(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	p := Policy{First: time.Hour, OnRetry: func(int, error, time.Duration) { cancel() }}
	tries := 0
	err := Do(ctx, p, func(context.Context) error { tries++; return errTransient })
	if err != errTransient || tries != 1 {
		t.Fatalf("Do = %v after %d tries, want the last error after 1", err, tries)
	}

	ctx, cancel = context.WithCancel(context.Background())
	done := make(chan error)
	go func() { done <- Sleep(ctx, time.Hour) }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Sleep = %v, want context.Canceled", err)
	}
}

func TestMaxElapsed(t *testing.T) {
	tries := 0
	err := Do(context.Background(), Policy{First: time.Nanosecond, MaxElapsed: time.Nanosecond},
		func(context.Context) error {
			tries++
			time.Sleep(time.Microsecond) // past MaxElapsed whatever the clock's grain
			return errTransient
		})
	if err != errTransient || tries != 1 {
		t.Fatalf("Do = %v after %d tries, want the error after 1", err, tries)
	}
}
