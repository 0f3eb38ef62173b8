//go:build !linux

package bench

import (
	"errors"
	"time"
)

// The bench reads the hub's memory and CPU time from /proc: Linux only.
var errUnsupported = errors.New("drover bench reads /proc and runs on Linux only")

func clockTicks() int64                         { return 100 }
func readRSS(int) (int64, error)                { return 0, errUnsupported }
func readCPU(int, int64) (time.Duration, error) { return 0, errUnsupported }
func raiseNoFile(uint64) (uint64, error)        { return 0, errUnsupported }
func fsName(string) string                      { return "unknown" }
