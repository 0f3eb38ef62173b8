package fsutil

import (
	"errors"
	"fmt"
	"syscall"
)

// IsNoSpace reports whether err says a disk is full: ENOSPC or EDQUOT from
// the kernel, or a store's "database or disk is full" (which the stores
// wrap around syscall.ENOSPC). It is the one classification of a full disk.
func IsNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT)
}

// FreeBytes is how many bytes an unprivileged process may still write on
// the file system holding path.
func FreeBytes(path string) (int64, error) {
	var st syscall.Statfs_t
	if err := syscall.Statfs(path, &st); err != nil {
		return 0, fmt.Errorf("free space of %s: %w", path, err)
	}
	return int64(st.Bavail) * int64(st.Bsize), nil
}
