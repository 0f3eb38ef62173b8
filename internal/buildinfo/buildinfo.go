// Package buildinfo says which drover a binary is.
package buildinfo

import "runtime/debug"

// version is set only at build time, e.g.
// go build -ldflags "-X drover/internal/buildinfo.version=v1.2.0" ./cmd/drover
var version string

// Version is the -ldflags version, else the module version the go tool
// recorded (a `go install drover@v1.2.0`), else the VCS revision of a build
// from a checkout, else "dev".
func Version() string {
	if version != "" {
		return version
	}
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "dev"
	}
	if v := bi.Main.Version; v != "" && v != "(devel)" {
		return v
	}
	rev, dirty := "", false
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			dirty = s.Value == "true"
		}
	}
	if rev == "" {
		return "dev"
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if dirty {
		rev += "-dirty"
	}
	return "dev-" + rev
}
