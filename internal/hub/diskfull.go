package hub

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"drover/internal/fsutil"
	"drover/internal/protocol"
	"drover/internal/store"
)

// diskFullInterval is how often the hub logs that its disk is full while
// it stays full: once per interval, with the count of refusals between.
const diskFullInterval = time.Minute

// diskFullLog logs a full disk once per interval rather than once per
// refused request.
type diskFullLog struct {
	mu         sync.Mutex
	last       time.Time // when it was last logged (zero: never)
	suppressed int       // refusals since then
}

// report records one write the hub could not store because its disk is
// full, and logs it if the interval has passed since the last log.
func (d *diskFullLog) report(log *slog.Logger, now time.Time, err error) {
	d.mu.Lock()
	if !d.last.IsZero() && now.Sub(d.last) < diskFullInterval {
		d.suppressed++
		d.mu.Unlock()
		return
	}
	n := d.suppressed
	d.last, d.suppressed = now, 0
	d.mu.Unlock()
	log.Error("the hub's disk is full: refusing writes with 507 until space is freed in the data directory",
		"err", err, "refused_since_last_report", n, "next_report_after", diskFullInterval)
}

// logFailed logs a failed background write (dispatch, sweep, lease
// renewal): a full disk through diskFull, once per interval; anything else
// at once.
func (h *Hub) logFailed(msg string, err error, args ...any) {
	if fsutil.IsNoSpace(err) {
		h.diskFull.report(h.log, h.now(), err)
		return
	}
	h.log.Error(msg, append(args, "err", err)...)
}

// logStallInfo is an attempt whose log the hub could not store because its
// disk was full. The runner keeps the bytes and resends them; the job's
// events say when the log stalled and when it resumed.
type logStallInfo struct {
	since    time.Time
	offset   int64 // the first byte the hub could not store
	recorded bool  // the stalled event was stored
}

// stallLog records that l could not be stored and, once per stall, tries
// to add the job's "log_stalled" event (which a full disk may refuse too:
// then logResumed adds it with the resumed one).
func (h *Hub) stallLog(ctx context.Context, l protocol.Log) {
	h.mu.Lock()
	st, ok := h.stalls[l.Attempt]
	if !ok {
		st = &logStallInfo{since: h.now(), offset: l.Offset}
		h.stalls[l.Attempt] = st
	}
	try := !st.recorded
	h.mu.Unlock()
	if !try {
		return
	}
	err := h.store.Write(ctx, func(tx store.Tx) error { return h.stalledEvent(tx, l.Job, *st) })
	if err == nil {
		h.mu.Lock()
		st.recorded = true
		h.mu.Unlock()
		h.notify(l.Job)
	}
}

func (h *Hub) stalledEvent(tx store.Tx, jobID string, st logStallInfo) error {
	return h.event(tx, jobID, "log_stalled", "", "the log stalled at byte %d: the hub's disk is full; the runner keeps the output and resends it once space is freed", st.offset)
}

// logStall is the stall of an attempt's log, if it has one.
func (h *Hub) logStall(attempt string) (logStallInfo, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	st, ok := h.stalls[attempt]
	if !ok {
		return logStallInfo{}, false
	}
	return *st, true
}

// logResumed adds the events of a stall that ended (in the transaction that
// stored the first bytes after it).
func (h *Hub) logResumed(tx store.Tx, jobID string, st logStallInfo) error {
	if !st.recorded {
		if err := h.stalledEvent(tx, jobID, st); err != nil {
			return err
		}
	}
	return h.event(tx, jobID, "log_resumed", "", "the log resumed at byte %d after %s: the hub could store it again",
		st.offset, h.now().Sub(st.since).Round(time.Second))
}

func (h *Hub) clearStall(attempt string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	delete(h.stalls, attempt)
}
