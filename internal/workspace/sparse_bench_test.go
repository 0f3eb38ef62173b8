package workspace

import (
	"bytes"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"drover/internal/gitcmd"
)

// BenchmarkSparsePrepare measures Prepare of a job naming one folder of a
// repository of 1,000,000 files (1,000 folders of 1,000; the commit made
// with fast-import from 1,000 distinct blobs, already in the runner's
// clone), on a fresh cache: the sparse checkout writes 1,000 files, but
// the index and the tree checks still cover every entry. Run it alone:
//
//	go test -run XXX -bench BenchmarkSparsePrepare ./internal/workspace -benchtime 1x
func BenchmarkSparsePrepare(b *testing.B) {
	const folders, perFolder = 1000, 1000
	for b.Loop() {
		tmp := b.TempDir()
		g := gitcmd.Git{}
		bare := filepath.Join(tmp, "src.git")
		_, err := g.Run(b.Context(), gitcmd.Cmd{Dir: tmp, Args: []string{"init", "--quiet", "--bare", bare}})
		noErr(b, err)
		var in bytes.Buffer
		for i := range perFolder {
			data := fmt.Sprintf("the quick brown fox %d\n", i)
			fmt.Fprintf(&in, "blob\nmark :%d\ndata %d\n%s\n", i+1, len(data), data)
		}
		in.WriteString("commit refs/heads/main\ncommitter bench <b@b> 0 +0000\ndata 4\ngen\n")
		for d := range folders {
			for f := range perFolder {
				fmt.Fprintf(&in, "M 100644 :%d pkg%03d/file%04d.txt\n", f+1, d, f)
			}
		}
		start := time.Now()
		_, err = g.Run(b.Context(), gitcmd.Cmd{Dir: bare, Args: []string{"fast-import", "--quiet"}, Stdin: &in})
		noErr(b, err)
		head, err := g.Out(b.Context(), bare, "rev-parse", "refs/heads/main")
		noErr(b, err)
		fmt.Fprintf(os.Stderr, "generated %d files in %s\n", folders*perFolder, time.Since(start).Round(time.Millisecond))

		c, err := NewCache(CacheConfig{Home: filepath.Join(tmp, "home"), Logger: slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))})
		noErr(b, err)
		src := Source{Project: "bench", URL: "file://" + bare, Sparse: []string{"pkg500"}}
		r, _ := c.repoOf("bench")
		noErr(b, c.withLock(b.Context(), r, lockClone, func() error {
			if err := c.ensureClone(b.Context(), r); err != nil {
				return err
			}
			return c.ensureCommit(b.Context(), r, src, head)
		}))
		for i := range 2 {
			start := time.Now()
			w, err := c.Prepare(b.Context(), src, fmt.Sprintf("job%d", i), head)
			noErr(b, err)
			took := time.Since(start)
			ents, err := os.ReadDir(filepath.Join(w.Dir(), "pkg500"))
			noErr(b, err)
			fmt.Fprintf(os.Stderr, "sparse Prepare (1 of %d folders, %d files checked out): %s\n", folders, len(ents), took.Round(time.Millisecond))
			b.ReportMetric(took.Seconds(), fmt.Sprintf("s/prepare%d", i))
			noErr(b, w.Release(b.Context()))
		}
	}
}
