package bench

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// TestFailedRunReports: a run that fails part way returns what it
// measured with why it failed, and the command prints it before the error
// (a failed run printed nothing, so the numbers of a long run whose hub
// was slow to stop were lost). The hub here is a fake that exits at once.
func TestFailedRunReports(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the bench reads /proc")
	}
	fake := filepath.Join(t.TempDir(), "drover")
	if err := os.WriteFile(fake, []byte("#!/bin/sh\necho 'fake hub: refusing to start' >&2\nexit 3\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := Run(ctx, Options{Binary: fake, Runners: []int{1}, Jobs: 1, Idle: time.Millisecond, NoPoll: true})
	if err == nil {
		t.Fatal("a run whose hub exits at once succeeded")
	}
	if res == nil {
		t.Fatalf("a failed run returned no report (err %v)", err)
	}
	if res.Failed != err.Error() || res.Machine.NProc == 0 {
		t.Errorf("the report says failed %q on %d CPUs, want %q and the machine", res.Failed, res.Machine.NProc, err)
	}

	cmd := Command()
	var out bytes.Buffer
	cmd.SetOut(&out)
	cmd.SetErr(&bytes.Buffer{})
	cmd.SetArgs([]string{"--binary", fake, "--runners", "1", "--jobs", "1", "--idle", "1ms", "--no-poll", "--markdown"})
	cmd.SetContext(ctx)
	if err := cmd.Execute(); err == nil {
		t.Fatal("the command succeeded")
	}
	if !strings.Contains(out.String(), "**The run failed**: ") || !strings.Contains(out.String(), "| machine |") {
		t.Errorf("the command printed no report of the failed run:\n%s", out.String())
	}
}
