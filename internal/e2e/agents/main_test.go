// Package agents runs drover as users do, like package e2e, with the real
// vendor agent CLIs (Claude Code, Codex, Gemini CLI, opencode) against fake
// model servers: credentials, sessions, interrupts and resumes. It is a package of its own
// so that its tests run beside the other e2e packages' rather than after
// them (shared helpers: internal/e2e/e2ekit).
package agents

import (
	"testing"

	"drover/internal/testkit"
)

// bin is the drover binary built once for this package by TestMain.
var bin string

func TestMain(m *testing.M) { testkit.MainWithBinary(m, &bin, testkit.PlainBinary) }
