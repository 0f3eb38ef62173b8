package hub

import (
	"maps"
	"slices"
	"sync"
)

// registry is the runners connected to this hub and the attempts holding
// each one's slots. Its lock is its own, apart from Hub.mu (followers and
// the dispatcher's reasons): the dispatcher, the runners' requests and the
// sweeps take it briefly, never across a store call or a send that blocks.
// Fields of a runnerSession marked "under the registry" are guarded by it too.
type registry struct {
	mu     sync.Mutex
	conns  map[string]*runnerSession  // runner id → live connection
	shapes map[string]*runnerShape    // the live connections by labels and images (fleetindex.go)
	active map[string]map[string]bool // runner id → attempt ids holding a slot
	// cancelled holds the attempts whose runner was sent a cancel by the
	// cross sync, so each is sent once.
	cancelled map[string]bool
	// removals counts slot releases: a sync that read the database before
	// one does not add back what it released.
	removals uint64
}

func newRegistry() *registry {
	return &registry{conns: map[string]*runnerSession{}, shapes: map[string]*runnerShape{}, active: map[string]map[string]bool{}, cancelled: map[string]bool{}}
}

// get is the live connection of a runner, or nil.
func (r *registry) get(runnerID string) *runnerSession {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.conns[runnerID]
}

// all is every live connection.
func (r *registry) all() []*runnerSession {
	r.mu.Lock()
	defer r.mu.Unlock()
	cs := slices.Collect(maps.Values(r.conns))
	return cs
}

// takeAll forgets every live connection and returns them: a stopping hub
// detaches them together (detachAll), and their readers' detach then finds
// nothing left to do.
func (r *registry) takeAll() []*runnerSession {
	r.mu.Lock()
	defer r.mu.Unlock()
	cs := slices.Collect(maps.Values(r.conns))
	clear(r.conns)
	clear(r.shapes)
	return cs
}

// ids is the set of connected runners.
func (r *registry) ids() map[string]bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := make(map[string]bool, len(r.conns))
	for id := range r.conns {
		out[id] = true
	}
	return out
}

// count is how many runners are connected.
func (r *registry) count() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.conns)
}

// busy says whether the runner holds any attempt here.
func (r *registry) busy(runnerID string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.active[runnerID]) > 0
}

// remove forgets c if it is still its runner's live connection, and says
// whether it was.
func (r *registry) remove(c *runnerSession) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.conns[c.runnerID] != c {
		return false
	}
	delete(r.conns, c.runnerID)
	r.unshapeLocked(c)
	return true
}

// addActiveLocked records that an attempt holds one of the runner's
// slots; the caller holds r.mu.
func (r *registry) addActiveLocked(runnerID, attemptID string) {
	m := r.active[runnerID]
	if m == nil {
		m = map[string]bool{}
		r.active[runnerID] = m
	}
	m[attemptID] = true
}

// addActive is addActiveLocked for a caller without the lock.
func (r *registry) addActive(runnerID, attemptID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.addActiveLocked(runnerID, attemptID)
}

// removeActive frees the slot an attempt held.
func (r *registry) removeActive(runnerID, attemptID string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.removals++
	delete(r.cancelled, attemptID)
	if m := r.active[runnerID]; m != nil {
		delete(m, attemptID)
		if len(m) == 0 {
			delete(r.active, runnerID)
		}
	}
}
