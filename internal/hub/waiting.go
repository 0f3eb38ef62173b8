package hub

import (
	"slices"

	"drover/internal/protocol"
	"drover/internal/store"
)

// What a runner was last told of the queue (runnerSession.waiting).
const (
	waitUntold = iota
	waitSome
	waitNone
)

// tellWaiting tells each candidate that asked (Hello.WantQueue) whether a queued job it may run is left
// after a dispatch pass (protocol.Queue), when that changed since it was
// last told: a draining runner (`drover runner --drain`) exits once none
// has been for its grace period. A job counts whatever the runner's free
// slots or readiness: it would run it once free. queued is what the pass
// read (the oldest jobs of every shape, so every shape with a queued job
// is in it); taken were offered by the pass; needs are the credentials
// each project's setup needs of a runner.
func (h *Hub) tellWaiting(cands []*candidate, queued []store.Job, taken, removed map[string]bool, member map[[2]string]bool, ranks map[string]int64, needs map[string]credNeed) {
	if !slices.ContainsFunc(cands, func(cd *candidate) bool { return cd.c.wantQueue }) {
		return // the common case: nobody drains, nothing to work out
	}
	some := make([]bool, len(cands))
	seen := map[string]bool{} // shapes looked at: one job stands for its shape
	for _, j := range queued {
		key := shapeKey(j)
		if taken[j.ID] || removed[j.RequesterID] || seen[key] {
			continue
		}
		seen[key] = true
		for i, cd := range cands {
			if !some[i] && cd.c.wantQueue {
				_, _, _, some[i] = cd.fit(j, member[[2]string{j.Project, j.RequesterID}], ranks, needs[j.Project])
			}
		}
	}
	for i, cd := range cands {
		if !cd.c.wantQueue {
			continue
		}
		state := waitNone
		if some[i] {
			state = waitSome
		}
		h.reg.mu.Lock()
		changed := cd.c.waiting != state
		cd.c.waiting = state
		h.reg.mu.Unlock()
		if changed {
			cd.c.Queue(protocol.Queue{Waiting: some[i]})
		}
	}
}
