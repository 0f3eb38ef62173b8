package workspace

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"drover/internal/gitcmd"
)

// BenchmarkPooledReset repeats step (b) of BenchmarkWorkspace alone: a
// pooled worktree of 100,000 files reset to a base 10 files away, back and
// forth, each reset narrowed by the monitor and written by drover itself.
// It reports each Prepare's wall and CPU time (drover's and its git
// children's); only the Prepare is timed, not the Release between them.
// Set DROVER_BENCH_LOG=1 for the phases, DROVER_BENCH_TRACE=FILE for
// git's own (GIT_TRACE2_PERF):
//
//	go test -run XXX -bench BenchmarkPooledReset ./internal/workspace -benchtime 20x
func BenchmarkPooledReset(b *testing.B) {
	const files, changed = 100_000, 10
	tmp := b.TempDir()
	_, _, base, next, bare := benchRepo(b, tmp, files, changed)
	var out io.Writer = io.Discard
	if os.Getenv("DROVER_BENCH_LOG") != "" {
		out = os.Stderr
	}
	var g gitcmd.Git
	if f := os.Getenv("DROVER_BENCH_TRACE"); f != "" {
		g.Env = []string{"GIT_TRACE2_PERF=" + f}
	}
	c, err := NewCache(CacheConfig{Home: filepath.Join(tmp, "home"), Git: g, Logger: slog.New(slog.NewTextHandler(out, &slog.HandlerOptions{Level: slog.LevelDebug}))})
	noErr(b, err)
	src := Source{Project: "bench", URL: "file://" + bare}
	for _, head := range []string{base, next} { // fetch both, and leave one worktree in the pool
		w, err := c.Prepare(b.Context(), src, "job-setup", head)
		noErr(b, err)
		w.Ready()
		noErr(b, w.Release(b.Context()))
	}
	heads := [2]string{base, next}
	var wall, cpu time.Duration
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		b.StopTimer()
		cpu0 := cpuTime(b)
		b.StartTimer()
		start := time.Now()
		w, err := c.Prepare(b.Context(), src, fmt.Sprint("job-", i), heads[i%2])
		noErr(b, err)
		w.Ready()
		wall += time.Since(start)
		b.StopTimer()
		cpu += cpuTime(b) - cpu0
		if w.resetHow != "changed paths" || !w.resetWrote {
			b.Fatalf("reset %d went %q (written %v), want the narrowed reset writing the files", i, w.resetHow, w.resetWrote)
		}
		noErr(b, w.Release(b.Context()))
		b.StartTimer()
	}
	b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
	b.ReportMetric(float64(wall.Microseconds())/1000/float64(b.N), "wall-ms/op")
}
