package hub

import (
	"fmt"
	"testing"

	"drover/internal/testkit"
)

// 2,000 runners connected at once, each with a label of its own, and one
// job per label submitted in a burst: every runner is offered exactly its
// job, once (issue 30). A pass that offered a job twice, or to a runner
// without its label, or lost one, shows here and not with a handful of
// runners.
func TestDispatchTwoThousandRunnersEachItsJobOnce(t *testing.T) {
	t.Parallel()
	n := 2000
	if testkit.Race {
		// Under the race detector the store's commits (three per job) run
		// many times slower: 2,000 jobs took over ten minutes on a busy
		// 2-core machine. 400 keep it near two; without the detector it
		// takes 2,000 (about a minute).
		n = 400
	}
	th := startHub(t, Config{})
	rs := make([]benchRunner, n)
	for i := range rs {
		rs[i] = benchRunner{url: th.srv.URL, token: th.registerRunner(fmt.Sprintf("s%04d", i)), labels: map[string]string{"slot": fmt.Sprint(i)}}
	}
	fl := newBenchFleet()
	defer fl.close()
	fl.join(t, fmt.Sprintf("%d runners", n), rs, th.h.cfg.Heartbeat/2)
	if t.Failed() {
		t.FailNow()
	}

	b := fl.burst(t, n, func(i int) string { return benchSubmit(t, th, rs[i].labels) })
	t.Logf("%v", b)
	fl.mu.Lock()
	defer fl.mu.Unlock()
	if len(fl.count) != n || len(fl.done) != n {
		t.Errorf("%d jobs offered, %d finished; want %d of each", len(fl.count), len(fl.done), n)
	}
	for job, k := range fl.count {
		if k != 1 {
			t.Errorf("job %s offered %d times", job, k)
		}
	}
	if k := fl.astray.Load(); k > 0 {
		t.Errorf("%d offers went to a runner without the job's label", k)
	}
	if k := fl.lost.Load(); k > 0 {
		t.Errorf("%d runner connections ended", k)
	}
}
