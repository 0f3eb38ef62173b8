package fsutil

import (
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// Two Lockers on one transient lock file (as two processes: flock excludes
// two open files of one process too) never hold it at once, although each
// release removes the file a waiter may have opened already; and nothing
// is left behind.
func TestTransientLockExcludesAcrossLockers(t *testing.T) {
	path := filepath.Join(t.TempDir(), "job.lock")
	lockers := []*Locker{{Transient: true}, {Transient: true}, {Transient: true}, {Transient: true}}
	var inside, overlaps atomic.Int32
	var wg sync.WaitGroup
	for i := range 8 {
		l := lockers[i%len(lockers)]
		wg.Go(func() {
			for range 300 {
				unlock, err := l.Lock(t.Context(), path)
				if err != nil {
					t.Error(err)
					return
				}
				if inside.Add(1) > 1 {
					overlaps.Add(1)
				}
				time.Sleep(20 * time.Microsecond) // long enough to be caught
				inside.Add(-1)
				unlock()
			}
		})
	}
	wg.Wait()
	if n := overlaps.Load(); n > 0 {
		t.Fatalf("the lock was held twice at once %d times", n)
	}
	if _, err := os.Stat(path); !os.IsNotExist(err) {
		t.Fatalf("the transient lock file is left: %v", err)
	}
}
