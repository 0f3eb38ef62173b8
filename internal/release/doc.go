// Package release holds the tests of what ships drover outside the Go
// module: the release archives scripts/release writes and the runner image
// deploy/Containerfile describes. It has no code of its own.
package release
