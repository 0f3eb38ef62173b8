package hub

import (
	"context"
	"errors"
	"sync"
	"time"

	"drover/internal/hub/call"
)

// A hub restart brings every runner back at once. Each hello is a durable
// write; taken all together they queue on the store for longer than a
// runner waits for its welcome, the runner gives up and dials again, and
// the hub keeps a descriptor for every connection waiting in that queue
// until it runs out. So only helloSlots hellos are attached at once, and a
// hello that waits helloWait for a slot is told to come back later
// (CloseTryAgainLater): the runner reconnects after its jittered backoff,
// and is never refused for good. Past that, dials are told when to come
// back before they say hello (helloBook).
const (
	helloSlots = 32
	helloWait  = 5 * time.Second
)

var errHelloBusy = call.Closed{Code: call.CloseTryAgainLater, Reason: "hub busy with other runners' hellos; reconnect later"}

// admission holds the hello slots.
type admission struct {
	slots chan struct{}
	wait  time.Duration // helloWait
	book  *helloBook
}

// helloBook spreads a fleet that comes back at once over the time the hub
// needs for it. At most doorInside dials are let in to say hello at
// once (attached, or waiting for a slot); past that a runner dialing is
// told when to come back, before its upgrade (gateway.Core.AdmitHello): a
// refused wait cost the hub an upgrade and a hello, and the runner a
// backoff growing towards a minute. The time told is the next free place
// in a schedule at twice the rate the slots attach hellos, so the
// runners told return one after another instead of together. The runner
// brings its place back (place.go): once its time has come it goes in
// before any dial without one, and a door still full then (the schedule
// ran ahead of the hub) tells it to come back with the same place at the
// next free place of a second schedule, of runners whose time has come.
// Never at the first's end: that, at 10,000 runners, grew the schedule
// with every refusal and left runners waiting minutes on an idle hub.
type helloBook struct {
	mu     sync.Mutex
	inside int           // dials let in whose hello is not attached or refused yet
	held   time.Duration // mean time a hello holds a slot (moving average)
	next   time.Time     // the last place given in the schedule
	again  time.Time     // the last place given in the second schedule, of runners whose time came
	key    placeKey
	clock  func() time.Time
}

// doorInside is how many dials are let in to say hello at once.
const doorInside = 4 * helloSlots

// helloHeld is the first guess of the time a hello holds a slot, until
// hellos are measured.
const helloHeld = 100 * time.Millisecond

// A place is honoured from placeEarly before its time (Retry-After counts
// whole seconds, and the runner spreads its return over the second after)
// until placeKeep after the runner was last told to come back with it.
// A runner is told to come back at its place's time or within placeAhead,
// whichever is sooner: the schedule is made at the rate the hub attached
// hellos while the fleet flooded it (every refused dial read the store),
// slower than it attaches once the fleet is told, and a runner back early
// with its place goes in whenever the door has room, so an idle hub never
// waits for runners asleep until places it set too far.
const (
	placeEarly = time.Second
	placeKeep  = time.Minute
	placeAhead = 4 * time.Second
)

func newAdmission() admission {
	return admission{slots: make(chan struct{}, helloSlots), wait: helloWait, book: &helloBook{held: helloHeld, key: newPlaceKey(), clock: time.Now}}
}

// enter waits for a hello slot; release gives it back.
func (a admission) enter(ctx context.Context) (release func(), err error) {
	t := time.NewTimer(a.wait)
	defer t.Stop()
	select {
	case a.slots <- struct{}{}:
		start := a.book.clock()
		return func() {
			<-a.slots
			a.book.took(a.book.clock().Sub(start))
		}, nil
	case <-t.C:
		return nil, errHelloBusy
	case <-ctx.Done():
		return nil, errors.Join(errHelloBusy, ctx.Err())
	}
}

// door lets the dial of the runner holding token (its hash) in to say
// hello (leave, called once its hello is attached or refused) or says
// after how long to come back and with which place (leave nil). place is
// what the runner brought from its last refusal ("" for none).
func (a admission) door(token, place string) (leave func(), after time.Duration, next string) {
	return a.book.pass(token, place, true)
}

// turnAway is the door before the dial is authenticated: a dial bringing
// a place of this hub's for its token that the door would tell to come
// back (early, or the door full) is told so without the store read and
// the hello an authenticated dial costs. A place is given only to an
// authenticated dial and only ever sent back to it, so answering one
// tells nothing new and gives no one a place; any other dial (no place, a
// forged or stale one, or one the door would let in) is authenticated
// first (ok false).
func (a admission) turnAway(token, place string) (after time.Duration, next string, ok bool) {
	if place == "" {
		return 0, "", false
	}
	_, after, next = a.book.pass(token, place, false)
	return after, next, next != ""
}

// pass is the door's decision; with let false it lets no one in and gives
// no new place (a dial not yet authenticated), only tells a place's holder.
func (b *helloBook) pass(token, place string, let bool) (leave func(), after time.Duration, next string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock()
	room := b.room()
	at, held := b.key.open(token, place, now)
	if !held && !let {
		return nil, 0, ""
	}
	switch {
	case b.inside < room/2,
		// Less than half full: the schedule is behind the hub, whoever
		// comes goes in.
		held && b.inside < room,
		// A runner with its place, early or not, goes in before dials
		// without one (placeAhead).
		!held && b.inside < room && !b.next.After(now):
		if !let {
			return nil, 0, ""
		}
		b.inside++
		var once sync.Once
		return func() { once.Do(b.leave) }, 0, ""
	case held && now.Before(at.Add(-placeEarly)):
		after := min(at.Sub(now), placeAhead) // early: the same place
		return nil, after, b.key.sign(token, at, now.Add(after+placeKeep))
	}
	step := b.step()
	if held {
		// Its time came and the door is still full: the schedule ran
		// ahead of the hub. It keeps its place and comes back at the
		// next place of a second schedule, of runners whose time came.
		b.again = later(b.again, now).Add(step)
		after := min(max(b.again.Sub(now), time.Second), placeAhead)
		return nil, after, b.key.sign(token, at, now.Add(after+placeKeep))
	}
	// Places start after a hold and come one a step.
	b.next = later(b.next, now.Add(b.held)).Add(step)
	after = min(b.next.Sub(now), placeAhead)
	return nil, after, b.key.sign(token, b.next, now.Add(after+placeKeep))
}

// room is how many dials the door lets in at once: doorInside, fewer when
// the hub attaches hellos so slowly that the last of them would wait half
// of helloWait for a slot (refused after its upgrade, its runner would back
// off towards a minute: at 10,000 runners and hellos of 20 ms that made
// the fleet's return 5 min 19 s instead of 3 min 19 s), never fewer than
// the slots.
func (b *helloBook) room() int {
	return max(helloSlots, min(doorInside, int(helloWait/2/(2*b.step()))))
}

// leave counts a dial that left the door.
func (b *helloBook) leave() {
	b.mu.Lock()
	b.inside--
	b.mu.Unlock()
}

// took counts a hello that held a slot for d.
func (b *helloBook) took(d time.Duration) {
	b.mu.Lock()
	b.held += (d - b.held) / 8
	b.mu.Unlock()
}

// step is the time between places: twice the rate the slots attach
// hellos, as a slot's hold is measured with every slot contended (a
// schedule slower than the hub leaves it idle while runners wait; one
// faster only tells some again).
func (b *helloBook) step() time.Duration { return max(b.held/(2*helloSlots), 1) }
