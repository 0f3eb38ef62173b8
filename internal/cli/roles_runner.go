//go:build drover_runner

package cli

import (
	"fmt"

	"github.com/spf13/cobra"
)

// hubRoleCmds in a runner host's build: the commands that serve a hub are
// not linked in (their store drivers, forge clients and the Kubernetes
// client are most of the full binary), so each says where it is instead of
// being an unknown command.
func (a *app) hubRoleCmds() []*cobra.Command {
	var cmds []*cobra.Command
	for _, name := range []string{"hub", "up", "demo", "bench", "chaos"} {
		cmds = append(cmds, &cobra.Command{
			Use:                name,
			Short:              "not in this build (the runner host's): use the full drover build",
			DisableFlagParsing: true,
			RunE: func(*cobra.Command, []string) error {
				return fmt.Errorf("drover %s is not in this build: it is the runner host's build (drover-runner-*.tar.gz), without the hub; run the hub from the full build (drover-*.tar.gz)", name)
			},
		})
	}
	return cmds
}
