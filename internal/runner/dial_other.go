//go:build !linux

package runner

import (
	"syscall"
	"time"
)

// userTimeout is Linux's only; elsewhere the keepalive alone notices a
// vanished hub.
func userTimeout(time.Duration) func(network, address string, c syscall.RawConn) error { return nil }
