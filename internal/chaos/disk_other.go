//go:build !linux

package chaos

import "errors"

var errNoTmpfs = errors.New("the disk fault mounts tmpfs: Linux only")

func mountSmall(string, int64) error { return errNoTmpfs }

func unmount(string) error { return errNoTmpfs }
