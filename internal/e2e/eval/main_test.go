// Package eval runs drover as users do, like package e2e, for evaluations: a
// synthetic set run by scripted and real agents through fake model servers.
// It is a package of its own so that its tests run beside the other e2e
// packages' rather than after them (shared helpers: internal/e2e/e2ekit).
package eval

import (
	"testing"

	"drover/internal/testkit"
)

// bin is the drover binary built once for this package by TestMain.
var bin string

func TestMain(m *testing.M) { testkit.MainWithBinary(m, &bin, testkit.PlainBinary) }
