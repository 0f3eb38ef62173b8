// Package cluster runs drover as users do, like package e2e, for what
// spans several processes of a deployment: fleets of runners, several
// hubs on one database, Postgres, outbound webhooks. It is a package of
// its own so that its tests run beside e2e's rather than after them.
package cluster

import (
	"testing"

	"drover/internal/testkit"
)

var bin string

func TestMain(m *testing.M) { testkit.MainWithBinary(m, &bin, testkit.PlainBinary) }
