//go:build drover_nokube || drover_runner

package fleet

import "errors"

// openKubernetes refuses: this build leaves the Kubernetes client out
// (kubernetes.go holds the target), so that a runner binary copied to
// hosts is lean.
func openKubernetes(Config) (Target, error) {
	return nil, errors.New("this drover was built without Kubernetes support (the runner host's build, or -tags drover_nokube): " +
		"run 'drover fleet --on kubernetes' from a default build")
}
