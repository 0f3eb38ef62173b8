//go:build !linux

package workspace

import (
	"errors"
	"log/slog"
)

// monitor is Linux-only (inotify); elsewhere every publication scans the
// whole worktree.
type monitor struct{}

func startMonitor(string, *slog.Logger) (*monitor, error) {
	return nil, errors.New("no file-system monitor on this platform")
}

func launchMonitor(root string, log *slog.Logger) (*monitor, error) { return startMonitor(root, log) }

func (m *monitor) stop()                {}
func (m *monitor) ended() bool          { return true }
func (m *monitor) mark() (uint64, bool) { return 0, false }
func (m *monitor) narrow(bool) ([]string, uint64, string) {
	return nil, 0, "no file-system monitor on this platform"
}
func (m *monitor) rebase(uint64, bool) {}
