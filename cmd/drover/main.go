// Command drover is the hub, the runner and the client in one binary; see
// internal/cli for the commands.
package main

import (
	"os"

	"drover/internal/cli"
)

func main() { os.Exit(cli.Main()) }
