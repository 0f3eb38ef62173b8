package hub

import (
	"context"
	"errors"
	"log/slog"
	"os"
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
// and is never refused for good.
const (
	helloSlots = 32
	helloWait  = 5 * time.Second
)

var errHelloBusy = call.Closed{Code: call.CloseTryAgainLater, Reason: "hub busy with other runners' hellos; reconnect later"}

// admission holds the hello slots.
type admission struct {
	slots chan struct{}
	wait  time.Duration // helloWait
}

func newAdmission() admission {
	return admission{slots: make(chan struct{}, helloSlots), wait: helloWait}
}

// enter waits for a hello slot; release gives it back.
func (a admission) enter(ctx context.Context) (release func(), err error) {
	t := time.NewTimer(a.wait)
	defer t.Stop()
	select {
	case a.slots <- struct{}{}:
		return func() { <-a.slots }, nil
	case <-t.C:
		return nil, errHelloBusy
	case <-ctx.Done():
		return nil, errors.Join(errHelloBusy, ctx.Err())
	}
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
	ticking(ctx, nofileEvery, func() bool {
		open, limit, ok := openFiles()
		if ok { // else no /proc: nothing to watch
			warned = nofileCheck(h.log, open, limit, warned)
		}
		return ok
	})
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
