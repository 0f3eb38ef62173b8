//go:build linux

package workspace

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

// Releasing a freshly checked out worktree a second or more after its
// checkout (as after any agent's run) has git rewrite its saved index so
// that no entry can be racily clean (the index newer than every file the
// checkout wrote), with a shared part the next reset keeps; writes racing
// the rewrite (same size, so only git's racy check or the monitor can tell)
// still leave the next pooled reset exactly like a fresh checkout.
func TestReleaseRewritesTheRacySavedIndex(t *testing.T) {
	f := newCacheFixture(t)
	files := map[string]string{}
	for i := range 40 {
		files[fmt.Sprintf("d%d/f%d.txt", i%4, i)] = "0000\n"
	}
	base := f.commit(files)
	next := f.commit(map[string]string{"d0/f0.txt": "next\n"})
	w := f.prepare(f.cache, "job1", base)
	newest := int64(0)
	for p := range files {
		st, err := os.Stat(filepath.Join(w.Dir(), p))
		noErr(t, err)
		newest = max(newest, st.ModTime().Unix())
	}
	st, err := os.Stat(w.path(".index"))
	noErr(t, err)
	time.Sleep(time.Until(st.ModTime().Truncate(time.Second).Add(time.Second))) // what an agent's run takes
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for n := 0; ; n++ {
			select {
			case <-stop:
				return
			default:
			}
			p := filepath.Join(w.Dir(), fmt.Sprintf("d%d/f%d.txt", n%4, n%40))
			if err := os.WriteFile(p, fmt.Appendf(nil, "%04d\n", n%10000), 0o644); err != nil {
				t.Error(err)
				return
			}
		}
	})
	err = w.Release(f.ctx)
	close(stop)
	wg.Wait()
	noErr(t, err)
	st, err = os.Stat(w.path(".index"))
	noErr(t, err)
	if st.ModTime().Unix() <= newest {
		t.Fatalf("saved index written at %d, not after the checkout's last second %d: its entries stay racy", st.ModTime().Unix(), newest)
	}
	f.sh(w.Dir(), "echo after > d1/f1.txt") // the agent's straggler, after the rewrite
	f.fromPoolLikeFresh("job2", next)
}
