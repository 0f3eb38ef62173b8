// Package ciskip is the one rule for a test whose dependency is missing
// (a tool scripts/test installs, or one it requires): skip on a developer's
// machine, fail under CI=true, since CI must never skip silently. It
// imports nothing of drover, so any package's tests may use it.
package ciskip

import (
	"fmt"
	"os"
	"testing"
)

// Skipf skips the test, or with CI=true fails it, with the reason.
func Skipf(t testing.TB, format string, args ...any) {
	t.Helper()
	msg := fmt.Sprintf(format, args...)
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (CI=true: failing instead of skipping)", msg)
	}
	t.Skip(msg)
}
