package hub

import (
	"context"
	"fmt"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coder/websocket"

	"drover/internal/apitypes"
	"drover/internal/protocol"
	"drover/internal/store"
)

// readCounts counts what a hub reads: every held runner (HeldRunners, a
// row per connected runner), the active attempts (a sweep's, a
// departure's, a cross sweep's), every runner's token (the cross sweep's
// net), the hubs.
type readCounts struct{ held, active, tokens, hubs atomic.Int64 }

// readCountStore is a store whose reads are counted in c.
type readCountStore struct {
	store.Store
	c *readCounts
}

func (s readCountStore) Read(ctx context.Context, fn func(store.Tx) error) error {
	return s.Store.Read(ctx, func(tx store.Tx) error { return fn(readCountTx{tx, s.c}) })
}

type readCountTx struct {
	store.Tx
	c *readCounts
}

func (t readCountTx) HeldRunners(liveSince time.Time) (map[string]string, error) {
	t.c.held.Add(1)
	return t.Tx.HeldRunners(liveSince)
}

func (t readCountTx) ActiveAttempts() ([]store.Attempt, error) {
	t.c.active.Add(1)
	return t.Tx.ActiveAttempts()
}

func (t readCountTx) RunnerTokens() (map[string]string, error) {
	t.c.tokens.Add(1)
	return t.Tx.RunnerTokens()
}

func (t readCountTx) Hubs() ([]store.Hub, error) {
	t.c.hubs.Add(1)
	return t.Tx.Hubs()
}

// TestIdleSweepReadsNoRunnerRows: a sweep over an idle fleet (nothing
// offered or running) reads no row per runner; it read every held runner
// at each pass, a sweep costing the hub more the more runners idled on
// it. An attempt of a runner that left still has its holder read.
func TestIdleSweepReadsNoRunnerRows(t *testing.T) {
	t.Parallel()
	var reads readCounts
	th := startHubOn(t, Config{}, func(st store.Store) store.Store { return readCountStore{st, &reads} })
	var runners []*scriptRunner
	for i := range 3 {
		sr, _ := th.dial(th.registerRunner(fmt.Sprintf("idle%d", i)), protocol.Hello{Slots: 1, Labels: map[string]string{"idle": fmt.Sprint(i)}})
		runners = append(runners, sr)
	}
	ctx := context.Background()
	before := reads.held.Load()
	for range 3 {
		if _, err := th.h.sweep(ctx, true); err != nil {
			t.Fatal(err)
		}
	}
	if n := reads.held.Load() - before; n != 0 {
		t.Fatalf("3 sweeps of an idle fleet read every held runner %d times; want 0", n)
	}

	// A running attempt of a runner that left: its holder decides who
	// sweeps it, so it is read.
	// Labelled for runner 0: an unlabelled job may go to any of the three.
	var j apitypes.JobView
	if code, e := th.call(th.admin, "POST", "/jobs", apitypes.SubmitRequest{Agent: "exec", Args: []string{"true"}, Labels: map[string]string{"idle": "0"}}, &j); code != http.StatusCreated {
		t.Fatalf("submit: %d %v", code, e)
	}
	o := runners[0].offer()
	if o.Job != j.ID {
		t.Fatalf("offer for %s, want %s", o.Job, j.ID)
	}
	wantOK(t, runners[0].request(protocol.TypeAccept, protocol.Accept{AttemptRef: o.AttemptRef}))
	runners[0].ws.Close(websocket.StatusNormalClosure, "")
	th.waitRunner("idle0", false)
	before = reads.held.Load()
	if _, err := th.h.sweep(ctx, true); err != nil {
		t.Fatal(err)
	}
	if reads.held.Load() == before {
		t.Fatal("the sweep did not read who holds a runner that left with a running attempt")
	}
}

// BenchmarkPickAmongIdleFleet times choosing the runner of a job whose
// label only one idle runner has, among 10 and among 10,000 idle runners
// (the dispatch latency to one idle runner among many): the choice reads
// every candidate, so the ratio of the two is the fleet's share of it.
//
//	go test -run XXX -bench PickAmongIdleFleet ./internal/hub
func BenchmarkPickAmongIdleFleet(b *testing.B) {
	for _, n := range []int{10, 10_000} {
		b.Run(fmt.Sprintf("runners=%d", n), func(b *testing.B) {
			cands := make([]*candidate, n)
			for i := range cands {
				c := &runnerSession{runnerID: fmt.Sprint("r", i), name: fmt.Sprint("idle", i), slots: 1,
					labels: map[string]string{"bench": fmt.Sprint("idle", i)}, agents: []string{"exec"},
					access: &runnerAccess{owner: "admin"}}
				cands[i] = &candidate{c: c, free: 1, agents: c.agents, access: c.access}
			}
			j := store.Job{ID: "j", Agent: "exec", RequesterID: "admin", Labels: map[string]string{"bench": fmt.Sprint("idle", n-1)}}
			b.ResetTimer()
			for range b.N {
				if best, _, why := pickRunner(j, cands, 1, false, nil, "", credNeed{}); best != n-1 {
					b.Fatalf("picked %d (%s), want the last", best, why)
				}
			}
		})
	}
}
