package fleet

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"drover/internal/apitypes"
)

// steppedHub is a hub an autoscaler test drives one Demand answer at a
// time: the autoscaler's Demand call says it is ready, then waits for the
// queue the test gives it.
type steppedHub struct {
	ready   chan struct{}
	queue   chan int
	mu      sync.Mutex
	n       int
	running map[string]int // runner name → attempts running (hub view)
	revoked []string
	reasons []string
}

func (h *steppedHub) Demand(ctx context.Context, _ map[string]string, after uint64, _ time.Duration) (apitypes.Demand, error) {
	select {
	case h.ready <- struct{}{}:
	case <-ctx.Done():
		return apitypes.Demand{}, ctx.Err()
	}
	select {
	case q := <-h.queue:
		return apitypes.Demand{Queued: q, Generation: after + 1}, nil
	case <-ctx.Done():
		return apitypes.Demand{}, ctx.Err()
	}
}

func (h *steppedHub) Launch(_ context.Context, req apitypes.LaunchRequest) (apitypes.LaunchResponse, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.n++
	id := fmt.Sprintf("l-%d", h.n)
	return apitypes.LaunchResponse{LaunchView: apitypes.LaunchView{ID: id},
		Registrations: []apitypes.Registration{{Name: id + "-1", Token: "drr_t"}}}, nil
}

func (h *steppedHub) RevokeLaunch(_ context.Context, id string) (apitypes.LaunchView, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.revoked = append(h.revoked, id)
	return apitypes.LaunchView{}, nil
}

func (h *steppedHub) LaunchFailure(_ context.Context, _, reason string) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.reasons = append(h.reasons, reason)
	return nil
}

func (h *steppedHub) Runners(context.Context) (apitypes.RunnerList, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	var l apitypes.RunnerList
	for name, n := range h.running {
		l.Runners = append(l.Runners, apitypes.RunnerView{Name: name, Connected: true, Running: n})
	}
	return l, nil
}

// listTarget is a target whose runners run until the test says one exited.
type listTarget struct {
	mu       sync.Mutex
	launched []Spec
	exited   map[string]bool
}

func (t *listTarget) Check(context.Context) error { return nil }

func (t *listTarget) Launch(_ context.Context, s Spec) ([]Instance, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.launched = append(t.launched, s)
	return []Instance{{LaunchID: s.LaunchID, Name: s.Runners[0].Name, Running: true}}, nil
}

func (t *listTarget) Stop(context.Context, string) error { return nil }

func (t *listTarget) List(context.Context) ([]Instance, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var out []Instance
	for _, s := range t.launched {
		out = append(out, Instance{LaunchID: s.LaunchID, Name: s.Runners[0].Name, Running: !t.exited[s.Runners[0].Name]})
	}
	return out, nil
}

func (t *listTarget) Logs(context.Context, string, io.Writer) error { return nil }

// The autoscaler's runners are ephemeral: one that took its attempt no
// longer counts as capacity for queued jobs, and once it exited it is gone
// (revoked).
func TestAutoscalerReplacesEphemeralRunnersThatTookTheirAttempt(t *testing.T) {
	hub := &steppedHub{ready: make(chan struct{}), queue: make(chan int), running: map[string]int{}}
	tg := &listTarget{exited: map[string]bool{}}
	ctx, cancel := context.WithCancel(context.Background())
	a := &Autoscaler{Hub: hub, Target: tg, TargetName: "fake", HubURL: "http://h", Max: 3, Slots: 1,
		IdleGrace: time.Hour, Log: slog.New(slog.DiscardHandler)}
	done := make(chan error, 1)
	go func() { done <- a.Run(ctx) }()
	// advance answers one Demand with the queue and returns once the pass
	// it caused is done (the next Demand is waiting).
	<-hub.ready
	advance := func(queued int) {
		hub.queue <- queued
		<-hub.ready
	}
	launched := func() []Spec {
		tg.mu.Lock()
		defer tg.mu.Unlock()
		return slices.Clone(tg.launched)
	}

	advance(2)
	if l := launched(); len(l) != 2 || l[0].MaxJobs != 1 || l[1].MaxJobs != 1 {
		t.Fatalf("after 2 queued: %+v", l)
	}
	// l-1-1 takes a job: it is used. One queued is l-2-1's to take.
	hub.mu.Lock()
	hub.running["l-1-1"] = 1
	hub.mu.Unlock()
	advance(1)
	if l := launched(); len(l) != 2 {
		t.Fatalf("%d launches for one queued job and one fresh runner", len(l))
	}
	// Another job: the used runner will not take it, so one more is launched.
	advance(2)
	if l := launched(); len(l) != 3 {
		t.Fatalf("%d launches, want a third for the job the used runner cannot take", len(l))
	}
	// l-1-1 finished and exited: it is gone (revoked), and the two fresh
	// runners are what two queued jobs want.
	tg.mu.Lock()
	tg.exited["l-1-1"] = true
	tg.mu.Unlock()
	hub.mu.Lock()
	delete(hub.running, "l-1-1")
	hub.mu.Unlock()
	advance(2)
	if l := launched(); len(l) != 3 {
		t.Fatalf("%d launches after the used runner exited, want 3", len(l))
	}
	hub.mu.Lock()
	revoked := slices.Clone(hub.revoked)
	hub.mu.Unlock()
	if !slices.Equal(revoked, []string{"l-1"}) {
		t.Fatalf("revoked %q, want the exited runner's launch", revoked)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
