// Package sandboxtest helps tests that start real processes: whether a pid
// still runs, waiting on conditions, a buffer safe to read while a process
// writes to it, and loopback listeners to reach or not.
package sandboxtest

import (
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"drover/internal/testkit/syncbuf"
)

// Alive reports whether pid is a running process. An unreaped zombie counts
// as gone: in containers PID 1 does not always reap orphans.
func Alive(pid int) bool {
	if unix.Kill(pid, 0) != nil {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')') // the command name may hold anything
	return i < 0 || i+2 >= len(s) || s[i+2] != 'Z'
}

// WaitFor polls cond until it holds, failing the test after a generous
// deadline: tests wait on conditions, never on durations.
func WaitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// Buffer is an io.Writer that can be read while being written.
type Buffer = syncbuf.Buffer

// EchoListener listens on a loopback port, echoes what each connection
// sends and counts the connections: a "host" for network tests.
func EchoListener(t testing.TB) (addr string, accepted *atomic.Int32) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	accepted = new(atomic.Int32)
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepted.Add(1)
			go func() {
				defer c.Close()
				io.Copy(c, c)
			}()
		}
	}()
	return l.Addr().String(), accepted
}
