// Package repo runs drover as users do, like package e2e, for jobs on git
// repositories: what is published, sparse checkouts, the network and
// registry policy, tools, the web pages and pull requests on Gitea. It is a
// package of its own so that its tests run beside the other e2e packages'
// rather than after them (shared helpers: internal/e2e/e2ekit).
package repo

import (
	"testing"

	"drover/internal/testkit"
)

// bin is the drover binary built once for this package by TestMain.
var bin string

func TestMain(m *testing.M) { testkit.MainWithBinary(m, &bin, testkit.PlainBinary) }
