package hub

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/webhook"
)

// BenchmarkWebhookDelivery: outbound delivery latency after a job finishes
// (issue 28, docs/benchmarks.md): exec jobs one at a time on a runner of
// the bench fleet (accepted at once, finished with exit 0), each from its
// finish acknowledged to the hook's job.finished arriving at a receiver on
// loopback; then a burst of jobs at once, counting events lost or doubled.
func BenchmarkWebhookDelivery(b *testing.B) {
	const serial, burst = 100, 200
	pb := newPipeBench(b, 4)
	var mu sync.Mutex
	arrived := map[string]time.Time{}
	count := map[string]int{}
	rc := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		at := time.Now()
		body, _ := io.ReadAll(r.Body)
		var p webhook.Payload
		if json.Unmarshal(body, &p) == nil {
			mu.Lock()
			if _, ok := arrived[p.Job.ID]; !ok {
				arrived[p.Job.ID] = at
			}
			count[p.Job.ID]++
			mu.Unlock()
		}
		w.WriteHeader(http.StatusNoContent)
	}))
	b.Cleanup(rc.Close)
	hook, err := pb.th.h.webhooks.AddWebhook(b.Context(), pb.c, apitypes.WebhookRequest{URL: rc.URL, Events: []string{"job.finished"}})
	if err != nil {
		b.Fatal(err)
	}
	arrival := func(id string) time.Time {
		deadline := time.Now().Add(2 * time.Minute)
		for {
			mu.Lock()
			at, ok := arrived[id]
			mu.Unlock()
			if ok {
				return at
			}
			if time.Now().After(deadline) {
				b.Fatalf("job %s's job.finished never arrived", id)
			}
			time.Sleep(time.Millisecond)
		}
	}
	var lat []time.Duration
	var all []string
	for b.Loop() {
		for k := range serial {
			pb.n++
			id := pb.submit(b, "hook", fmt.Sprint(pb.n), fmt.Sprint(k))
			pb.fl.waitDone(b, id)
			lat = append(lat, arrival(id).Sub(pb.fl.doneOf(id)))
			all = append(all, id)
		}
		pb.n++
		ids := make([]string, burst)
		var wg sync.WaitGroup
		for w := range 4 {
			wg.Go(func() {
				for i := w; i < burst; i += 4 {
					ids[i] = pb.submit(b, "burst", fmt.Sprint(pb.n), fmt.Sprint(i))
				}
			})
		}
		wg.Wait()
		for _, id := range ids {
			arrival(id)
		}
		all = append(all, ids...)
	}
	// Once every delivery's outcome is recorded, none is sent again.
	for settled := false; !settled; time.Sleep(10 * time.Millisecond) {
		l, err := pb.th.h.webhooks.WebhookDeliveries(b.Context(), pb.c, hook.ID, 1000)
		if err != nil {
			b.Fatal(err)
		}
		settled = true
		for _, d := range l.Deliveries {
			settled = settled && d.State == "delivered"
		}
	}
	var lost, doubled int
	mu.Lock()
	for _, id := range all {
		switch n := count[id]; {
		case n == 0:
			lost++
		case n > 1:
			doubled++
		}
	}
	mu.Unlock()
	q := benchQuantiles(lat)
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	b.ReportMetric(ms(q.p50), "finish-to-hook-p50-ms")
	b.ReportMetric(ms(q.p99), "finish-to-hook-p99-ms")
	b.ReportMetric(float64(lost), "lost")
	b.ReportMetric(float64(doubled), "doubled")
	b.Logf("%d jobs one at a time: finish acknowledged → job.finished at the receiver p50 %v p99 %v max %v; %d in bursts: %d lost, %d doubled",
		len(lat), q.p50, q.p99, q.max, len(all)-len(lat), lost, doubled)
}
