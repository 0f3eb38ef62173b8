// Package retry is the one retry policy of drover: how long to wait before
// the n-th retry, one context-aware sleep, and one way for a caller to say
// that an error is final (Permanent) or names its own wait (After). Callers
// keep their own timing constants and their own notion of what failed; they
// express it through this package instead of writing another loop.
package retry

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// Jitter is how a delay is spread below its ceiling, so that clients that
// failed together do not come back together.
type Jitter int

const (
	// NoJitter waits the ceiling itself.
	NoJitter Jitter = iota
	// FullJitter waits uniformly in [0, ceiling].
	FullJitter
	// EqualJitter waits uniformly in [ceiling/2, ceiling].
	EqualJitter
)

// Policy is when to try again. The zero Multiplier means 2; a zero Max, no
// cap; zero Tries and MaxElapsed, no limit.
type Policy struct {
	First      time.Duration // ceiling of the first wait
	Max        time.Duration // cap of every wait, a retry-after included
	Multiplier float64
	Jitter     Jitter
	Tries      int           // tries in all (not retries); 0: unlimited
	MaxElapsed time.Duration // no retry starts after this since the first try

	// Rand draws uniformly in [0, n) (tests make it deterministic); nil:
	// math/rand/v2.
	Rand func(n int64) int64
	// OnRetry, when set, hears of each retry before its wait: the try that
	// failed (from 1), its error and the wait.
	OnRetry func(try int, err error, wait time.Duration)
}

// Ceiling is the wait before retry n (from 0) before jitter:
// First·Multiplierⁿ, capped by Max.
func (p Policy) Ceiling(n int) time.Duration {
	m := p.Multiplier
	if m <= 0 {
		m = 2
	}
	d := float64(p.First)
	for i := 0; i < n; i++ {
		if p.Max > 0 && d >= float64(p.Max) {
			break
		}
		d *= m
		if d >= float64(1<<62) { // no overflow, however many tries
			d = float64(1 << 62)
			break
		}
	}
	out := time.Duration(d)
	if p.Max > 0 {
		out = min(out, p.Max)
	}
	return out
}

// Delay is the wait before retry n (from 0): the ceiling, jittered.
func (p Policy) Delay(n int) time.Duration {
	c := p.Ceiling(n)
	switch p.Jitter {
	case FullJitter:
		return time.Duration(p.draw(int64(c) + 1))
	case EqualJitter:
		return c/2 + time.Duration(p.draw(int64(c/2)+1))
	}
	return c
}

func (p Policy) draw(n int64) int64 {
	if n <= 0 {
		return 0
	}
	if p.Rand != nil {
		return p.Rand(n)
	}
	return rand.Int64N(n)
}

// Do runs fn until it succeeds, returns a Permanent error, the policy's
// tries or time run out, or ctx ends; it returns fn's last error (a
// Permanent one unwrapped). A retry-after of the error (After) replaces the
// policy's delay, bounded by Max.
func Do(ctx context.Context, p Policy, fn func(context.Context) error) error {
	start := time.Now()
	for try := 1; ; try++ {
		err := fn(ctx)
		if err == nil {
			return nil
		}
		if pe, ok := errors.AsType[*permanent](err); ok {
			return pe.err
		}
		if ctx.Err() != nil || (p.Tries > 0 && try >= p.Tries) ||
			(p.MaxElapsed > 0 && time.Since(start) >= p.MaxElapsed) {
			return err
		}
		d := p.Delay(try - 1)
		if ra, ok := RetryAfter(err); ok {
			d = ra
			if p.Max > 0 {
				d = min(d, p.Max)
			}
		}
		if p.OnRetry != nil {
			p.OnRetry(try, err, d)
		}
		if Sleep(ctx, d) != nil {
			return err
		}
	}
}

// Sleep waits d, or less when ctx ends first (then it returns ctx's error).
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// Permanent marks err as not worth another try; Do returns err itself.
// Permanent(nil) is nil.
func Permanent(err error) error {
	if err == nil {
		return nil
	}
	return &permanent{err}
}

// IsPermanent reports whether err was marked Permanent.
func IsPermanent(err error) bool {
	_, ok := errors.AsType[*permanent](err)
	return ok
}

type permanent struct{ err error }

func (e *permanent) Error() string { return e.err.Error() }
func (e *permanent) Unwrap() error { return e.err }

// After marks err as worth another try after d (a server's Retry-After),
// instead of the policy's delay. After(nil, d) is nil.
func After(err error, d time.Duration) error {
	if err == nil {
		return nil
	}
	return &after{err, d}
}

// RetryAfter is the wait err asks for, when it carries one (After).
func RetryAfter(err error) (time.Duration, bool) {
	if a, ok := errors.AsType[*after](err); ok {
		return max(a.d, 0), true
	}
	return 0, false
}

type after struct {
	err error
	d   time.Duration
}

func (e *after) Error() string { return e.err.Error() }
func (e *after) Unwrap() error { return e.err }
