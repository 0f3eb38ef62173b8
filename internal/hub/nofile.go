package hub

import (
	"context"
	"log/slog"
	"os"
	"syscall"
	"time"

	"drover/internal/tick"
)

// Open descriptors against the limit: warned of at nofileWarn of the soft
// limit, again only after falling below nofileClear (the hub's metrics
// carry both numbers: process_open_fds, process_max_fds).
const (
	nofileEvery = 10 * time.Second
	nofileWarn  = 0.8
	nofileClear = 0.7
)

// procFDs lists the process's open descriptors.
const procFDs = "/proc/self/fd"

// nofileLoop warns before the hub runs out of file descriptors, which
// would otherwise show only as failed accepts (every runner connection
// and API request holds one).
func (h *Hub) nofileLoop(ctx context.Context) {
	warned := false
	skip := 0
	tick.Every(ctx, nofileEvery, func() bool {
		if skip > 0 {
			skip--
			return true
		}
		open, limit, walked, ok := openFiles()
		if ok { // else no /proc: nothing to watch
			warned = nofileCheck(h.log, open, limit, warned)
			skip = nofileSkip(open, limit, walked)
		}
		return ok
	})
}

// nofileSkip is how many checks to leave out after one that found open
// of limit descriptors. The kernel's count costs one stat at any count;
// a walk reads a directory entry per descriptor, 10,000 of them with
// 10,000 runners connected (2 % of an idle hub's CPU), so a hub that had
// to walk and is far below the warning level counts once a minute.
func nofileSkip(open, limit uint64, walked bool) int {
	if walked && limit > 0 && float64(open) < nofileWarn/2*float64(limit) {
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

// openFiles is the process's open descriptors, its soft limit, and
// whether counting them walked procFDs. Linux 6.2 and later give the
// count as the directory's size (one stat, nothing per descriptor);
// older kernels say 0 there, and the descriptors are counted one by one.
func openFiles() (open, limit uint64, walked, ok bool) {
	var rl syscall.Rlimit
	if syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl) != nil {
		return 0, 0, false, false
	}
	if fi, err := os.Stat(procFDs); err == nil && fi.Size() > 0 {
		return uint64(fi.Size()), rl.Cur, false, true
	}
	es, err := os.ReadDir(procFDs)
	if err != nil {
		return 0, 0, true, false
	}
	return uint64(len(es)), rl.Cur, true, true
}
