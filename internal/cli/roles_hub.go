//go:build !drover_runner

package cli

import (
	"github.com/spf13/cobra"

	"drover/internal/bench"
	"drover/internal/chaos"
)

// hubRoleCmds are the commands that serve a hub or measure one: the full
// build has them; a runner host's build (-tags drover_runner) does not.
func (a *app) hubRoleCmds() []*cobra.Command {
	return []*cobra.Command{a.hubCmd(), a.upCmd(), a.demoCmd(), bench.Command(), chaos.Command()}
}
