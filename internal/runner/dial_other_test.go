//go:build !linux

package runner

import (
	"net"
	"testing"
	"time"
)

func checkTCPTimeouts(t *testing.T, _ *net.TCPConn, _, _ time.Duration) { t.Skip("Linux only") }
