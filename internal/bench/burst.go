package bench

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"drover/internal/apitypes"
	"drover/internal/protocol"
)

// burstSubmitters is how many clients submit a burst at once.
const burstSubmitters = 8

// Burst is a burst of jobs submitted at once by burstSubmitters clients to
// the idle runners, which take each offer to its finish at once (no
// process, empty log): how fast the hub dispatches with that many runners
// connected when jobs queue up.
type Burst struct {
	Runners    int           // connected runners (the idle ones take the jobs)
	Jobs       int           // submitted, all dispatched and completed
	Submitted  time.Duration // first submit sent → last submit returned
	Dispatched time.Duration // first submit sent → last offer at a runner
	Completed  time.Duration // first submit sent → last finish acknowledged
	Offer      Stage         // each job's submit sent → its offer at a runner: mostly time in the queue
	// Statements is how many SQL statements the hub ran over the burst
	// (its drover_store_statements_total), -1 when it does not count them.
	Statements int64
}

func perSecond(n int, d time.Duration) float64 {
	if d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// DispatchRate is jobs offered to runners per second over the burst.
func (b Burst) DispatchRate() float64 { return perSecond(b.Jobs, b.Dispatched) }

// CompleteRate is jobs completed per second over the burst.
func (b Burst) CompleteRate() float64 { return perSecond(b.Jobs, b.Completed) }

// burstJob is the job a burst submits: any idle runner may take it.
func burstJob() apitypes.SubmitRequest {
	return apitypes.SubmitRequest{Agent: "exec", Args: []string{"true"}, Labels: idleLabels()}
}

// isBurstJob tells a burst job's offer from any other.
func isBurstJob(s protocol.JobSpec) bool { return maps.Equal(s.Labels, idleLabels()) }

// burstLog is what the fleet's readers saw of burst jobs.
type burstLog struct {
	mu      sync.Mutex
	offers  map[string]time.Time // job → its first offer's arrival
	done    map[string]time.Time // job → its finish acknowledged
	err     error                // the first refusal
	changed chan struct{}        // a non-blocking nudge after every change
}

func (l *burstLog) init() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.changed == nil {
		l.offers, l.done, l.changed = map[string]time.Time{}, map[string]time.Time{}, make(chan struct{}, 1)
	}
}

func (l *burstLog) nudge() {
	select {
	case l.changed <- struct{}{}:
	default:
	}
}

func (l *burstLog) offered(job string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if _, ok := l.offers[job]; !ok && l.offers != nil {
		l.offers[job] = time.Now()
	}
}

func (l *burstLog) finished(job string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.done != nil {
		l.done[job] = time.Now()
		l.nudge()
	}
}

func (l *burstLog) failed(err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.err == nil {
		l.err = err
		if l.changed != nil {
			l.nudge()
		}
	}
}

// wait returns once every job in ids is finished; it fails when a reply was
// a refusal or nothing finished for frameWait.
func (l *burstLog) wait(ctx context.Context, ids []string) error {
	for {
		l.mu.Lock()
		n, err := 0, l.err
		for _, id := range ids {
			if _, ok := l.done[id]; ok {
				n++
			}
		}
		l.mu.Unlock()
		switch {
		case err != nil:
			return err
		case n == len(ids):
			return nil
		}
		t := time.NewTimer(frameWait)
		select {
		case <-l.changed:
			t.Stop()
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("burst: %w", ctx.Err())
		case <-t.C:
			return fmt.Errorf("burst: %d of %d jobs finished, none more within %s", n, len(ids), frameWait)
		}
	}
}

// summarizeBurst turns the log of a burst that began at begin into its
// figures; starts[i] is when ids[i]'s submit was sent.
func (l *burstLog) summarize(begin time.Time, ids []string, starts []time.Time) (Burst, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := Burst{Jobs: len(ids)}
	queued := make([]time.Duration, len(ids))
	for i, id := range ids {
		offered, ok1 := l.offers[id]
		done, ok2 := l.done[id]
		if !ok1 || !ok2 {
			return b, fmt.Errorf("burst job %s: offered %v, finished %v", id, ok1, ok2)
		}
		queued[i] = offered.Sub(starts[i])
		b.Dispatched = max(b.Dispatched, offered.Sub(begin))
		b.Completed = max(b.Completed, done.Sub(begin))
	}
	b.Offer = stageOf(queued)
	return b, nil
}

// runBurst submits n burst jobs from burstSubmitters clients at once and
// waits until the fleet has finished them all.
func runBurst(ctx context.Context, api *apiClient, fl *fleet, n int) (Burst, error) {
	if fl.size() == 0 {
		return Burst{}, errors.New("burst: no idle runners to take the jobs")
	}
	fl.burst.init()
	ids := make([]string, n)
	starts := make([]time.Time, n)
	errs := make([]error, burstSubmitters)
	var next atomic.Int64
	var wg sync.WaitGroup
	begin := time.Now()
	for w := range burstSubmitters {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < n; i = int(next.Add(1) - 1) {
				var v apitypes.JobView
				start := time.Now()
				code, err := api.callStatus(ctx, http.MethodPost, "/jobs", burstJob(), &v)
				if err == nil && code != http.StatusCreated {
					err = fmt.Errorf("status %d, want 201", code)
				}
				if err != nil {
					errs[w] = fmt.Errorf("burst: submit job %d: %w", i, err)
					return
				}
				ids[i], starts[i] = v.ID, start
			}
		})
	}
	wg.Wait()
	submitted := time.Since(begin)
	if err := errors.Join(errs...); err != nil {
		return Burst{}, err
	}
	if err := fl.burst.wait(ctx, ids); err != nil {
		return Burst{}, err
	}
	b, err := fl.burst.summarize(begin, ids, starts)
	b.Submitted = submitted
	return b, err
}
