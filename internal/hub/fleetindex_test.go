package hub

import (
	"fmt"
	"math/rand/v2"
	"regexp"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/protocol"
	"drover/internal/store"
)

// TestShapeIndexPicksAsTheScan: over random fleets and queues (a fixed
// seed), the candidates a pass reads through the shape index give every
// job the runner a look at every connected runner gives (the same owner
// preference, account rank and free slots; ties may go to another runner
// of the same standing), or, when none fits, the same reason it waits.
func TestShapeIndexPicksAsTheScan(t *testing.T) {
	t.Parallel()
	rng := rand.New(rand.NewPCG(30, 1))
	users := []string{"u1", "u2", "u3"}
	pick := func(xs []string) string { return xs[rng.IntN(len(xs))] }
	labelSets := []map[string]string{nil, {"os": "linux"}, {"os": "mac"}, {"os": "linux", "gpu": "yes"}, {"pool": "idle"}}
	imageSets := [][]string{nil, {"alpine"}, {"debian*"}, {"alpine", "debian:12"}}
	now := time.Now()
	for round := range 300 {
		h := &Hub{reg: newRegistry(), now: func() time.Time { return now }}
		n := 1 + rng.IntN(40)
		for i := range n {
			labels, images := labelSets[rng.IntN(len(labelSets))], imageSets[rng.IntN(len(imageSets))]
			rn := store.Runner{ID: fmt.Sprintf("r%d", i), OwnerID: pick(users)}
			if rng.IntN(8) == 0 {
				rn.Access = apitypes.AccessHub
			}
			var shares []store.Share
			if rng.IntN(3) == 0 {
				at := now
				shares = append(shares, store.Share{RunnerID: rn.ID, Kind: store.ShareUser, Subject: pick(users), AcceptedAt: &at})
			}
			c := &runnerSession{runnerID: rn.ID, name: rn.ID, labels: labels, images: images, shape: shapeOf(labels, images),
				slots: rng.IntN(3), agents: []string{"exec"}, access: newRunnerAccess(rn, shares)}
			if rng.IntN(2) == 0 {
				c.agents = append(c.agents, "claude")
				c.accounts = []protocol.AccountInfo{{ID: "a" + rn.ID, Agent: "claude", State: protocol.AccountReady}}
			}
			if rng.IntN(10) == 0 {
				c.notReady = "updating"
			}
			if rng.IntN(10) == 0 {
				c.cooldownUntil = now.Add(time.Second)
			}
			if rng.IntN(10) == 0 {
				c.wantQueue = true
			}
			h.reg.putLocked(c)
			for k := range rng.IntN(2) {
				h.reg.addActiveLocked(c.runnerID, fmt.Sprintf("%s-a%d", c.runnerID, k))
			}
		}
		var queued []store.Job
		for i := range 1 + rng.IntN(4) {
			j := store.Job{ID: fmt.Sprintf("j%d", i), RequesterID: pick(users), Agent: "exec",
				Labels: labelSets[rng.IntN(len(labelSets))], Image: pick([]string{"", "", "alpine", "debian:12", "ubuntu"})}
			if rng.IntN(3) == 0 {
				j.Agent = "claude"
			}
			queued = append(queued, j)
		}
		all, _, allTop := h.gather(func(each func(*runnerSession)) {
			for _, c := range h.reg.conns {
				each(c)
			}
		})
		cands, _, top := h.candidates(queued)
		var others []*candidate
		for _, j := range queued {
			prefer := ""
			if rng.IntN(4) == 0 {
				prefer = fmt.Sprintf("r%d", rng.IntN(n))
			}
			wantBest, _, wantWhy := pickRunner(j, all, allTop, false, nil, prefer, credNeed{})
			best, _, why := pickRunner(j, cands, top, false, nil, prefer, credNeed{})
			if best < 0 {
				why = h.whyOverAll(j, cands, top, &others, queued, false, nil, credNeed{}, why)
			}
			switch {
			case (best < 0) != (wantBest < 0):
				t.Fatalf("round %d, job %+v: the index picks %d, the scan %d (why %q / %q)", round, j, best, wantBest, why, wantWhy)
			case best < 0 && notReadyName.ReplaceAllString(why, "(") != notReadyName.ReplaceAllString(wantWhy, "("):
				t.Fatalf("round %d, job %+v: the index says %q, the scan %q", round, j, why, wantWhy)
			case best >= 0:
				got, want := cands[best], all[wantBest]
				if prefer != "" && want.c.runnerID == prefer {
					if got.c.runnerID != prefer {
						t.Fatalf("round %d, job %+v: the index picks %s, not the preferred %s", round, j, got.c.runnerID, prefer)
					}
					continue
				}
				if _, _, _, ok := got.fit(j, false, nil, credNeed{}); !ok || got.free <= 0 || got.notReady != "" {
					t.Fatalf("round %d, job %+v: the index picks %s, which cannot take it", round, j, got.c.runnerID)
				}
				gotOwn, wantOwn := got.access.owner == j.RequesterID, want.access.owner == j.RequesterID
				_, _, gotRank, _ := got.fit(j, false, nil, credNeed{})
				_, _, wantRank, _ := want.fit(j, false, nil, credNeed{})
				if gotOwn != wantOwn || gotRank != wantRank || got.free != want.free {
					t.Fatalf("round %d, job %+v: the index picks %s (own %v, rank %d, free %d), the scan %s (own %v, rank %d, free %d)",
						round, j, got.c.runnerID, gotOwn, gotRank, got.free, want.c.runnerID, wantOwn, wantRank, want.free)
				}
			}
		}
	}
}

// notReadyName is the runner a why names when every runner that fits is
// not ready: the first one met, in the registry's map order either way.
var notReadyName = regexp.MustCompile(`\(r\d+: `)

// TestShapeIndexFollowsConnections: a replaced or removed connection
// leaves its shape, and an empty shape goes.
func TestShapeIndexFollowsConnections(t *testing.T) {
	t.Parallel()
	r := newRegistry()
	mk := func(id string, labels map[string]string) *runnerSession {
		return &runnerSession{runnerID: id, labels: labels, shape: shapeOf(labels, nil)}
	}
	a, b := mk("r1", map[string]string{"os": "linux"}), mk("r2", map[string]string{"os": "linux"})
	r.putLocked(a)
	r.putLocked(b)
	if len(r.shapes) != 1 || len(r.shapes[a.shape].conns) != 2 {
		t.Fatalf("two runners of one shape: %d shapes", len(r.shapes))
	}
	a2 := mk("r1", map[string]string{"os": "mac"})
	if old := r.putLocked(a2); old != a {
		t.Fatalf("put replaced %v, want the first connection", old)
	}
	if len(r.shapes) != 2 || r.shapes[a.shape].conns["r1"] != nil {
		t.Fatalf("the replaced connection stays in its shape: %+v", r.shapes)
	}
	if r.remove(a) {
		t.Fatal("removed a connection already replaced")
	}
	r.remove(b)
	r.remove(a2)
	if len(r.shapes) != 0 {
		t.Fatalf("%d shapes left with no runner connected", len(r.shapes))
	}
}
