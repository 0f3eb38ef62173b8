package hub

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/store"
)

// fleetState is what autoscalers watch: a generation that grows after
// every dispatch pass (the queue may have changed), and the latest launch
// failure of each owner (by name), which the owner's waiting jobs show. The zero value is
// ready.
type fleetState struct {
	mu       sync.Mutex
	gen      uint64
	ch       chan struct{} // closed at the next change
	failures map[string]launchFailure
}

type launchFailure struct {
	labels map[string]string
	text   string
}

// watch returns the current generation and a channel closed after it.
func (f *fleetState) watch() (<-chan struct{}, uint64) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.ch == nil {
		f.ch = make(chan struct{})
	}
	return f.ch, f.gen
}

func (f *fleetState) changed() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.gen++
	if f.ch != nil {
		close(f.ch)
		f.ch = nil
	}
}

// fail records (text "" clears) the owner's latest launch failure for
// jobs the launch's labels would run.
func (f *fleetState) fail(owner string, labels map[string]string, text string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.failures == nil {
		f.failures = map[string]launchFailure{}
	}
	if text == "" {
		delete(f.failures, owner)
		return
	}
	f.failures[owner] = launchFailure{labels: labels, text: text}
}

// annotate adds the owner's launch failure to why a job with labels waits.
func (f *fleetState) annotate(owner string, labels map[string]string, why string) string {
	f.mu.Lock()
	defer f.mu.Unlock()
	lf, ok := f.failures[owner]
	if !ok || !labelsMatch(labels, lf.labels) {
		return why
	}
	if why == "" {
		return lf.text
	}
	return why + "; " + lf.text
}

const maxDemandWait = 60 * time.Second

// apiDemand answers how many of the caller's queued jobs runners with the
// given labels could take, at once when the generation differs from
// after, else when the queue next changes (or wait ms pass): an
// autoscaler's event, not a poll.
func (h *Hub) apiDemand(w http.ResponseWriter, r *http.Request, p principal) error {
	q := r.URL.Query()
	labels := map[string]string{}
	if s := q.Get("labels"); s != "" {
		for _, kv := range strings.Split(s, ",") {
			k, v, ok := strings.Cut(kv, "=")
			if !ok {
				return badRequest("labels: want k=v,k2=v2")
			}
			labels[k] = v
		}
	}
	if err := validateLabels(labels); err != nil {
		return badRequest("labels: %v", err)
	}
	after, _ := strconv.ParseUint(q.Get("after"), 10, 64)
	wait := time.Duration(0)
	if s := q.Get("wait"); s != "" {
		ms, err := strconv.Atoi(s)
		if err != nil || ms < 0 {
			return badRequest("wait must be milliseconds")
		}
		wait = min(time.Duration(ms)*time.Millisecond, maxDemandWait)
	}
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		ch, gen := h.fleet.watch()
		if gen != after || wait == 0 {
			n, err := h.demand(r, p, labels)
			if err != nil {
				return err
			}
			writeJSON(w, http.StatusOK, protocol.Demand{Queued: n, Generation: gen})
			return nil
		}
		select {
		case <-ch:
		case <-timer.C:
			wait = 0
		case <-r.Context().Done():
			return nil
		}
	}
}

func (h *Hub) demand(r *http.Request, p principal, labels map[string]string) (int, error) {
	n := 0
	err := h.store.Read(r.Context(), func(tx store.Tx) error {
		js, err := tx.Jobs(store.JobFilter{State: job.Queued, RequesterID: p.userID, Limit: protocol.MaxDemand})
		if err != nil {
			return err
		}
		n = 0
		for _, j := range js {
			if labelsMatch(j.Labels, labels) {
				n++
			}
		}
		return nil
	})
	return n, err
}

// apiLaunchFailure records that a launch failed on its target (an image
// missing, a host unreachable, a host key changed): the owner's waiting
// jobs say so until a launch succeeds (an empty reason clears it). It is
// stored, so a restarted hub still says so; fleetState holds a copy for
// the job views.
func (h *Hub) apiLaunchFailure(w http.ResponseWriter, r *http.Request, p principal) error {
	var req protocol.LaunchFailure
	if err := decodeBody(r, w, &req); err != nil {
		return err
	}
	if err := protocol.CheckPlainText("reason", req.Reason, false); err != nil || len(req.Reason) > protocol.MaxLaunchFailureReason {
		return badRequest("reason must be at most %d bytes of plain text", protocol.MaxLaunchFailureReason)
	}
	var l store.Launch
	var owner string
	now := h.now()
	err := h.store.Write(r.Context(), func(tx store.Tx) error {
		var err error
		if l, err = launchOf(tx, r.PathValue("id"), p); err != nil {
			return err
		}
		owner = newNamer(tx).user(l.OwnerID)
		if req.Reason == "" {
			return tx.ClearLaunchFailure(l.OwnerID)
		}
		return tx.PutLaunchFailure(store.LaunchFailure{OwnerID: l.OwnerID, LaunchID: l.ID, Target: l.Target,
			Labels: l.Labels, Reason: req.Reason, FailedAt: now})
	})
	if err != nil {
		return fmt.Errorf("record the launch failure: %w", err)
	}
	if req.Reason != "" {
		h.log.Warn("fleet launch failed", "launch", l.ID, "target", l.Target, "reason", req.Reason)
	}
	h.fleet.fail(owner, l.Labels, launchFailureText(l.Target, req.Reason))
	w.WriteHeader(http.StatusNoContent)
	return nil
}

// launchFailureText is what a waiting job shows of a launch failure ("" for none).
func launchFailureText(target, reason string) string {
	if reason == "" {
		return ""
	}
	return fmt.Sprintf("launching a runner on %s failed (an infrastructure failure, retried): %s", target, reason)
}

// loadLaunchFailures fills fleetState from the store at start.
func (h *Hub) loadLaunchFailures(ctx context.Context) error {
	return h.store.Read(ctx, func(tx store.Tx) error {
		fs, err := tx.LaunchFailures()
		if err != nil {
			return fmt.Errorf("read the launch failures: %w", err)
		}
		n := newNamer(tx)
		for _, f := range fs {
			h.fleet.fail(n.user(f.OwnerID), f.Labels, launchFailureText(f.Target, f.Reason))
		}
		return nil
	})
}
