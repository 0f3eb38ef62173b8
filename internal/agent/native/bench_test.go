package native

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
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

// meter is a provider that counts what each request sends (4 characters a
// token, as the loop estimates) and how much of it repeats the previous
// request's leading messages whole: what a provider's prefix cache (the
// loop's breakpoints on the prefix and the tail) would serve. It reports
// the count as the request's input tokens, as a provider does.
type meter struct {
	p            model.Provider
	prev         []model.Message
	sent, cached int64
	requests     int
}

func msgTokens(m model.Message) int64 {
	e := &estimate{}
	e.added(m)
	return e.tokens
}

func (m *meter) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	var sent, cached int64
	same := true
	for i, msg := range req.Messages {
		n := msgTokens(msg)
		sent += n
		same = same && i < len(m.prev) && reflect.DeepEqual(m.prev[i], msg)
		if same {
			cached += n
		}
	}
	m.prev = req.Messages
	m.sent, m.cached, m.requests = m.sent+sent, m.cached+cached, m.requests+1
	resp, err := m.p.Complete(ctx, req)
	resp.Usage.InputTokens = sent
	return resp, err
}

// BenchmarkTokensPerTurn runs a 30-turn scripted task (each turn reads a
// 4 KiB file) and reports the tokens sent per model call, against the
// same task with a window so large that nothing is compacted (the whole
// transcript resent every turn, the naive count), and the share a prefix
// cache would serve. Token counts are deterministic; -benchtime 1x is
// enough.
//
//	go test ./internal/agent/native -run XXX -bench TokensPerTurn -benchtime 1x
func BenchmarkTokensPerTurn(b *testing.B) {
	const turns = 30
	run := func(b *testing.B, window int64) *meter {
		resps := make([]model.Response, turns)
		for j := range resps {
			resps[j] = call(fmt.Sprint(j), toolRead, fmt.Sprintf(`{"path":"f%d.txt"}`, j))
		}
		l, sc, dir := newLoop(b, Limits{MaxTurns: turns + 5, ContextWindow: window}, resps...)
		for j := range turns {
			if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("f%d.txt", j)), []byte(strings.Repeat(fmt.Sprintf("line %d of a file\n", j), 4<<10/20)), 0o600); err != nil {
				b.Fatal(err)
			}
		}
		m := &meter{p: sc}
		l.model = m
		if out := l.run(context.Background(), newTranscript()); out.End != EndAnswered {
			b.Fatalf("ended %s: %s", out.End, out.Reason)
		}
		return m
	}
	for b.Loop() {
		naive := run(b, 1<<40)
		compacted := run(b, 16_000)
		b.ReportMetric(float64(naive.sent)/float64(naive.requests), "naive-tokens/call")
		b.ReportMetric(float64(naive.cached)/float64(naive.sent), "naive-cached-share")
		b.ReportMetric(float64(compacted.sent)/float64(compacted.requests), "compacted-tokens/call")
		b.ReportMetric(float64(compacted.cached)/float64(compacted.sent), "compacted-cached-share")
		b.ReportMetric(float64(compacted.sent)/float64(naive.sent), "compacted/naive")
		b.ReportMetric(float64(compacted.requests-naive.requests), "summary-calls")
	}
}
