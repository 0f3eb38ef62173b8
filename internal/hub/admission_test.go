package hub

import (
	"container/heap"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	"drover/internal/hub/call"
	"drover/internal/retry"
)

// A hello that finds every slot taken for the whole wait is told to come
// back later (never refused for good), and gets a slot once one is given
// back.
func TestAdmissionHelloFlood(t *testing.T) {
	t.Parallel()
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
// each a place further in a schedule at the rate dials pass the door (the
// first after a stay), told to come back at its place's time or within
// placeAhead, so a fleet told at once returns spread out; a dial without
// a place waits behind the schedule even once a hello left, and a runner
// back with its place, early or not, goes in before it.
func TestHelloDoorSpreadsAFleet(t *testing.T) {
	t.Parallel()
	a := newAdmission()
	now := time.Now()
	a.book.clock = func() time.Time { return now }
	var leaves []func()
	for range doorInside {
		leave, _, _ := a.door("r", "")
		if leave == nil {
			t.Fatalf("dial %d of %d turned away", len(leaves)+1, doorInside)
		}
		leaves = append(leaves, leave)
	}
	step := helloHeld / (2 * helloSlots)
	var places []string
	var ats []time.Duration // each place's time from now
	for i := range 3000 {
		at := helloHeld + time.Duration(i+1)*step
		leave, after, place := a.door(fmt.Sprintf("r%d", i), "")
		if want := min(at, placeAhead); leave != nil || after != want || place == "" {
			t.Fatalf("dial %d past the limit: let in %v, come back after %v with %q; want after %v with a place", i, leave != nil, after, place, want)
		}
		places, ats = append(places, place), append(ats, at)
	}
	if leave, after, place := a.door("r999", places[999]); leave != nil || (after-ats[999]).Abs() > time.Millisecond || place != places[999] {
		t.Fatalf("a runner early with its place to a full door: let in %v, after %v with %q; want after %v with the same place", leave != nil, after, place, ats[999])
	}
	if leave, after, place := a.door("r2999", places[2999]); leave != nil || after != placeAhead || place != places[2999] {
		t.Fatalf("a runner early for a place further than placeAhead: let in %v, after %v; want after %v with the same place", leave != nil, after, placeAhead)
	}
	leaves[0]()
	leaves[0]() // once only
	if leave, _, _ := a.door("new", ""); leave != nil {
		t.Fatal("a dial without a place went in before the schedule's runners")
	}
	if leave, _, _ := a.door("r1", places[0]); leave != nil {
		t.Fatal("another runner's place let a dial in")
	}
	// The schedule was made at the rate hellos held a slot while every
	// slot was taken; a hub faster than that has room before a place's
	// time, and a runner with its place takes it (a restarted hub once
	// idled for minutes while runners slept until their places).
	if leave, _, _ := a.door("r2999", places[2999]); leave == nil {
		t.Fatal("a runner early with its place was turned away with the door's room free")
	}
	now = now.Add(helloHeld + step)
	// The door is full again: the next runner whose time came is told to
	// come back soon with its place, not given one after the 3,000th.
	if leave, after, place := a.door("r1", places[1]); leave != nil || after != time.Second || place == "" {
		t.Fatalf("a runner back at its place to a full door: let in %v, after %v; want after 1s", leave != nil, after)
	}
	if leave, after, _ := a.door("r2", places[2][:len(places[2])-1]+"x"); leave != nil || after != placeAhead {
		t.Fatalf("a forged place: let in %v, after %v; want a new place at the schedule's end, after %v", leave != nil, after, placeAhead)
	}
	// Once the door is less than half full the schedule is behind the
	// hub: a runner early for its place goes in, and so does a dial
	// without one.
	for _, leave := range leaves[1:] {
		leave()
	}
	if leave, _, _ := a.door("r999", places[999]); leave == nil {
		t.Fatal("a runner early for its place was turned away from a door less than half full")
	}
	if leave, _, _ := a.door("new", ""); leave == nil {
		t.Fatal("a dial without a place was turned away from a door less than half full")
	}
}

// Before a dial is authenticated the door only tells a place's holder to
// come back as it would after: it lets no one in and gives no new place
// (an unauthenticated client must not take places meant for runners).
func TestDoorBeforeAuthentication(t *testing.T) {
	t.Parallel()
	a := newAdmission()
	now := time.Now()
	a.book.clock = func() time.Time { return now }
	for range doorInside {
		if leave, _, _ := a.door("in", ""); leave == nil {
			t.Fatal("a dial turned away from a door with room")
		}
	}
	for i := range 1000 { // t1's place is then more than placeEarly away
		a.door(fmt.Sprint("u", i), "")
	}
	_, after, place := a.door("t1", "")
	next := a.book.next
	for _, c := range []struct{ token, place string }{{"t2", ""}, {"t2", place}, {"t1", place[:len(place)-1] + "x"}, {"t1", strings.Repeat("1", placeMax+1)}} {
		if _, _, ok := a.turnAway(c.token, c.place); ok || !a.book.next.Equal(next) {
			t.Errorf("token %s with place %q before authentication: turned away %v, schedule moved %v; want neither", c.token, c.place, ok, !a.book.next.Equal(next))
		}
	}
	if d, p, ok := a.turnAway("t1", place); !ok || (d-after).Abs() > time.Millisecond || p != place || !a.book.next.Equal(next) {
		t.Fatalf("its holder early to a full door: turned away %v after %v with %q; want after %v with the same place", ok, d, p, after)
	}
	inside := a.book.inside
	a.book.leave()
	if _, _, ok := a.turnAway("t1", place); ok || a.book.inside != inside-1 {
		t.Fatalf("its holder to a door with room: turned away %v, inside %d; want it authenticated, nobody let in (%d)", ok, a.book.inside, inside-1)
	}
}

// A fleet that all dials at once (a hub restart) through a door far
// smaller than it, into a hub that attaches hellos one durable write after
// another, slower than its first guess: every runner is let in, none is
// refused after its upgrade (which sends it into a backoff growing towards
// a minute), each is told to come back only a few times, and all are in
// soon after the hub has written their hellos. A fake clock: the numbers
// are the door's, never the machine's.
func TestHelloDoorFleetReturns(t *testing.T) {
	t.Parallel()
	const (
		runners = 10_000
		write   = 6 * time.Millisecond // a hello's write: all 10,000 in 60 s
		bound   = 24                   // told to come back, per runner
	)
	a := newAdmission()
	var now time.Time
	a.book.clock = func() time.Time { return now }
	in, told, failed, took := fleetThroughDoor(runners, func(time.Duration) time.Duration { return write }, a.door, a.book.took, &now)
	if in != runners {
		t.Fatalf("%d of %d runners attached", in, runners)
	}
	most, all, fails := 0, 0, 0
	for i, n := range told {
		most = max(most, n)
		all += n
		fails += failed[i]
	}
	t.Logf("%d runners in after %v; told to come back %d times in all, at most %d times one; refused after the upgrade %d times", runners, took, all, most, fails)
	if took > runners*write*5/4 {
		t.Errorf("the fleet was in after %v; want within 1.25× the %v its hellos' writes take", took, runners*write)
	}
	if fails > 0 {
		t.Errorf("hellos refused after their upgrade %d times; want none (the door lets in what the hub attaches in time)", fails)
	}
	if most > bound {
		t.Errorf("a runner was told to come back %d times; want at most %d", most, bound)
	}
}

// A hub slow while the whole fleet dials it (every refused dial reads the
// store, and hellos wait behind those reads) and fast once the fleet is
// told: the door's schedule, set at the flood's rate, must not keep the
// runners away from an idle hub. At a restart of 10,000 on a quiet
// machine the hub attached about 45 a second for minutes after the flood,
// on a schedule set while it flooded, though it had attached the same
// fleet's first connection at over 1,000 a second.
func TestHelloDoorFleetReturnsFasterThanItFlooded(t *testing.T) {
	t.Parallel()
	const (
		runners = 10_000
		flood   = 6 * time.Second
		slow    = 40 * time.Millisecond // a hello's write during the flood
		fast    = time.Millisecond      // after it: 1,000 a second
	)
	a := newAdmission()
	var now time.Time
	a.book.clock = func() time.Time { return now }
	write := func(since time.Duration) time.Duration {
		if since < flood {
			return slow
		}
		return fast
	}
	in, told, failed, took := fleetThroughDoor(runners, write, a.door, a.book.took, &now)
	all, fails := 0, 0
	for i, n := range told {
		all += n
		fails += failed[i]
	}
	t.Logf("%d of %d runners in after %v; told to come back %d times in all; refused after the upgrade %d times", in, runners, took, all, fails)
	if want := flood + runners*fast*5/4 + 8*time.Second; in != runners || took > want {
		t.Errorf("%d of %d runners in after %v; want all within %v (the flood, 1.25× the writes after it, 8 s)", in, runners, took, want)
	}
	if fails > 0 {
		t.Errorf("hellos refused after their upgrade %d times; want none", fails)
	}
}

// fleetThroughDoor has runners dial through door at once (over 4 s) and
// come back as told, into a hub whose hellos are durable writes one after
// another, each taking write(time since the fleet began), with helloSlots of them in hand at once; a hello
// that waits helloWait for a slot is refused, and its runner backs off as
// internal/runner does. On the fake clock now: how many were attached
// within an hour, how often each was told to come back or refused, and
// the time that took.
func fleetThroughDoor(runners int, write func(since time.Duration) time.Duration, door func(runner, place string) (func(), time.Duration, string), held func(time.Duration), now *time.Time) (in int, told, failed []int, took time.Duration) {
	start := time.Unix(1_000_000, 0)
	*now = start
	rng := rand.New(rand.NewPCG(30, 1))
	backoff := retry.Policy{First: 500 * time.Millisecond, Max: time.Minute, Jitter: retry.FullJitter}
	type event struct {
		at     time.Time
		runner int
		leave  func() // a hello attached, else a dial
		held   time.Duration
	}
	type hello struct {
		runner int
		since  time.Time
		leave  func()
	}
	var events eventHeap[event]
	push := func(e event) { events.push(e, e.at) }
	for i := range runners {
		push(event{at: start.Add(time.Duration(rng.Int64N(int64(4 * time.Second)))), runner: i})
	}
	told, failed = make([]int, runners), make([]int, runners) // before the upgrade, after it
	var (
		places  = make([]string, runners)
		busy    = 0     // slots attaching a hello
		waiting []hello // hellos in, waiting for a slot
		written = start // when the store is done with the writes queued
	)
	attach := func() {
		for busy < helloSlots && len(waiting) > 0 {
			h := waiting[0]
			waiting = waiting[1:]
			if gaveUp := h.since.Add(helloWait); gaveUp.Before(*now) {
				h.leave() // late: the hub would have refused it at gaveUp
				failed[h.runner]++
				push(event{at: gaveUp.Add(backoff.Delay(failed[h.runner] - 1)), runner: h.runner})
				continue
			}
			busy++
			written = later(written, *now).Add(write(now.Sub(start)))
			in++
			push(event{at: written, leave: h.leave, held: written.Sub(*now)})
		}
	}
	for in < runners && events.len() > 0 {
		e := events.pop()
		if e.at.Sub(start) > time.Hour {
			break // refused for good, as far as a test can tell
		}
		*now = e.at
		if e.leave != nil {
			busy--
			held(e.held)
			e.leave()
			attach()
			continue
		}
		leave, after, place := door(fmt.Sprintf("r%d", e.runner), places[e.runner])
		if leave != nil {
			waiting = append(waiting, hello{e.runner, *now, leave})
			attach()
			continue
		}
		told[e.runner]++
		places[e.runner] = place
		// As a runner comes back (internal/runner's connectLoop): the
		// whole seconds of Retry-After, spread over the second after.
		push(event{at: (*now).Add(after.Truncate(time.Second) + time.Duration(rng.Int64N(int64(time.Second)))), runner: e.runner})
	}
	return in, told, failed, now.Sub(start)
}

// eventHeap is a queue of events by time, the earliest first.
type eventHeap[E any] struct{ h timedHeap[E] }

func (q *eventHeap[E]) push(e E, at time.Time) { heap.Push(&q.h, timed[E]{e, at}) }
func (q *eventHeap[E]) pop() E                 { return heap.Pop(&q.h).(timed[E]).e }
func (q *eventHeap[E]) len() int               { return q.h.Len() }

type timed[E any] struct {
	e  E
	at time.Time
}

type timedHeap[E any] []timed[E]

func (h timedHeap[E]) Len() int           { return len(h) }
func (h timedHeap[E]) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h timedHeap[E]) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *timedHeap[E]) Push(x any)        { *h = append(*h, x.(timed[E])) }
func (h *timedHeap[E]) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}
