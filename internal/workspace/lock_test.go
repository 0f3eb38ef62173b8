package workspace

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// The locks are shown to matter by running each scenario twice: with them
// (everything must succeed and every job must get its own, correct
// worktree) and with them switched off (something must go wrong). A pause
// inside each critical section (between looking and acting) makes the
// races they close happen every time instead of now and then.
const racePause = 150 * time.Millisecond

// prepared is one job's preparation in a race.
type prepared struct {
	job, head string
	dir       string
	err       error
}

// racePrepare prepares every job at once, job i on caches[i%len(caches)].
func racePrepare(f *cacheFixture, caches []*Cache, heads map[string]string) []prepared {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var out []prepared
	i := 0
	for job, head := range heads {
		c := caches[i%len(caches)]
		i++
		wg.Go(func() {
			p := prepared{job: job, head: head}
			w, err := c.Prepare(f.ctx, f.source(), job, head)
			if p.err = err; err == nil {
				p.dir = w.Dir()
				defer w.Keep()
			}
			mu.Lock()
			out = append(out, p)
			mu.Unlock()
		})
	}
	wg.Wait()
	return out
}

// problems lists what went wrong in a race: errors, two jobs in one
// worktree, a worktree not at its job's head.
func problems(f *cacheFixture, ps []prepared) []string {
	var bad []string
	owner := map[string]string{}
	for _, p := range ps {
		if p.err != nil {
			bad = append(bad, fmt.Sprintf("%s: %v", p.job, p.err))
			continue
		}
		if other, ok := owner[p.dir]; ok {
			bad = append(bad, fmt.Sprintf("%s and %s share %s", p.job, other, p.dir))
		}
		owner[p.dir] = p.job
	}
	for _, p := range ps {
		if p.err != nil {
			continue
		}
		b, err := os.ReadFile(filepath.Join(p.dir, "which"))
		if want := f.git(f.src, "show", p.head+":which"); err != nil || string(b) != want {
			bad = append(bad, fmt.Sprintf("%s: worktree holds %q, want %q (%v)", p.job, b, want, err))
		}
	}
	return bad
}

// threeBases commits three different versions of the file "which".
func threeBases(f *cacheFixture, round string) map[string]string {
	heads := map[string]string{}
	for i := range 3 {
		heads[fmt.Sprintf("%s-job%d", round, i)] = f.commit(map[string]string{"which": fmt.Sprintf("%s-%d", round, i), "common": "c"})
	}
	return heads
}

// judgeRace wants a clean race with locks, and a broken one without.
func judgeRace(t *testing.T, locked bool, bad []string) {
	t.Helper()
	switch {
	case locked && len(bad) > 0:
		t.Errorf("with locks: %s", strings.Join(bad, "; "))
	case !locked && len(bad) == 0:
		t.Error("without locks nothing went wrong: the test does not exercise the race")
	case !locked:
		t.Logf("without locks, as expected: %s", strings.Join(bad, "; "))
	}
}

func withoutLocks(c *Cache) *Cache { c.locks.Off = true; return c }

func paused(c *Cache) *Cache { c.pause = func() { time.Sleep(racePause) }; return c }

// Three jobs on one repository prepared at once in one runner: first into
// an empty home (all race to make the clone), then again once the first
// three went back to the pool (all race for the pooled worktrees).
func TestThreeJobsPreparedAtOnce(t *testing.T) {
	for _, locked := range []bool{true, false} {
		f := newCacheFixture(t)
		c := paused(f.cache)
		if !locked {
			withoutLocks(c)
		}
		var bad []string
		for _, round := range []string{"empty", "pooled"} {
			ps := racePrepare(f, []*Cache{c}, threeBases(f, round))
			bad = append(bad, problems(f, ps)...)
			for _, p := range ps {
				if p.err == nil && round == "empty" {
					w, err := c.Prepare(f.ctx, f.source(), p.job, p.head) // resume, then end the job
					if err == nil {
						noErr(t, w.Release(f.ctx))
					}
				}
			}
		}
		judgeRace(t, locked, bad)
	}
}

// Two runner processes sharing one home, simulated by two independent
// caches (each with its own in-process queue, so only the flock stands
// between them).
func TestTwoCachesShareOneHome(t *testing.T) {
	for _, locked := range []bool{true, false} {
		f := newCacheFixture(t)
		a, b := paused(f.cache), paused(f.newCache(f.home))
		if !locked {
			withoutLocks(a)
			withoutLocks(b)
		}
		bad := problems(f, racePrepare(f, []*Cache{a, b}, threeBases(f, "two")))
		judgeRace(t, locked, bad)
	}
}

// helperEnv carries a prepare request to the test binary run as a second
// process.
const helperEnv = "DROVER_WORKSPACE_HELPER"

type helperRequest struct {
	Home, URL, Job, Head, Go string
	Locked                   bool
}

// TestHelperProcess is not a test: it is the second runner process of
// TestTwoProcessesShareOneHome (the test binary runs itself).
func TestHelperProcess(t *testing.T) {
	raw := os.Getenv(helperEnv)
	if raw == "" {
		t.Skip("only runs as a helper process")
	}
	var req helperRequest
	noErr(t, json.Unmarshal([]byte(raw), &req))
	c, err := NewCache(CacheConfig{Home: req.Home})
	noErr(t, err)
	paused(c)
	c.locks.Off = !req.Locked
	for { // start together with the parent
		if _, err := os.Stat(req.Go); err == nil {
			break
		}
		time.Sleep(time.Millisecond)
	}
	res := prepared{job: req.Job, head: req.Head}
	w, err := c.Prepare(t.Context(), Source{Project: "proj", URL: req.URL}, req.Job, req.Head)
	if err == nil {
		res.dir = w.Dir()
		noErr(t, w.Keep())
	}
	msg := ""
	if err != nil {
		msg = err.Error()
	}
	b, _ := json.Marshal(map[string]string{"dir": res.dir, "err": msg})
	fmt.Printf("HELPER-RESULT %s\n", b)
}

func TestTwoProcessesShareOneHome(t *testing.T) {
	for _, locked := range []bool{true, false} {
		f := newCacheFixture(t)
		heads := threeBases(f, "proc")
		var jobs []string
		for job := range heads {
			jobs = append(jobs, job)
		}
		start := filepath.Join(t.TempDir(), "go")
		req, _ := json.Marshal(helperRequest{Home: f.home, URL: f.source().URL, Job: jobs[0], Head: heads[jobs[0]], Go: start, Locked: locked})
		cmd := exec.CommandContext(f.ctx, os.Args[0], "-test.run=^TestHelperProcess$", "-test.count=1")
		cmd.Env = append(os.Environ(), helperEnv+"="+string(req))
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		noErr(t, cmd.Start())
		c := paused(f.cache)
		c.locks.Off = !locked
		noErr(t, os.WriteFile(start, nil, 0o600))
		ps := racePrepare(f, []*Cache{c}, map[string]string{jobs[1]: heads[jobs[1]], jobs[2]: heads[jobs[2]]})
		if err := cmd.Wait(); err != nil {
			t.Fatalf("helper process: %v\n%s", err, out.String())
		}
		_, result, ok := strings.Cut(out.String(), "HELPER-RESULT ")
		if !ok {
			t.Fatalf("helper process said nothing:\n%s", out.String())
		}
		var hr map[string]string
		noErr(t, json.Unmarshal([]byte(strings.SplitN(result, "\n", 2)[0]), &hr))
		child := prepared{job: jobs[0], head: heads[jobs[0]], dir: hr["dir"]}
		if hr["err"] != "" {
			child.err = fmt.Errorf("%s", hr["err"])
		}
		bad := problems(f, append(ps, child))
		judgeRace(t, locked, bad)
	}
}
