package hub

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"strings"
	"testing"
	"time"

	"drover/internal/hub/call"
)

// A hello that finds every slot taken for the whole wait is told to come
// back later (never refused for good), and gets a slot once one is given
// back.
func TestAdmissionHelloFlood(t *testing.T) {
	a := newAdmission()
	a.slots, a.wait = make(chan struct{}, 2), 20*time.Millisecond
	ctx := context.Background()
	r1, err1 := a.enter(ctx)
	_, err2 := a.enter(ctx)
	if err1 != nil || err2 != nil {
		t.Fatalf("the first two hellos: %v, %v", err1, err2)
	}
	_, err := a.enter(ctx)
	var cl call.Closed
	if !errors.As(err, &cl) || cl.Code != call.CloseTryAgainLater {
		t.Fatalf("a third hello with both slots taken: %v; want a close with CloseTryAgainLater", err)
	}
	r1()
	if _, err := a.enter(ctx); err != nil {
		t.Errorf("a hello after a slot was given back: %v", err)
	}
}

// Past doorInside hellos in hand, a dial is told when to come back:
// each a place further in a schedule at the rate hellos are attached (the
// first after those in hand), so a fleet told at once returns spread out;
// once a hello leaves, a dial is let in again.
func TestHelloDoorSpreadsAFleet(t *testing.T) {
	a := newAdmission()
	now := time.Now()
	var leaves []func()
	for range doorInside {
		leave, _ := a.door(now)
		if leave == nil {
			t.Fatalf("dial %d of %d turned away", len(leaves)+1, doorInside)
		}
		leaves = append(leaves, leave)
	}
	step := helloHeld / (2 * helloSlots)
	prev := helloHeld
	for i := range 100 {
		leave, after := a.door(now)
		if leave != nil || after != prev+step {
			t.Fatalf("dial %d past the limit: let in %v, come back after %v; want after %v", i, leave != nil, after, prev+step)
		}
		prev = after
	}
	leaves[0]()
	leaves[0]() // once only
	if leave, _ := a.door(now); leave == nil {
		t.Fatal("a dial after a hello left was turned away")
	}
	if leave, _ := a.door(now); leave != nil {
		t.Fatal("a second dial got the one place left")
	}
}

// The descriptor warning is logged once when the hub crosses 80 % of its
// limit, and cleared below 70 %.
// TestNofileSkip: a hub far below the warning level counts its
// descriptors once a minute, one near it at every tick.
func TestNofileSkip(t *testing.T) {
	for _, c := range []struct {
		open, limit uint64
		want        int
	}{
		{open: 10_000, limit: 1 << 20, want: 5},
		{open: 399, limit: 1000, want: 5},
		{open: 400, limit: 1000, want: 0},
		{open: 900, limit: 1000, want: 0},
		{open: 5, limit: 0, want: 0},
	} {
		if got := nofileSkip(c.open, c.limit); got != c.want {
			t.Errorf("%d of %d open: skip %d checks, want %d", c.open, c.limit, got, c.want)
		}
	}
}

func TestNofileWarning(t *testing.T) {
	var buf bytes.Buffer
	log := slog.New(slog.NewTextHandler(&buf, nil))
	for _, step := range []struct {
		open, limit   uint64
		before, after bool   // warned before and after the check
		want          string // in the log, "" for nothing
	}{
		{open: 700, limit: 1000},
		{open: 800, limit: 1000, after: true, want: "near the limit"},
		{open: 900, limit: 1000, before: true, after: true},
		{open: 750, limit: 1000, before: true, after: true},
		{open: 650, limit: 1000, before: true, want: "back below"},
		{open: 5, limit: 0},
	} {
		buf.Reset()
		got := nofileCheck(log, step.open, step.limit, step.before)
		if step.want == "" && buf.Len() > 0 || step.want != "" && !strings.Contains(buf.String(), step.want) {
			t.Errorf("%d of %d open: logged %q, want %q", step.open, step.limit, buf.String(), step.want)
		}
		if got != step.after {
			t.Errorf("%d of %d open: warned %v, want %v", step.open, step.limit, got, step.after)
		}
	}
}
