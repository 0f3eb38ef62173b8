package publish_test

import (
	"fmt"
	"net/http"
	"slices"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/gitcmd"
	"drover/internal/store"
)

// BenchmarkPublishPullRequest measures a job's publication as a pull
// request on a real Gitea (a branch pushed, its pull request looked for
// and opened), each against a baseline made in the same iteration: a bare
// git push of another commit and one API call opening its pull request.
// It reports both medians and 99th percentiles, their ratios, and the API
// calls a publication made. Run with -benchtime=50x for 50 jobs.
func BenchmarkPublishPullRequest(b *testing.B) {
	bn := newBench(b)
	s := bn.service(b.Context())
	// API calls: every request through the proxy but git's.
	api := func() int {
		return bn.proxy.Count("", "") - bn.proxy.Count("", "/info/refs") - bn.proxy.Count("", "/git-receive-pack") -
			bn.proxy.Count("", "/git-upload-pack")
	}
	var pub, bare []time.Duration
	calls := 0
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		id := fmt.Sprintf("b%d", i)
		bn.job(id, store.ProjectConfig{})
		other := bn.commit(bn.base, "bare "+id)
		before := api()
		b.StartTimer()

		t0 := time.Now()
		v, err := s.PublishJob(b.Context(), alice, id, apitypes.PublishRequest{})
		pub = append(pub, time.Since(t0))
		if err != nil || v.State != "done" {
			b.Fatalf("publication %s = %+v, %v", id, v, err)
		}
		calls += api() - before

		t0 = time.Now()
		if _, err := bn.git.Run(b.Context(), gitcmd.Cmd{Dir: bn.hubDir, Args: []string{"push", "-q", bn.proxy.URL + "/" + bn.repo + ".git",
			other + ":refs/heads/bare/" + id}, Env: gitcmd.HeaderEnv(bn.g.AdminToken)}); err != nil {
			b.Fatal(err)
		}
		bn.g.API(b, bn.g.AdminToken, http.MethodPost, "/repos/"+bn.repo+"/pulls",
			map[string]string{"head": "bare/" + id, "base": "main", "title": "bare " + id}, nil)
		bare = append(bare, time.Since(t0))
	}
	b.StopTimer()
	p50, p99 := quantile(pub, 0.5), quantile(pub, 0.99)
	b50, b99 := quantile(bare, 0.5), quantile(bare, 0.99)
	b.ReportMetric(float64(p50.Milliseconds()), "p50-ms")
	b.ReportMetric(float64(p99.Milliseconds()), "p99-ms")
	b.ReportMetric(float64(b50.Milliseconds()), "bare-p50-ms")
	b.ReportMetric(float64(b99.Milliseconds()), "bare-p99-ms")
	b.ReportMetric(float64(p50)/float64(b50), "p50-ratio")
	b.ReportMetric(float64(p99)/float64(b99), "p99-ratio")
	b.ReportMetric(float64(calls)/float64(len(pub)), "api-calls/job")
	b.Logf("%d publications: p50 %v p99 %v; bare push + API call: p50 %v p99 %v", len(pub), p50, p99, b50, b99)
}

func quantile(ds []time.Duration, q float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}
