package bench

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

// droverBinary builds cmd/drover into a temporary directory, or returns
// $DROVER_BENCH_BINARY when set (to bench an already built binary).
func droverBinary(t *testing.T) string {
	t.Helper()
	if bin := os.Getenv("DROVER_BENCH_BINARY"); bin != "" {
		return bin
	}
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil || len(bytes.TrimSpace(gomod)) == 0 {
		t.Fatalf("find the module root: %v", err)
	}
	bin := filepath.Join(t.TempDir(), "drover")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/drover")
	cmd.Dir = filepath.Dir(string(bytes.TrimSpace(gomod)))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build ./cmd/drover: %v\n%s", err, out)
	}
	return bin
}

// TestBenchSmoke runs the whole bench at a tiny size. It checks that every
// number was produced and every job finished, never how fast anything was.
func TestBenchSmoke(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("the bench reads /proc")
	}
	if testing.Short() {
		t.Skip("starts hub processes")
	}
	bin := droverBinary(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var progress bytes.Buffer
	res, err := Run(ctx, Options{
		Binary: bin, Runners: []int{3, 1}, Jobs: 5, Idle: time.Second,
		Settle: 200 * time.Millisecond, PollInterval: 100 * time.Millisecond,
		Dir: t.TempDir(), Progress: &progress,
	})
	if err != nil {
		t.Fatalf("bench: %v\nprogress:\n%s", err, progress.String())
	}

	if len(res.Latency) != 2 || res.Latency[0].Runners != 1 || res.Latency[1].Runners != 3 {
		t.Fatalf("latency rows: %+v", res.Latency)
	}
	for _, l := range res.Latency {
		if l.Jobs != 5 || l.Completed != 5 {
			t.Errorf("%d runners: %d of %d jobs completed", l.Runners, l.Completed, l.Jobs)
		}
		if l.P50 <= 0 || l.P99 < l.P50 || l.Max < l.P99 || l.Mean <= 0 || l.SubmitP50 <= 0 {
			t.Errorf("%d runners: latency not measured: %+v", l.Runners, l)
		}
	}
	if len(res.Memory) != 2 || res.Memory[1].Added != 2 {
		t.Fatalf("memory rows: %+v", res.Memory)
	}
	for _, m := range res.Memory {
		if m.Before <= 0 || m.After <= 0 {
			t.Errorf("memory not measured: %+v", m)
		}
	}
	if c := res.IdleCPU; c.Clients != 3 || c.Window < time.Second || c.Used < 0 {
		t.Errorf("idle CPU: %+v", c)
	}
	if res.Heartbeat <= 0 {
		t.Errorf("heartbeat interval not learned")
	}
	p := res.Poll
	if p == nil {
		t.Fatal("no polling baseline")
	}
	if p.Clients != 3 || p.BaseRSS <= 0 || p.RSS <= 0 || p.CPU.Events == 0 || p.Floor.Window < time.Second {
		t.Errorf("polling baseline: %+v", p)
	}

	var md, txt bytes.Buffer
	if err := res.WriteMarkdown(&md); err != nil {
		t.Fatal(err)
	}
	if err := res.WriteText(&txt); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"### Against the targets", "### Dispatch latency", "### Hub memory", "### Hub CPU", "drover bench --runners 1,3 --jobs 5"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	if !strings.Contains(txt.String(), "dispatch latency") {
		t.Errorf("text report:\n%s", txt.String())
	}
	t.Logf("\n%s", md.String())
}

func TestSummarizeUsesNearestRank(t *testing.T) {
	var ds []time.Duration
	for i := 100; i >= 1; i-- { // unsorted on purpose
		ds = append(ds, time.Duration(i)*time.Millisecond)
	}
	s := summarize(ds)
	if s.p50 != 50*time.Millisecond || s.p90 != 90*time.Millisecond || s.p99 != 99*time.Millisecond || s.max != 100*time.Millisecond {
		t.Fatalf("summary of 1..100 ms: %+v", s)
	}
	if s.mean != 50500*time.Microsecond {
		t.Fatalf("mean %s", s.mean)
	}
	if one := summarize([]time.Duration{7}); one.p50 != 7 || one.p99 != 7 || one.max != 7 {
		t.Fatalf("one sample: %+v", one)
	}
	if ds[0] != 100*time.Millisecond {
		t.Fatal("summarize sorted its input")
	}
}

func TestParseStatTicks(t *testing.T) {
	tests := []struct {
		name string
		line string
		want int64
		ok   bool
	}{
		{"plain", "1234 (drover) S 1 1234 1234 0 -1 4194560 500 0 0 0 250 70 0 0 20 0 9 0 100 0 0", 320, true},
		{"name with spaces and parens", "1234 (a) b (c)) R 1 1234 1234 0 -1 4194560 500 0 0 0 3 4 0 0 20 0 9 0 100 0 0", 7, true},
		{"truncated", "1234 (drover) S 1 2 3", 0, false},
		{"no name", "garbage", 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := parseStatTicks([]byte(tt.line))
			if (err == nil) != tt.ok || got != tt.want {
				t.Fatalf("got %d, %v; want %d (ok %v)", got, err, tt.want, tt.ok)
			}
		})
	}
}

func TestRatioHandlesZero(t *testing.T) {
	tests := []struct {
		a, b, res float64
		want      string
	}{
		{990, 9.9, 1, "100×"},
		{3, 2, 1, "1.50×"},
		{5, 0, 0.5, "> 10×"},
		{0, 0, 1, "—"},
	}
	for _, tt := range tests {
		if got := ratio(tt.a, tt.b, tt.res); got != tt.want {
			t.Errorf("ratio(%v, %v, %v) = %q, want %q", tt.a, tt.b, tt.res, got, tt.want)
		}
	}
}
