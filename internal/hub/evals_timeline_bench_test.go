package hub

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// evalTimeline is where one side of BenchmarkEvalOverhead spent its wall
// time, from each job's submit (its row's created_at, in milliseconds),
// offer and finish (the fleet's clock): the profile of issue 29's ratio,
// which a CPU profile does not show (the hub is mostly waiting).
type evalTimeline struct {
	places int // jobs at once: the runners, the clients, max_parallel
	wall   time.Duration
	// first is the side's start to its first job's submit; tail its last
	// job's finish to the side's end.
	first, tail time.Duration
	// busy is the runners' time with a job (offer → finish), summed.
	busy time.Duration
	// queue is each job's submit → offer, handoff an instance's agent
	// job's finish → its grading job's submit, next an instance's grading
	// finish → the next instance's agent submit on a freed place.
	queue, run, handoff, next []time.Duration
}

func (tl evalTimeline) String() string {
	q := func(ds []time.Duration) string {
		if len(ds) == 0 {
			return "-"
		}
		s := benchQuantiles(ds)
		var sum time.Duration
		for _, d := range ds {
			sum += d
		}
		return fmt.Sprintf("mean %v p50 %v p99 %v", (sum / time.Duration(len(ds))).Round(100*time.Microsecond), s.p50, s.p99)
	}
	return fmt.Sprintf("wall %v: first submit after %v, tail %v; runners busy %.1f of %d on average; submit → offer %s; offer → finish %s; "+
		"agent finish → grading submit %s; grading finish → next agent submit %s",
		tl.wall.Round(time.Millisecond), tl.first.Round(time.Millisecond), tl.tail.Round(time.Millisecond),
		float64(tl.busy)/float64(tl.wall), tl.places, q(tl.queue), q(tl.run), q(tl.handoff), q(tl.next))
}

// timeline reads the jobs whose key is LIKE pattern (an instance's two
// ending in "agent" and "grade", the instance the key before them) and
// lays them out from start to end, places instances at a time.
func (pb *pipeBench) timeline(t testing.TB, pattern string, places int, start, end time.Time) evalTimeline {
	rs, err := pb.storeDB(t).Query(`SELECT id, key, created_at FROM jobs WHERE key LIKE ?`, pattern)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	type span struct{ submit, offer, done time.Time }
	type inst struct{ agent, grade span }
	insts := map[string]*inst{}
	tl := evalTimeline{places: places, wall: end.Sub(start), first: time.Hour}
	var last time.Time
	for rs.Next() {
		var id, key string
		var ms int64
		if err := rs.Scan(&id, &key, &ms); err != nil {
			t.Fatal(err)
		}
		pb.fl.mu.Lock()
		s := span{time.UnixMilli(ms), pb.fl.offers[id], pb.fl.done[id]}
		pb.fl.mu.Unlock()
		i := strings.LastIndexByte(key, ':')
		in := insts[key[:i]]
		if in == nil {
			in = &inst{}
			insts[key[:i]] = in
		}
		if key[i+1:] == "agent" {
			in.agent = s
		} else {
			in.grade = s
		}
		tl.first = min(tl.first, s.submit.Sub(start))
		if s.done.After(last) {
			last = s.done
		}
		tl.busy += s.done.Sub(s.offer)
		tl.queue = append(tl.queue, s.offer.Sub(s.submit))
		tl.run = append(tl.run, s.done.Sub(s.offer))
	}
	if err := rs.Err(); err != nil {
		t.Fatal(err)
	}
	tl.tail = end.Sub(last)
	var agents, grades []time.Time
	for _, in := range insts {
		tl.handoff = append(tl.handoff, in.grade.submit.Sub(in.agent.done))
		agents = append(agents, in.agent.submit)
		grades = append(grades, in.grade.done)
	}
	// The k-th agent submit after the first places takes the place the
	// k-th grading finish freed.
	slices.SortFunc(agents, func(a, b time.Time) int { return a.Compare(b) })
	slices.SortFunc(grades, func(a, b time.Time) int { return a.Compare(b) })
	for k := places; k < len(agents); k++ {
		tl.next = append(tl.next, agents[k].Sub(grades[k-places]))
	}
	return tl
}
