//go:build drover_nokube

package fleet

import (
	"path/filepath"
	"strings"
	"testing"
)

// TestOpenKubernetesWithoutSupport: a build without Kubernetes says so
// rather than calling kubernetes an unknown target.
func TestOpenKubernetesWithoutSupport(t *testing.T) {
	c := Config{Binary: "/bin/true", StateDir: t.TempDir(), HostsFile: filepath.Join(t.TempDir(), "hosts.json")}
	if _, err := Open("kubernetes", c); err == nil || !strings.Contains(err.Error(), "built without Kubernetes support") {
		t.Fatalf("Open(kubernetes) = %v", err)
	}
}
