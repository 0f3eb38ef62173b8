package forgework_test

import (
	"context"
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/forgework"
	"drover/internal/hub/call"
)

// timedCore is fakeCore telling when each job was submitted.
type timedCore struct {
	*fakeCore
	submitted chan time.Time
}

func (c timedCore) Submit(ctx context.Context, p call.Caller, req apitypes.SubmitRequest) (apitypes.JobView, error) {
	v, err := c.fakeCore.Submit(ctx, p, req)
	c.submitted <- time.Now()
	return v, err
}

// BenchmarkHookToSubmit is what a webhook adds before the job is queued:
// the forge's POST received, verified, parsed, recorded, answered, then
// acted on in the background (link, permission, base) up to the core's
// Submit, on SQLite. From Submit on, a forge's job is dispatched like any
// other (docs/benchmarks.md, "Issue 28").
func BenchmarkHookToSubmit(b *testing.B) {
	submitted := make(chan time.Time, 1)
	e := newEnvWith(b, func(c *fakeCore) forgework.Core { return timedCore{c, submitted} })
	e.on(apitypes.ForgeTriggersRequest{Label: "drover:fix"})
	e.link("bob", "alice")
	body := labeled(b, "alice")
	var lat []time.Duration
	b.ResetTimer()
	for i := range b.N {
		start := time.Now()
		if code := e.deliver("issue_label", fmt.Sprint("bench-", i), body); code != http.StatusAccepted {
			b.Fatalf("status %d", code)
		}
		at := <-submitted
		lat = append(lat, at.Sub(start))
	}
	b.StopTimer()
	slices.Sort(lat)
	b.ReportMetric(float64(lat[len(lat)/2].Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds())/1000, "p99-ms")
}
