package exec

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"drover/internal/agent"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/sandbox"
	"drover/internal/sandbox/sandboxtest"
)

func attempt(t *testing.T, out *strings.Builder, args ...string) agent.Attempt {
	dir := t.TempDir()
	box, err := sandbox.New(context.Background(), sandbox.Policy{Kind: sandbox.KindNone, Root: dir,
		Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	return agent.Attempt{
		Ref:      protocol.AttemptRef{Job: "j", Attempt: "a", Epoch: 1},
		Spec:     protocol.JobSpec{Agent: Name, Args: args},
		Dir:      dir,
		Env:      []string{"PATH=/usr/bin:/bin"},
		Output:   out,
		Boundary: box,
		Grace:    50 * time.Millisecond,
	}
}

func TestExitCodes(t *testing.T) {
	var out strings.Builder
	r, err := New().Run(context.Background(), attempt(t, &out, "sh", "-c", "echo hi"))
	if err != nil || r.ExitCode != 0 || r.Reason != job.ReasonExited || out.String() != "hi\n" {
		t.Fatalf("Run = %+v, %v, output %q", r, err, out.String())
	}
	r, err = New().Run(context.Background(), attempt(t, &out, "sh", "-c", "exit 7"))
	if err != nil || r.ExitCode != 7 || r.Reason != job.ReasonExited {
		t.Fatalf("Run = %+v, %v", r, err)
	}
}

func TestSpawnFailure(t *testing.T) {
	var out strings.Builder
	for _, args := range [][]string{{"drover-no-such-program"}, nil} {
		r, err := New().Run(context.Background(), attempt(t, &out, args...))
		if err != nil || r.Reason != job.ReasonSpawnFailed || r.Message == "" {
			t.Fatalf("Run(%q) = %+v, %v; want spawn_failed with a message", args, r, err)
		}
	}
}

func TestCancelStopsProcessBeforeReturning(t *testing.T) {
	var out strings.Builder
	a := attempt(t, &out, "sh", "-c", "touch started; exec sleep 1000")
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan agent.Result)
	go func() {
		r, _ := New().Run(ctx, a)
		done <- r
	}()
	sandboxtest.WaitFor(t, "the job to start", func() bool {
		_, err := os.Stat(filepath.Join(a.Dir, "started"))
		return err == nil
	})
	cancel()
	r := <-done
	if r.Reason != job.ReasonCancelled || r.ExitCode != 128+15 {
		t.Fatalf("Run = %+v, want cancelled by SIGTERM", r)
	}
}

func TestTimeout(t *testing.T) {
	var out strings.Builder
	a := attempt(t, &out, "sleep", "1000")
	a.Spec.Timeout = protocol.Duration(20 * time.Millisecond)
	r, err := New().Run(context.Background(), a)
	if err != nil || r.Reason != job.ReasonTimeout {
		t.Fatalf("Run = %+v, %v; want timeout", r, err)
	}
}

func TestRegistry(t *testing.T) {
	reg, err := agent.NewRegistry(New())
	if err != nil {
		t.Fatal(err)
	}
	if a, ok := reg.Lookup(Name); !ok || a.Name() != Name {
		t.Fatal("exec agent not found")
	}
	if _, ok := reg.Lookup("other"); ok {
		t.Fatal("found an unregistered agent")
	}
	if _, err := agent.NewRegistry(New(), New()); err == nil {
		t.Fatal("duplicate agent names accepted")
	}
}
