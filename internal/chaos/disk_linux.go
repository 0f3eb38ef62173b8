package chaos

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// mountSmall mounts a tmpfs of size bytes on dir (root only), for a disk
// the campaign can fill.
func mountSmall(dir string, size int64) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("mount a %d MiB tmpfs on %s: the disk fault needs root", size>>20, dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("make %s: %w", dir, err)
	}
	if err := unix.Mount("tmpfs", dir, "tmpfs", unix.MS_NOSUID|unix.MS_NODEV, fmt.Sprintf("size=%d,mode=0700", size)); err != nil {
		return fmt.Errorf("mount a %d MiB tmpfs on %s: %w", size>>20, dir, err)
	}
	return nil
}

// unmount detaches a mount of mountSmall, even while a process still has
// a file open on it.
func unmount(dir string) error {
	if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
		return fmt.Errorf("unmount %s: %w", dir, err)
	}
	return nil
}
