package hub

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"sync"
	"syscall"
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
// in a schedule at the rate the hub attaches hellos (slots ÷ the mean time
// a hello holds one), so the runners told return one after another
// instead of together.
type helloBook struct {
	mu     sync.Mutex
	inside int           // dials let in whose hello is not attached or refused yet
	held   time.Duration // mean time a hello holds a slot (moving average)
	next   time.Time     // the last place given in the schedule
}

// doorInside is how many dials are let in to say hello at once.
const doorInside = 4 * helloSlots

// helloHeld is the first guess of the time a hello holds a slot, until
// hellos are measured.
const helloHeld = 100 * time.Millisecond

func newAdmission() admission {
	return admission{slots: make(chan struct{}, helloSlots), wait: helloWait, book: &helloBook{held: helloHeld}}
}

// enter waits for a hello slot; release gives it back.
func (a admission) enter(ctx context.Context) (release func(), err error) {
	t := time.NewTimer(a.wait)
	defer t.Stop()
	select {
	case a.slots <- struct{}{}:
		start := time.Now()
		return func() {
			<-a.slots
			a.book.took(time.Since(start))
		}, nil
	case <-t.C:
		return nil, errHelloBusy
	case <-ctx.Done():
		return nil, errors.Join(errHelloBusy, ctx.Err())
	}
}

// door lets a dial in to say hello (leave, called once its hello is
// attached or refused) or says after how long to come back (leave nil).
func (a admission) door(now time.Time) (leave func(), after time.Duration) {
	b := a.book
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.inside < doorInside {
		b.inside++
		var once sync.Once
		return func() {
			once.Do(func() {
				b.mu.Lock()
				b.inside--
				b.mu.Unlock()
			})
		}, 0
	}
	// Places start after a hold and come at twice the measured rate: the
	// hold is measured with every slot contended, and a runner that comes
	// back to a full door is only told again (at 2,000 runners on a quiet
	// machine, the measured rate itself made a restart 13.4 s against 4.0 s
	// with no door; this pacing 5.2 s).
	if first := now.Add(b.held); b.next.Before(first) {
		b.next = first
	}
	b.next = b.next.Add(b.held / (2 * helloSlots))
	return nil, b.next.Sub(now)
}

// took counts a hello that held a slot for d.
func (b *helloBook) took(d time.Duration) {
	b.mu.Lock()
	b.held += (d - b.held) / 8
	b.mu.Unlock()
}

// Open descriptors against the limit: warned of at nofileWarn of the soft
// limit, again only after falling below nofileClear (the hub's metrics
// carry both numbers: process_open_fds, process_max_fds).
const (
	nofileEvery = 10 * time.Second
	nofileWarn  = 0.8
	nofileClear = 0.7
)

// nofileLoop warns before the hub runs out of file descriptors, which
// would otherwise show only as failed accepts (every runner connection
// and API request holds one).
func (h *Hub) nofileLoop(ctx context.Context) {
	warned := false
	skip := 0
	ticking(ctx, nofileEvery, func() bool {
		if skip > 0 {
			skip--
			return true
		}
		open, limit, ok := openFiles()
		if ok { // else no /proc: nothing to watch
			warned = nofileCheck(h.log, open, limit, warned)
			skip = nofileSkip(open, limit)
		}
		return ok
	})
}

// nofileSkip is how many checks to leave out after one that found open
// of limit descriptors: counting them reads a directory entry per
// descriptor, 10,000 of them with 10,000 runners connected (2 % of an idle
// hub's CPU), so a hub far below the warning level counts once a minute.
func nofileSkip(open, limit uint64) int {
	if limit > 0 && float64(open) < nofileWarn/2*float64(limit) {
		return int(time.Minute/nofileEvery) - 1
	}
	return 0
}

// nofileCheck logs a crossing of nofileWarn and says whether the warning
// stands.
func nofileCheck(log *slog.Logger, open, limit uint64, warned bool) bool {
	switch {
	case limit == 0:
		return warned
	case !warned && float64(open) >= nofileWarn*float64(limit):
		log.Warn("open file descriptors near the limit: new runner connections and API requests will fail at the limit; raise it (ulimit -n, LimitNOFILE=)",
			"open", open, "limit", limit)
		return true
	case warned && float64(open) < nofileClear*float64(limit):
		log.Info("open file descriptors back below the warning level", "open", open, "limit", limit)
		return false
	}
	return warned
}

// openFiles is the process's open descriptors and its soft limit.
func openFiles() (open, limit uint64, ok bool) {
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) != nil {
		return 0, 0, false
	}
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		return 0, 0, false
	}
	return uint64(len(es)), rl.Cur, true
}
