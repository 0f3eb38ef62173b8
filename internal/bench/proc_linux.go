//go:build linux

package bench

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// atClkTck is the auxiliary vector entry holding the kernel's USER_HZ, the
// unit of the CPU times in /proc/PID/stat (sysconf(_SC_CLK_TCK) reads it).
const atClkTck = 17

// clockTicks returns the clock ticks per second of /proc/PID/stat, read from
// this process's auxiliary vector; 100 (Linux's USER_HZ on every mainstream
// architecture) if that cannot be read.
func clockTicks() int64 {
	b, err := os.ReadFile("/proc/self/auxv")
	if err != nil {
		return 100
	}
	word := strconv.IntSize / 8
	for i := 0; i+2*word <= len(b); i += 2 * word {
		var key, val uint64
		if word == 8 {
			key, val = binary.NativeEndian.Uint64(b[i:]), binary.NativeEndian.Uint64(b[i+word:])
		} else {
			key, val = uint64(binary.NativeEndian.Uint32(b[i:])), uint64(binary.NativeEndian.Uint32(b[i+word:]))
		}
		if key == 0 {
			break
		}
		if key == atClkTck && val > 0 {
			return int64(val)
		}
	}
	return 100
}

// readRSS returns the resident set size of process pid in bytes (VmRSS).
func readRSS(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, fmt.Errorf("read memory of process %d: %w", pid, err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "VmRSS:")
		if !ok {
			continue
		}
		return parseKB(rest)
	}
	if err := sc.Err(); err != nil {
		return 0, fmt.Errorf("read memory of process %d: %w", pid, err)
	}
	return 0, fmt.Errorf("read memory of process %d: no VmRSS line", pid)
}

// readCPU returns the user plus system CPU time process pid has used.
func readCPU(pid int, ticks int64) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, fmt.Errorf("read CPU time of process %d: %w", pid, err)
	}
	n, err := parseStatTicks(b)
	if err != nil {
		return 0, fmt.Errorf("read CPU time of process %d: %w", pid, err)
	}
	return time.Duration(n) * time.Second / time.Duration(ticks), nil
}

// raiseNoFile raises this process's soft limit on open files to its hard
// limit (a child process inherits it) and returns the new soft limit. It
// fails if the hard limit is below need.
func raiseNoFile(need uint64) (uint64, error) {
	var rl syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
		return 0, fmt.Errorf("read the open file limit: %w", err)
	}
	if rl.Cur < rl.Max {
		rl.Cur = rl.Max
		if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &rl); err != nil {
			return 0, fmt.Errorf("raise the open file limit to %d: %w", rl.Max, err)
		}
	}
	if rl.Cur < need {
		return rl.Cur, fmt.Errorf("the open file limit is %d (hard limit %d) but the bench needs about %d: raise it (ulimit -Hn, or LimitNOFILE= in systemd)", rl.Cur, rl.Max, need)
	}
	return rl.Cur, nil
}

// fsName names the filesystem holding path, for the report (fsync cost).
func fsName(path string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return "unknown"
	}
	switch uint64(st.Type) {
	case 0xEF53:
		return "ext4"
	case 0x58465342:
		return "xfs"
	case 0x9123683E:
		return "btrfs"
	case 0x01021994:
		return "tmpfs (fsync is free: latency is optimistic)"
	case 0x794c7630:
		return "overlayfs"
	case 0x2FC12FC1:
		return "zfs"
	}
	return fmt.Sprintf("filesystem type 0x%x", uint64(st.Type))
}
