package testkit

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// recordingTB is a test seen from the processes it starts: their cleanups
// run when the test says, and their errors are kept, not reported.
type recordingTB struct {
	testing.TB
	cleanups []func()
	errs     []string
}

func (r *recordingTB) Cleanup(f func()) { r.cleanups = append(r.cleanups, f) }

func (r *recordingTB) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recordingTB) Failed() bool { return len(r.errs) > 0 }

func (r *recordingTB) cleanUp() {
	for i := len(r.cleanups) - 1; i >= 0; i-- {
		r.cleanups[i]()
	}
}

// A child's data race fails its test, though the child is killed: a race
// build reports on its stderr and exits 66 only when it exits on its own.
func TestChildsDataRaceFailsTheTest(t *testing.T) {
	for _, tc := range []struct {
		name, script string
		fails        bool
	}{
		{"race", "echo 'WARNING: DATA RACE' >&2; echo 'Read at 0x00c000123 by goroutine 7:' >&2; echo ready; exec sleep 600", true},
		{"clean", "echo ready; exec sleep 600", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := &recordingTB{TB: t}
			p := start(r, "child", nil, nil, "/bin/sh", "-c", tc.script)
			deadline := time.Now().Add(time.Minute)
			for !strings.Contains(p.out.String(), "ready") {
				if time.Now().After(deadline) {
					r.cleanUp()
					t.Fatalf("the child said nothing within a minute: %q", p.out.String())
				}
				time.Sleep(10 * time.Millisecond)
			}
			r.cleanUp()
			if got := len(r.errs) > 0; got != tc.fails {
				t.Fatalf("test failed: %v, want %v (errors: %q)", got, tc.fails, r.errs)
			}
			if tc.fails && !strings.Contains(r.errs[0], "Read at 0x00c000123") {
				t.Errorf("the error does not carry the report: %q", r.errs[0])
			}
		})
	}
}
