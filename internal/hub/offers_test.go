package hub

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/protocol"
	"drover/internal/store"
)

// passProbe holds the dispatcher's read of the queue while hold is set, and
// counts the offers' writes in flight at once while want is set: each
// waits until want of them are in flight (or patience runs out), so offers
// made one after another never overlap and offers made side by side do.
type passProbe struct {
	mu       sync.Mutex
	hold     chan struct{} // non-nil: a read of the queue waits for it to close
	held     chan struct{} // gets a value when a read of the queue is held
	want     int
	inflight int
	most     int
	together chan struct{} // closed once want writes were in flight
}

const probePatience = 10 * time.Second

type passProbeStore struct {
	store.Store
	p *passProbe
}

func (s passProbeStore) Read(ctx context.Context, fn func(store.Tx) error) error {
	return s.Store.Read(ctx, func(tx store.Tx) error { return fn(passProbeTx{tx, s.p}) })
}

func (s passProbeStore) Write(ctx context.Context, fn func(store.Tx) error) error {
	p := s.p
	p.mu.Lock()
	if p.want == 0 || !offering() {
		p.mu.Unlock()
		return s.Store.Write(ctx, fn)
	}
	p.inflight++
	p.most = max(p.most, p.inflight)
	if p.inflight >= p.want {
		select {
		case <-p.together:
		default:
			close(p.together)
		}
	}
	together := p.together
	p.mu.Unlock()
	t := time.NewTimer(probePatience)
	select {
	case <-together:
	case <-t.C:
	}
	t.Stop()
	err := s.Store.Write(ctx, fn)
	p.mu.Lock()
	p.inflight--
	p.mu.Unlock()
	return err
}

// offering says whether the write is an offer's (the hub's own writes,
// its liveness and sweeps, go on meanwhile and are not counted).
func offering() bool {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(3, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, ".(*Hub).offer") {
			return true
		}
		if !more {
			return false
		}
	}
}

type passProbeTx struct {
	store.Tx
	p *passProbe
}

func (t passProbeTx) QueuedHeadsWithRequesters(perShape int) ([]store.Job, map[string]store.User, error) {
	t.p.mu.Lock()
	hold, held := t.p.hold, t.p.held
	t.p.mu.Unlock()
	if hold != nil {
		select {
		case held <- struct{}{}:
		default:
		}
		<-hold
	}
	return t.Tx.QueuedHeadsWithRequesters(perShape)
}

// TestPassOffersSideBySide: a pass that offers n jobs to n runners makes
// the offers side by side, so the store can commit them together; made one
// after another, each waited for the commit before it, and a burst was
// dispatched at one offer per commit. Each runner is offered exactly one of
// the jobs, each job once.
func TestPassOffersSideBySide(t *testing.T) {
	t.Parallel()
	const n = 4
	p := &passProbe{held: make(chan struct{}, 1)}
	th := startHubOn(t, Config{}, func(st store.Store) store.Store { return passProbeStore{st, p} })
	var runners []*scriptRunner
	for i := range n {
		sr, _ := th.dial(th.registerRunner(fmt.Sprint("side", i)), protocol.Hello{Slots: 1})
		runners = append(runners, sr)
	}
	// Hold the dispatcher before its read of the queue, so that one pass
	// finds all n jobs.
	p.mu.Lock()
	p.hold = make(chan struct{})
	hold := p.hold
	p.mu.Unlock()
	jobs := map[string]bool{}
	for range n {
		jobs[th.submitAs(th.admin, apitypes.SubmitRequest{}).ID] = false
	}
	select {
	case <-p.held:
	case <-time.After(time.Minute):
		t.Fatal("no dispatch pass read the queue after the submits")
	}
	p.mu.Lock()
	p.want, p.together, p.hold = n, make(chan struct{}), nil
	p.mu.Unlock()
	close(hold)
	for i, sr := range runners {
		o := offerWithin(t, sr, time.Duration(n+1)*probePatience)
		seen, ok := jobs[o.Job]
		if !ok || seen {
			t.Fatalf("runner %d offered %s: not one of the jobs, or offered twice (%v)", i, o.Job, jobs)
		}
		jobs[o.Job] = true
	}
	p.mu.Lock()
	most := p.most
	p.mu.Unlock()
	if most < n {
		t.Fatalf("at most %d writes in flight at once for a pass of %d offers; want the %d side by side", most, n, n)
	}
}

// offerWithin is the runner's next offer, waited for up to d (offers made
// one after another wait out the probe's patience each).
func offerWithin(t *testing.T, sr *scriptRunner, d time.Duration) protocol.Offer {
	t.Helper()
	deadline := time.Now().Add(d)
	for {
		f, err := sr.tryRead(time.Until(deadline))
		if err != nil {
			t.Fatalf("no offer: %v", err)
		}
		if f.Type != protocol.TypeOffer {
			continue
		}
		var o protocol.Offer
		if err := f.Decode(&o); err != nil {
			t.Fatal(err)
		}
		return o
	}
}
