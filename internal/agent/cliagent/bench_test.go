package cliagent_test

import (
	"context"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"drover/internal/agent"
	"drover/internal/agent/catalog"
	"drover/internal/agent/cliagent"
	"drover/internal/protocol"
	"drover/internal/sandbox"
	"drover/internal/testkit"
	"drover/internal/testkit/fakemodel"
)

// The test binary is the sandbox's init, as the drover binary is in
// production (the egress bridge runs it inside the sandbox).
func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == "sandbox-init" {
		os.Exit(sandbox.Init(context.Background(), os.Args[2:], os.Stderr))
	}
	os.Exit(m.Run())
}

var fakes = map[string]func(testing.TB, []fakemodel.Turn, ...fakemodel.Option) *fakemodel.FakeServer{
	"claude": fakemodel.NewFakeAnthropic, "codex": fakemodel.NewFakeResponses,
	"opencode": fakemodel.NewFakeChat, "gemini": fakemodel.NewFakeGemini,
}

const benchKey = "sk-bench-0123456789abcdef"

// BenchmarkCLIStart measures, per CLI, the time from an attempt's start to
// the CLI's first model request, split into drover's share (locate the
// CLI, write its config, build the bubblewrap sandbox with the egress
// bridge, start it) and the CLI's own start-up (process start to first
// request, through the egress proxy). direct-ms is the same CLI started
// without drover in the same run: the baseline the CLI's share compares to.
//
//	go test ./internal/agent/cliagent -run XXX -bench CLIStart -benchtime 5x
func BenchmarkCLIStart(b *testing.B) {
	for _, ad := range catalog.Adapters() {
		b.Run(ad.Name, func(b *testing.B) {
			path := testkit.AgentCLI(b, ad.Name)
			var drover, cli, direct time.Duration
			for range b.N {
				d, c := viaDrover(b, ad, path)
				drover += d
				cli += c
				direct += straight(b, ad, path)
			}
			n := float64(b.N)
			b.ReportMetric(float64(drover.Milliseconds())/n, "drover-ms/op")
			b.ReportMetric(float64(cli.Milliseconds())/n, "cli-ms/op")
			b.ReportMetric(float64(direct.Milliseconds())/n, "direct-ms/op")
		})
	}
}

// timedBox notes when the CLI's process was started.
type timedBox struct {
	sandbox.Boundary
	mu      sync.Mutex
	started time.Time
}

func (t *timedBox) Start(ctx context.Context, s sandbox.Spec) (sandbox.Process, error) {
	p, err := t.Boundary.Start(ctx, s)
	t.mu.Lock()
	t.started = time.Now()
	t.mu.Unlock()
	return p, err
}

func firstModelRequest(b *testing.B, f *fakemodel.FakeServer) time.Time {
	for _, r := range f.Requests() {
		if r.Method == "POST" {
			return r.Time
		}
	}
	b.Fatalf("no model request:\n%s", f.Dump())
	return time.Time{}
}

func viaDrover(b *testing.B, ad agent.Adapter, path string) (drover, cli time.Duration) {
	fake := fakes[ad.Name](b, []fakemodel.Turn{fakemodel.Text("ok")}, fakemodel.RequireKey(benchKey))
	root := b.TempDir()
	dir := filepath.Join(root, "worktree")
	if err := os.Mkdir(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	tb := &timedBox{}
	a := agent.Attempt{
		Ref: protocol.AttemptRef{Job: "j", Attempt: "a", Epoch: 1}, Spec: protocol.JobSpec{Agent: ad.Name},
		Dir: dir, Env: []string{"PATH=/usr/local/bin:/usr/bin:/bin"}, Output: io.Discard, Grace: time.Second,
		Prompt: "Say ok.", Home: filepath.Join(root, "home"), NewSession: "6710a4b5-3c87-486a-b50a-770055a78eab",
		Account: &agent.Account{ID: "acct_1", Dir: filepath.Join(root, "account"), Key: benchKey, BaseURL: fake.URL},
		Sandbox: func(extra agent.Extra) (sandbox.Boundary, error) {
			box, err := sandbox.New(context.Background(), sandbox.Policy{Root: dir, Env: extra.Env, ReadOnly: extra.ReadOnly,
				ReadWrite: extra.ReadWrite, Network: extra.Network, Limits: sandbox.DefaultLimits(), Logger: slog.New(slog.DiscardHandler)})
			tb.Boundary = box
			return tb, err
		},
	}
	g := cliagent.New(ad, cliagent.Config{Path: path, Model: "fake-model"})
	start := time.Now()
	r, err := g.Run(context.Background(), a)
	if err != nil || r.ExitCode != 0 {
		b.Fatalf("%s: %+v, %v\n%s", ad.Name, r, err, fake.Dump())
	}
	first := firstModelRequest(b, fake)
	return tb.started.Sub(start), first.Sub(tb.started)
}

// straight runs the CLI as its adapter builds it, without drover's sandbox
// or proxy: the key in its environment, the fake as its endpoint.
func straight(b *testing.B, ad agent.Adapter, path string) time.Duration {
	fake := fakes[ad.Name](b, []fakemodel.Turn{fakemodel.Text("ok")}, fakemodel.RequireKey(benchKey))
	root := b.TempDir()
	l := agent.Launch{Prompt: "Say ok.", Home: filepath.Join(root, "home"), AccountDir: filepath.Join(root, "account"),
		NewSession: "6710a4b5-3c87-486a-b50a-770055a78eac", BaseURL: fake.URL, Model: "fake-model"}
	c, err := ad.Command(l)
	if err != nil {
		b.Fatal(err)
	}
	if err := c.WriteFiles(); err != nil {
		b.Fatal(err)
	}
	bin, err := agent.Locate(ad.Name, path)
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin.Path, c.Argv[1:]...)
	cmd.Dir = root
	cmd.Env = append([]string{"PATH=/usr/local/bin:/usr/bin:/bin", "LANG=C.UTF-8"}, c.Env...)
	cmd.Env = append(cmd.Env, ad.Endpoint.KeyEnv+"="+benchKey)
	if ad.Endpoint.BaseURLEnv != "" && !strings.HasPrefix(ad.Endpoint.BaseURLEnv, "DROVER_") {
		cmd.Env = append(cmd.Env, ad.Endpoint.BaseURLEnv+"="+fake.URL)
	}
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("%s directly: %v\n%s\n%s", ad.Name, err, out, fake.Dump())
	}
	return firstModelRequest(b, fake).Sub(start)
}
