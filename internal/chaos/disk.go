package chaos

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// Sizes of the small disks of a campaign with the disk fault: the hub's
// data directory and each runner's home are tmpfs mounts this large.
const (
	hubDisk    = 256 << 20
	runnerDisk = 128 << 20
	// runnerFloor is the runners' free-space floor (--min-free): the
	// default (256 MiB) is above runnerDisk, so such a runner would never
	// be ready; this one is crossed only while a fill holds its disk.
	runnerFloor = 16 << 20
)

// fillFile is the file that fills a disk, in the root of the mount.
const fillFile = "chaos-fill"

// fill writes into dir's fill file until its disk is full, down to the last
// 512-byte block, and returns how much it wrote.
func fill(dir string) (int64, error) {
	f, err := os.OpenFile(filepath.Join(dir, fillFile), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return 0, fmt.Errorf("fill %s: %w", dir, err)
	}
	buf := make([]byte, 1<<20)
	var n int64
	for size := len(buf); size >= 512; size /= 2 {
		for {
			k, err := f.Write(buf[:size])
			n += int64(k)
			if err != nil {
				break // full, at this size
			}
		}
	}
	if err := f.Close(); err != nil && n == 0 {
		return 0, fmt.Errorf("fill %s: %w", dir, err)
	}
	return n, nil
}

// free removes what fill wrote.
func free(dir string) error {
	if err := os.Remove(filepath.Join(dir, fillFile)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("free %s: %w", dir, err)
	}
	return nil
}
