package native

import (
	"context"
	"fmt"
	"log/slog"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"drover/internal/model"
	"drover/internal/sandbox"
	"drover/internal/tools"
)

// BenchmarkLoopTurn measures the loop's own cost per turn, without model
// or tool time: the model is an in-memory script and every call goes to
// drover's checkpoint on an in-memory backend. "durable" saves the
// transcript to disk (write, fsync, rename) after each model call and each
// batch of results, as the agent does; "memory" does not save.
//
//	go test ./internal/agent/native -run XXX -bench LoopTurn -benchtime 20x
func BenchmarkLoopTurn(b *testing.B) {
	const turns = 30
	for _, durable := range []bool{false, true} {
		name := "memory"
		if durable {
			name = "durable"
		}
		b.Run(name, func(b *testing.B) {
			var inModel time.Duration
			for i := 0; b.Loop(); i++ {
				b.StopTimer()
				resps := make([]model.Response, turns)
				for j := range resps {
					resps[j] = call(fmt.Sprint(j), tools.ToolCheckpoint, fmt.Sprintf(`{"message":"step %d: %0200d"}`, j, j))
				}
				l, sc, dir := newLoop(b, Limits{MaxTurns: turns + 1}, resps...)
				timed := &timedProvider{p: sc}
				l.model = timed
				tr := newTranscript()
				if durable {
					j, _, err := openJournal(filepath.Join(dir, "t.jsonl"), tr, false)
					if err != nil {
						b.Fatal(err)
					}
					b.Cleanup(func() { j.Close() })
					l.save = j.save
				}
				b.StartTimer()
				if out := l.run(context.Background(), tr); out.End != EndAnswered {
					b.Fatalf("ended %s: %s", out.End, out.Reason)
				}
				inModel += timed.spent
			}
			perTurn := (b.Elapsed() - inModel) / time.Duration(b.N*(turns+1))
			b.ReportMetric(float64(perTurn.Microseconds())/1000, "loop-ms/turn")
		})
	}
}

// timedProvider sums the time spent in the model.
type timedProvider struct {
	p     model.Provider
	spent time.Duration
}

func (t *timedProvider) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	start := time.Now()
	defer func() { t.spent += time.Since(start) }()
	return t.p.Complete(ctx, req)
}

// BenchmarkRunCommand is one run_command through the bubblewrap boundary
// (what the loop does per command: sandbox start, /bin/sh -c, output
// capture) against a bare os/exec of the same command line, in one run.
//
//	go test ./internal/agent/native -run XXX -bench RunCommand -benchtime 200x
func BenchmarkRunCommand(b *testing.B) {
	dir := b.TempDir()
	const line = "echo hi"
	b.Run("bwrap", func(b *testing.B) {
		box, err := sandbox.New(context.Background(), sandbox.Policy{Kind: sandbox.KindBwrap, Root: dir, Logger: slog.New(slog.DiscardHandler)})
		if err != nil {
			b.Skip("no bubblewrap here:", err)
		}
		c := commands{box: box, dir: dir, env: []string{"PATH=/usr/bin:/bin"}}
		for b.Loop() {
			if out, err := c.run(context.Background(), line, time.Minute); err != nil || !strings.Contains(out, "hi") {
				b.Fatalf("%q, %v", out, err)
			}
		}
	})
	b.Run("bare-exec", func(b *testing.B) {
		for b.Loop() {
			cmd := exec.Command("/bin/sh", "-c", line)
			cmd.Dir = dir
			if out, err := cmd.CombinedOutput(); err != nil || !strings.Contains(string(out), "hi") {
				b.Fatalf("%q, %v", out, err)
			}
		}
	})
}
