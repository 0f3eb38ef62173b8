package hub

import (
	"slices"
	"strings"
	"time"

	"drover/internal/rules"
	"drover/internal/store"
)

// runnerShape is the connected runners whose hellos said the same labels
// and images, which hold for a connection's life. A dispatch pass reads
// only the shapes that may take one of its jobs (fitsShape, fit's own
// check), so a job for one runner among 10,000 idle ones of another shape
// costs the pass one look at each shape, not one per runner; fit still
// decides for every runner read.
type runnerShape struct {
	labels map[string]string
	images []string
	conns  map[string]*runnerSession // runner id → its connection
}

// shapeOf is the key of a connection's labels and images.
func shapeOf(labels map[string]string, images []string) string {
	return rules.FormatLabels(labels) + "\x00" + strings.Join(images, "\x00")
}

// putLocked lists c as its runner's live connection and returns the one
// it replaces (nil if none); the caller holds r.mu.
func (r *registry) putLocked(c *runnerSession) *runnerSession {
	old := r.conns[c.runnerID]
	if old != nil {
		r.unshapeLocked(old)
	}
	r.conns[c.runnerID] = c
	s := r.shapes[c.shape]
	if s == nil {
		s = &runnerShape{labels: c.labels, images: c.images, conns: map[string]*runnerSession{}}
		r.shapes[c.shape] = s
	}
	s.conns[c.runnerID] = c
	return old
}

// unshapeLocked takes c out of its shape; the caller holds r.mu.
func (r *registry) unshapeLocked(c *runnerSession) {
	if s := r.shapes[c.shape]; s != nil && s.conns[c.runnerID] == c {
		delete(s.conns, c.runnerID)
		if len(s.conns) == 0 {
			delete(r.shapes, c.shape)
		}
	}
}

// eachFor calls each for every connected runner whose shape may take one
// of jobs, and for those of the other shapes that also pass also (nil:
// none). The caller holds r.mu.
func (r *registry) eachFor(jobs []store.Job, also func(*runnerSession) bool, each func(*runnerSession)) {
	reps := shapeReps(jobs)
	for _, s := range r.shapes {
		takes := shapeTakesAny(s, reps)
		for _, c := range s.conns {
			if takes || also != nil && also(c) {
				each(c)
			}
		}
	}
}

// eachOther calls each for every connected runner whose shape takes none
// of jobs and that fails also: the rest of the fleet beside eachFor's.
// The caller holds r.mu.
func (r *registry) eachOther(jobs []store.Job, also func(*runnerSession) bool, each func(*runnerSession)) {
	reps := shapeReps(jobs)
	for _, s := range r.shapes {
		if shapeTakesAny(s, reps) {
			continue
		}
		for _, c := range s.conns {
			if also == nil || !also(c) {
				each(c)
			}
		}
	}
}

// shapeReps is one job of jobs for each labels and image they ask for.
func shapeReps(jobs []store.Job) []store.Job {
	seen := map[string]bool{}
	var out []store.Job
	for _, j := range jobs {
		k := shapeOf(j.Labels, []string{j.Image})
		if !seen[k] {
			seen[k] = true
			out = append(out, j)
		}
	}
	return out
}

// shapeTakesAny says whether a runner of shape s may take one of jobs as
// far as its labels and images go.
func shapeTakesAny(s *runnerShape, jobs []store.Job) bool {
	for _, j := range jobs {
		if _, ok := fitsShape(j, s.labels, s.images); ok {
			return true
		}
	}
	return false
}

// gather is the candidates visit calls each with, under the registry's
// lock: those out of their cooldown, when to look again at those in it,
// and the most free slots any has.
func (h *Hub) gather(visit func(each func(*runnerSession))) ([]*candidate, time.Time, int) {
	h.reg.mu.Lock()
	defer h.reg.mu.Unlock()
	now := h.now()
	// Two allocations per pass, not one per runner: a pass runs at every
	// submit, connect and finish.
	var all []candidate
	var retry time.Time
	top := 0
	visit(func(c *runnerSession) {
		if c.cooldownUntil.After(now) {
			if retry.IsZero() || c.cooldownUntil.Before(retry) {
				retry = c.cooldownUntil
			}
			return
		}
		all = append(all, candidate{c: c, free: max(c.slots-len(h.reg.active[c.runnerID]), 0), agents: c.agents, accounts: c.accounts, access: c.access, notReady: c.notReady})
		top = max(top, all[len(all)-1].free)
	})
	out := make([]*candidate, len(all))
	for i := range all {
		out[i] = &all[i]
	}
	return out, retry, top
}

// whyOverAll is why j waits, as a look at every connected runner would
// say: j found no runner among cands (w says why), and the runners of the
// shapes a pass skips may still tell it more (a runner the requester may
// use, without j's labels). *others holds them once read.
func (h *Hub) whyOverAll(j store.Job, cands []*candidate, top int, others *[]*candidate, queued []store.Job, member bool, ranks map[string]int64, need credNeed, w string) string {
	if *others == nil {
		wantQueue := func(c *runnerSession) bool { return c.wantQueue }
		rest, _, _ := h.gather(func(each func(*runnerSession)) { h.reg.eachOther(queued, wantQueue, each) })
		*others = append(rest, nil)[:len(rest)] // read: not nil, even when empty
	}
	if len(*others) == 0 {
		return w
	}
	all := append(slices.Clip(cands), *others...)
	_, _, why := pickAmong(j, all, top, member, ranks, "", need, false)
	return why
}
