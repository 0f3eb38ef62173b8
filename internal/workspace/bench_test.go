package workspace

import (
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"drover/internal/gitcmd"
	"drover/internal/hubrepo"
)

// BenchmarkWorkspace measures, side by side on one generated repository of
// 100,000 files, what a runner pays per job:
//
//	(a) a fresh `git clone` from the hub: git http-backend over loopback
//	    HTTP, served by the hub's own handler (and once over file:// for
//	    reference)
//	(b) Prepare from the pool when the new base differs by 10 files
//	(c) Prepare with an empty pool (commit already fetched), and (c')
//	    what Ready then waits for the monitor's first walk, which the
//	    runner overlaps with its other preparations
//	(d) a bare `git worktree add`, the floor for (c), and (d') the same
//	    with the parallel checkout drover's worktrees use
//
// and the publication of a one-file change, and resuming a kept worktree.
// Run it alone, once:
//
//	go test -run XXX -bench BenchmarkWorkspace ./internal/workspace -benchtime 1x
func BenchmarkWorkspace(b *testing.B) {
	const files, changed = 100_000, 10
	for b.Loop() {
		tmp := b.TempDir()
		g, names, base, next, bare := benchRepo(b, tmp, files, changed)
		run := func(dir string, args ...string) string {
			out, err := g.Out(b.Context(), dir, args...)
			if err != nil {
				b.Fatalf("git %v: %v", args, err)
			}
			return out
		}

		c, err := NewCache(CacheConfig{Home: filepath.Join(tmp, "home"), Git: gitcmd.Git{}, Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		noErr(b, err)
		src1 := Source{Project: "bench", URL: "file://" + bare}
		r, _ := c.repoOf("bench")
		noErr(b, c.withLock(b.Context(), r, lockClone, func() error {
			if err := c.ensureClone(b.Context(), r); err != nil {
				return err
			}
			if err := c.ensureCommit(b.Context(), r, src1, base); err != nil {
				return err
			}
			return c.ensureCommit(b.Context(), r, src1, next)
		}))

		// Each step runs more than once, interleaved with the others and
		// in turn first, and the fastest run counts: this machine's disk is
		// shared and its write speed varies several times over from one
		// minute to the next.
		hub := hubServer(b, tmp)
		var clone, add, addPar, fresh, ready time.Duration
		var ws []*Worktree
		for i := range 2 {
			clone = minRun(clone, i, measure1(b, "(a) git clone from the hub (smart HTTP)", func() {
				run(tmp, "clone", "--quiet", hub+"/bare.git", filepath.Join(tmp, fmt.Sprint("clone", i)))
			}))
		}
		steps := []func(i int){
			func(i int) {
				add = minRun(add, i, measure1(b, "(d) git worktree add", func() {
					run(r.dir, "worktree", "add", "--quiet", "--detach", filepath.Join(tmp, fmt.Sprint("plain-wt", i)), base)
				}))
			},
			func(i int) {
				addPar = minRun(addPar, i, measure1(b, "(d') git worktree add, parallel checkout", func() {
					run(r.dir, "-c", "checkout.workers=8", "worktree", "add", "--quiet", "--detach", filepath.Join(tmp, fmt.Sprint("par-wt", i)), base)
				}))
			},
			func(i int) {
				fresh = minRun(fresh, i, measure1(b, "(c) Prepare, empty pool", func() {
					w, err := c.Prepare(b.Context(), src1, fmt.Sprint("job-c", i), base)
					noErr(b, err)
					ws = append(ws, w)
				}))
				// Right after, without measure1's sync, which would give
				// the walk time to end.
				ready = minRun(ready, i, timed(b, "(c') then Ready (the rest of the first walk)", ws[i].Ready))
			},
		}
		for i := range len(steps) {
			for k := range steps {
				steps[(i+k)%len(steps)](i)
			}
		}
		measure1(b, "(a') git clone file:// (for reference)", func() {
			run(tmp, "clone", "--quiet", "file://"+bare, filepath.Join(tmp, "clone-file"))
		})
		for _, w := range ws {
			noErr(b, w.Release(b.Context()))
		}
		var w *Worktree
		var pub Publication
		var pooled, publish time.Duration
		for i := range 2 {
			pooled = minRun(pooled, i, measure1(b, fmt.Sprintf("(b) Prepare from the pool, base differs by %d", changed), func() {
				w, err = c.Prepare(b.Context(), src1, fmt.Sprint("job-b", i), next)
				noErr(b, err)
				w.Ready()
			}))
			write(b, filepath.Join(w.Dir(), names[i]), "one change\n", 0o644)
			publish = minRun(publish, i, measure1(b, "publication of a one-file change", func() {
				commit, err := w.Commit(b.Context(), CommitInfo{Job: w.Job(), Attempt: "a1", Requester: "bench"})
				noErr(b, err)
				pub, err = w.Bundle(b.Context(), commit, filepath.Join(tmp, "pub.bundle"), 0)
				noErr(b, err)
			}))
			if i == 0 {
				noErr(b, w.Keep())
			}
		}
		noErr(b, w.Adopt(b.Context(), pub.Commit))
		noErr(b, w.Keep())
		before := newestChange(b, w.Dir())
		resume := measure1(b, "resume a kept worktree", func() {
			var err error
			w, err = c.Prepare(b.Context(), src1, "job-b1", pub.Commit)
			noErr(b, err)
		})
		if !w.Resumed() || newestChange(b, w.Dir()) != before {
			b.Error("resuming the kept worktree checked something out")
		}
		noErr(b, w.Keep())

		verdict := func(ok bool) string {
			if ok {
				return "met"
			}
			return "MISSED"
		}
		b.Logf("(b) = %s, (b)/(a) = %.2f%% (target ≤ 50 ms, ≤ 1%%: %s)", pooled.Round(time.Millisecond), 100*pooled.Seconds()/clone.Seconds(),
			verdict(pooled <= 50*time.Millisecond && pooled <= clone/100))
		b.Logf("(c)/(d) = %.2f (target ≤ 1.1: %s), with (c') %.2f; against the same parallel checkout, (c)/(d') = %.2f", fresh.Seconds()/add.Seconds(), verdict(fresh.Seconds() <= 1.1*add.Seconds()),
			(fresh+ready).Seconds()/add.Seconds(), fresh.Seconds()/addPar.Seconds())
		b.Logf("publication: %s, bundle %d bytes (targets ≤ 200 ms, ≤ 16 KiB: %s)", publish.Round(time.Millisecond), pub.Size,
			verdict(publish <= 200*time.Millisecond && pub.Size <= 16<<10))
		b.ReportMetric(clone.Seconds(), "clone-s")
		b.ReportMetric(add.Seconds(), "worktree-add-s")
		b.ReportMetric(addPar.Seconds(), "worktree-add-par-s")
		b.ReportMetric(fresh.Seconds(), "fresh-s")
		b.ReportMetric(ready.Seconds(), "ready-s")
		b.ReportMetric(pooled.Seconds(), "pooled-s")
		b.ReportMetric(float64(publish.Milliseconds()), "publish-ms")
		b.ReportMetric(float64(pub.Size), "bundle-B")
		b.ReportMetric(float64(resume.Milliseconds()), "resume-ms")
	}
}

// benchRepo generates a repository of files files in tmp/src, commits
// them (base), changes changed of them (next), and clones it bare
// (tmp/bare.git); names are the files' paths.
func benchRepo(b *testing.B, tmp string, files, changed int) (g gitcmd.Git, names []string, base, next, bare string) {
	g = gitcmd.Git{Env: []string{"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=b@b", "GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=b@b"}}
	run := func(dir string, args ...string) string {
		out, err := g.Out(b.Context(), dir, args...)
		if err != nil {
			b.Fatalf("git %v: %v", args, err)
		}
		return out
	}
	src := filepath.Join(tmp, "src")
	genStart := time.Now()
	names = generateTree(b, src, files)
	run(src, "init", "--quiet")
	run(src, "add", "--all")
	run(src, "commit", "--quiet", "-m", "generated")
	base = run(src, "rev-parse", "HEAD")
	rng := rand.New(rand.NewPCG(2, 2))
	for i := range changed {
		write(b, filepath.Join(src, names[rng.IntN(len(names))]), fmt.Sprintf("changed %d\n", i), 0o644)
	}
	run(src, "commit", "--quiet", "-am", "ten files")
	next = run(src, "rev-parse", "HEAD")
	bare = filepath.Join(tmp, "bare.git")
	run(tmp, "clone", "--quiet", "--bare", src, bare)
	fmt.Fprintf(os.Stderr, "generated %d files and their repository in %s\n", files, time.Since(genStart).Round(time.Millisecond))
	return g, names, base, next, bare
}

// hubServer serves the bare repositories under root over smart HTTP the
// way the hub does (hubrepo.Repos.HTTPBackend), on loopback.
func hubServer(b *testing.B, root string) string {
	h, err := hubrepo.Repos{Root: root}.HTTPBackend(false, io.Discard)
	noErr(b, err)
	srv := httptest.NewServer(h)
	b.Cleanup(srv.Close)
	return srv.URL
}

// measure1 times f, and prints that with the CPU time it took (this
// process's and its finished children's, git's). Dirty pages are written
// out first, so that no step pays for the previous one's writes.
func measure1(b *testing.B, what string, f func()) time.Duration {
	syscall.Sync()
	return timed(b, what, f)
}

// timed is measure1 without the sync.
func timed(b *testing.B, what string, f func()) time.Duration {
	cpu0 := cpuTime(b)
	start := time.Now()
	f()
	d := time.Since(start)
	fmt.Fprintf(os.Stderr, "%-46s %10s  cpu %s\n", what, d.Round(time.Millisecond), (cpuTime(b) - cpu0).Round(time.Millisecond)) // b.Log truncates long benchmark output
	return d
}

func cpuTime(b *testing.B) time.Duration {
	var total time.Duration
	for _, who := range []int{syscall.RUSAGE_SELF, syscall.RUSAGE_CHILDREN} {
		var ru syscall.Rusage
		noErr(b, syscall.Getrusage(who, &ru))
		total += time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	return total
}

// minRun keeps the faster of the runs so far (i counts them from 0).
func minRun(best time.Duration, i int, d time.Duration) time.Duration {
	if i == 0 || d < best {
		return d
	}
	return best
}

// generateTree writes n files of 64 B to 2 KiB of text into 1,000 folders,
// with a few executables, and returns their paths.
func generateTree(b *testing.B, dir string, n int) []string {
	rng := rand.New(rand.NewPCG(1, 1))
	names := make([]string, 0, n)
	line := []byte("the quick brown fox jumps over the lazy dog 0123456789\n")
	buf := make([]byte, 0, 4096)
	for i := range n {
		d := fmt.Sprintf("pkg%03d/sub%d", i%1000, i/1000%4)
		name := filepath.Join(d, fmt.Sprintf("file%06d.txt", i))
		if i%1000 == 0 {
			noErr(b, os.MkdirAll(filepath.Join(dir, d), 0o755))
		}
		buf = buf[:0]
		for size := 64 + rng.IntN(1984); len(buf) < size; {
			buf = append(buf, line...)
		}
		buf = fmt.Appendf(buf, "%d\n", i)
		mode := os.FileMode(0o644)
		if i%997 == 0 {
			mode = 0o755
		}
		if err := os.WriteFile(filepath.Join(dir, name), buf, mode); err != nil {
			noErr(b, os.MkdirAll(filepath.Join(dir, d), 0o755))
			noErr(b, os.WriteFile(filepath.Join(dir, name), buf, mode))
		}
		names = append(names, name)
	}
	return names
}

// newestChange is the latest change time of anything in the worktree (the
// ctime moves on any write, chmod or replacement).
func newestChange(b *testing.B, dir string) time.Time {
	var newest time.Time
	noErr(b, filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if fi, err := d.Info(); err == nil && fi.ModTime().After(newest) {
			newest = fi.ModTime()
		}
		return nil
	}))
	return newest
}
