// Package pipelines holds drover's example pipelines; the review loop is
// embedded so that drover demo writes into its repository the very files
// this folder holds.
package pipelines

import (
	"embed"
	"io/fs"
)

// Dir is where the example's files sit in a repository: its commands name
// the scripts by these paths.
const Dir = "examples/pipelines"

//go:embed review-loop.yaml builder.sh adversary.sh
var reviewLoop embed.FS

// ReviewLoop is the review loop's pipeline file and its two scripts, by
// name in Dir.
func ReviewLoop() fs.FS { return reviewLoop }
