// Package fleet starts and stops runners on targets: this machine, SSH
// hosts, docker or podman containers, Kubernetes Jobs. A target answers four questions (launch, stop, list, logs); the
// hub's part, the single-use registration tokens a launch hands its
// runners, is the caller's. Every runner a target starts is an ordinary
// runner with a login of its own, made from its token.
package fleet

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"drover/internal/rules"
)

// Spec is one launch: the runners to start, each with its registration
// token, and what they all run with.
type Spec struct {
	LaunchID string
	Hub      string // the URL the runners register with and dial
	Labels   map[string]string
	Slots    int
	// MaxJobs > 0 makes the runners ephemeral: each takes that many
	// attempts, then exits.
	MaxJobs int
	Runners []RunnerSpec
}

// RunnerSpec is one runner to start: the name the hub gave it and its
// single-use registration token (a secret: never argv, never a log).
type RunnerSpec struct {
	Name  string
	Token string
}

// Instance is a runner a target started.
type Instance struct {
	LaunchID string
	Name     string
	Running  bool
	Where    string // e.g. "pid 1234", "host gpu-box"
}

// Target starts runners somewhere.
type Target interface {
	// Check says what the target lacks to launch (its tool, its
	// configuration), with the fix; nothing is launched when it fails.
	Check(ctx context.Context) error
	// Launch starts the spec's runners. On error it has stopped the ones
	// it started.
	Launch(ctx context.Context, s Spec) ([]Instance, error)
	// Stop stops every runner of the launch and returns once none runs.
	Stop(ctx context.Context, launchID string) error
	// List lists the runners the target started, running or not.
	List(ctx context.Context) ([]Instance, error)
	// Logs copies what a runner printed to w.
	Logs(ctx context.Context, name string, w io.Writer) error
}

// Scoped is a target whose runners carry labels of its own (an SSH
// host's) and that only one hub user may launch on ("" for anyone).
type Scoped interface {
	Labels() map[string]string
	Owner() string
}

// Config is what targets are made from.
type Config struct {
	// Binary is the drover binary runners run (this executable).
	Binary string
	// HostBinary is the drover binary the ssh target copies to its hosts
	// ("": Binary); a build with -tags drover_nokube leaves the
	// Kubernetes client, which no runner uses, out of it.
	HostBinary string
	// StateDir holds the local target's runner homes and logs (0700).
	StateDir string
	// Env is the environment local runners get; drover's own credentials
	// are dropped from it.
	Env []string
	// HostsFile is the operator's file of SSH hosts.
	HostsFile string
	// Image is the docker/podman target's runner image; without it the
	// image is built from Containerfile.
	Image         string
	Containerfile string
	// Network is the network runner containers join ("" for the engine's
	// default).
	Network string
	// Kube is the kubernetes target's cluster and runner pods.
	Kube KubeConfig
}

// KubeConfig is where kubernetes runners run and what they may use.
type KubeConfig struct {
	Kubeconfig string // "" for $KUBECONFIG, ~/.kube/config, in-cluster
	Namespace  string // "" for the config's
	Resources  KubeResources
	// Poll and StartTimeout: how often pods are looked at, how long a
	// launch waits for them to start (0 for the defaults).
	Poll, StartTimeout time.Duration
}

// KubeResources are a runner pod's requests and limits, as quantities
// ("500m", "1Gi").
type KubeResources struct{ CPURequest, MemoryRequest, CPULimit, MemoryLimit string }

// DefaultKubeResources leave room for an agent CLI and git.
func DefaultKubeResources() KubeResources {
	return KubeResources{CPURequest: "500m", MemoryRequest: "1Gi", CPULimit: "2", MemoryLimit: "4Gi"}
}

// Open makes the named target: local, docker, podman, or an SSH host of
// the hosts file.
func Open(name string, c Config) (Target, error) {
	switch name {
	case "local":
		return NewLocal(c)
	case "docker", "podman":
		return NewContainer(name, c)
	case "kubernetes":
		return openKubernetes(c)
	}
	hf, err := LoadHosts(c.HostsFile)
	if err != nil {
		return nil, err
	}
	if h, ok := hf.host(name); ok {
		return NewSSH(c, h)
	}
	return nil, fmt.Errorf("unknown fleet target %q: use --on with one of %s (SSH hosts are registered in %s)",
		name, strings.Join(append([]string{"local", "docker", "podman", "kubernetes"}, hf.hostNames()...), ", "), c.HostsFile)
}

// runnerArgs is the argv of a launched runner: never its token, which it
// reads from a 0600 file.
func runnerArgs(s Spec, home, tokenFile string) []string {
	args := []string{"runner", "--hub", s.Hub, "--home", home, "--registration-token-file", tokenFile,
		"--slots", fmt.Sprint(max(s.Slots, 1))}
	if s.MaxJobs > 0 {
		args = append(args, "--max-jobs", fmt.Sprint(s.MaxJobs))
	}
	if len(s.Labels) > 0 {
		args = append(args, "--labels", rules.FormatLabels(s.Labels))
	}
	return args
}
