package runner

import (
	"net"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// checkTCPTimeouts checks the socket's keepalive idle time and its
// TCP_USER_TIMEOUT.
func checkTCPTimeouts(t *testing.T, c *net.TCPConn, keepIdle, user time.Duration) {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var on, idle, ut int
	var gerr error
	if err := rc.Control(func(fd uintptr) {
		on, gerr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_KEEPALIVE)
		if gerr == nil {
			idle, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_KEEPIDLE)
		}
		if gerr == nil {
			ut, gerr = unix.GetsockoptInt(int(fd), unix.IPPROTO_TCP, unix.TCP_USER_TIMEOUT)
		}
	}); err != nil || gerr != nil {
		t.Fatal(err, gerr)
	}
	if on == 0 || time.Duration(idle)*time.Second != keepIdle || time.Duration(ut)*time.Millisecond != user {
		t.Fatalf("keepalive %d after %d s, user timeout %d ms; want on after %s, %s", on, idle, ut, keepIdle, user)
	}
}
