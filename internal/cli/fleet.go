package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"drover/internal/apitypes"
	"drover/internal/client"
	"drover/internal/fleet"
	"drover/internal/rules"
)

func (a *app) fleetCmd() *cobra.Command {
	ff := &fleetFlags{}
	cmd := &cobra.Command{
		Use:   "fleet",
		Short: "Launch, list, stop runners on fleet targets (local, ssh, docker, podman, kubernetes)",
		Long: `Start runners on a target: 'local' (processes of this machine, each with its
own state directory under $XDG_STATE_HOME/drover/fleet), or an SSH host
the operator registered in the hosts file (--hosts-file, default
$XDG_CONFIG_HOME/drover/fleet-hosts.json), where 'drover runner --stdio'
runs with its connections to the hub tunnelled through the SSH session, or
'docker'/'podman' (a container per runner, from --image or one built from
--containerfile, default ./Containerfile; see deploy/Containerfile), or
'kubernetes' (a Job per runner from --image, in --namespace of the cluster
of --kubeconfig, $KUBECONFIG or the in-cluster config, its registration
token in a Secret; see deploy/kubernetes). A launch asks the
hub for one single-use registration token per runner, scoped to you and to
the launch's labels; each runner exchanges its token for a runner token of
its own, with no login link to approve. Stopping a launch stops its runners
and revokes them.`,
		Args: noArgs,
	}
	pf := cmd.PersistentFlags()
	pf.StringVar(&ff.hosts, "hosts-file", "", "the SSH hosts file (default $XDG_CONFIG_HOME/drover/fleet-hosts.json)")
	pf.StringVar(&ff.hostBinary, "host-binary", "", "ssh: the drover binary copied to hosts (default this one; the lean one a runner host needs: drover-runner-*.tar.gz of scripts/release)")
	pf.StringVar(&ff.image, "image", "", "docker/podman: the runner image (drover, git, bubblewrap, the agent CLIs)")
	pf.StringVar(&ff.containerfile, "containerfile", "Containerfile", "docker/podman without --image: the Containerfile the runner image is built from")
	pf.StringVar(&ff.network, "network", "", "docker/podman: the network runner containers join (one that reaches the hub)")
	pf.StringVar(&ff.kube.Kubeconfig, "kubeconfig", "", "kubernetes: the kubeconfig file (default $KUBECONFIG, ~/.kube/config, then the in-cluster config)")
	pf.StringVar(&ff.kube.Namespace, "namespace", "", "kubernetes: the namespace of the runner Jobs (default the kubeconfig context's)")
	d := fleet.DefaultKubeResources()
	pf.StringVar(&ff.kube.Resources.CPURequest, "cpu-request", d.CPURequest, "kubernetes: each runner pod's CPU request")
	pf.StringVar(&ff.kube.Resources.MemoryRequest, "memory-request", d.MemoryRequest, "kubernetes: each runner pod's memory request")
	pf.StringVar(&ff.kube.Resources.CPULimit, "cpu-limit", d.CPULimit, "kubernetes: each runner pod's CPU limit")
	pf.StringVar(&ff.kube.Resources.MemoryLimit, "memory-limit", d.MemoryLimit, "kubernetes: each runner pod's memory limit")
	cmd.AddCommand(a.fleetLaunchCmd(ff), a.fleetListCmd(), a.fleetLogsCmd(ff), a.fleetStopCmd(ff), a.fleetAutoscaleCmd(ff), a.fleetBridgeCmd())
	return cmd
}

// fleetBridgeCmd is the process that keeps one ssh runner's session.
func (a *app) fleetBridgeCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:    "ssh-bridge --dir DIR",
		Short:  "Keep one SSH runner's session and tunnel (started by 'fleet launch')",
		Hidden: true,
		Args:   noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := a.signalContext(cmd.Context())
			defer stop()
			return fleet.RunBridge(ctx, dir, a.log)
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "", "the runner's directory")
	_ = cmd.MarkFlagRequired("dir")
	return cmd
}

// parseLabelList parses a --labels value, k=v,k2=v2 ("" for none), by the
// hub's rule (protocol.ParseLabelList).
func parseLabelList(s string) (map[string]string, error) {
	m, err := rules.ParseLabelList(s)
	if err != nil {
		return nil, usagef("--labels: %v", err)
	}
	return m, nil
}

// fleetFlags are the fleet commands' settings of their targets.
type fleetFlags struct {
	hosts, hostBinary, image, containerfile, network string
	kube                                             fleet.KubeConfig
}

// fleetTarget opens a target with this machine's settings.
func (a *app) fleetTarget(name string, ff *fleetFlags) (fleet.Target, error) {
	dir, err := a.xdg("XDG_STATE_HOME", ".local/state", "fleet", name)
	if err != nil {
		return nil, err
	}
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find the drover binary: %w", err)
	}
	hosts := ff.hosts
	if hosts == "" {
		if hosts, err = a.xdg("XDG_CONFIG_HOME", ".config", "fleet-hosts.json"); err != nil {
			return nil, err
		}
	}
	hostBin := ff.hostBinary
	if hostBin != "" {
		if hostBin, err = filepath.Abs(hostBin); err != nil {
			return nil, err
		}
		if fi, err := os.Stat(hostBin); err != nil || !fi.Mode().IsRegular() {
			return nil, usagef("--host-binary %s: not a file", ff.hostBinary)
		}
	}
	cf := ff.containerfile
	if cf != "" {
		if cf, err = filepath.Abs(cf); err != nil {
			return nil, err
		}
	}
	return fleet.Open(name, fleet.Config{Binary: exe, HostBinary: hostBin, StateDir: dir, Env: os.Environ(), HostsFile: hosts,
		Image: ff.image, Containerfile: cf, Network: ff.network, Kube: ff.kube})
}

func (a *app) fleetLaunchCmd(ff *fleetFlags) *cobra.Command {
	var on, labels string
	var count, slots int
	var ttl time.Duration
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "launch --on TARGET [--count N] [--labels k=v,...] [--slots N] [--ttl D]",
		Short: "Start runners on a target, each registering with its own single-use token",
		Args:  noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if count < 1 || count > apitypes.MaxLaunchCount {
				return usagef("--count must be 1 to %d", apitypes.MaxLaunchCount)
			}
			if slots < 1 {
				return usagef("--slots must be at least 1")
			}
			lm, err := parseLabelList(labels)
			if err != nil {
				return err
			}
			ctx := cmd.Context()
			t, c, s, lm, err := a.openFleet(ctx, on, ff, lm)
			if err != nil {
				return err
			}
			resp, ins, err := fleet.Start(ctx, a.log, c, t, apitypes.LaunchRequest{Target: on, Count: count, Slots: slots, Labels: lm,
				TTLSeconds: int(ttl / time.Second)}, s.Hub, 0)
			if err != nil {
				return err
			}
			if asJSON {
				return printJSON(a.env.Stdout, resp.LaunchView)
			}
			fprintf(a.env.Stdout, "launch %s on %s: %d runner(s)\n", resp.ID, on, len(ins))
			for _, in := range ins {
				fprintf(a.env.Stdout, "  %s  %s\n", in.Name, in.Where)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&on, "on", "", "target: local, docker, podman, kubernetes, or an SSH host of the hosts file")
	cmd.Flags().IntVar(&count, "count", 1, "runners to start")
	cmd.Flags().IntVar(&slots, "slots", 1, "jobs each runner runs at once")
	cmd.Flags().StringVar(&labels, "labels", "", "labels of the runners (and all they may report), k=v,k2=v2")
	cmd.Flags().DurationVar(&ttl, "ttl", apitypes.DefaultRegistrationTTL, "how long the registration tokens may wait to be used")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the launch as JSON")
	_ = cmd.MarkFlagRequired("on")
	return cmd
}

// openFleet opens and checks the target (an unknown one, or one whose
// tool is missing, fails before the hub mints anything), then the client,
// and the labels of a launch on it.
func (a *app) openFleet(ctx context.Context, on string, ff *fleetFlags, labels map[string]string) (fleet.Target, *client.Client, settings, map[string]string, error) {
	t, err := a.fleetTarget(on, ff)
	if err != nil {
		return nil, nil, settings{}, nil, err
	}
	if err := t.Check(ctx); err != nil {
		return nil, nil, settings{}, nil, err
	}
	c, s, err := a.clientSettings(ctx)
	if err != nil {
		return nil, nil, settings{}, nil, err
	}
	labels, err = scopedLabels(ctx, c, on, t, labels)
	return t, c, s, labels, err
}

// scopedLabels refuses a launch on a host the operator registered for
// another user, and adds the host's labels to the launch's: its runners
// report them.
func scopedLabels(ctx context.Context, c *client.Client, on string, t fleet.Target, labels map[string]string) (map[string]string, error) {
	sc, ok := t.(fleet.Scoped)
	if !ok {
		return labels, nil
	}
	if owner := sc.Owner(); owner != "" {
		w, err := c.Whoami(ctx)
		if err != nil {
			return nil, err
		}
		if w.Name != owner {
			return nil, fmt.Errorf("host %s is registered in the fleet's hosts file for user %s, not %s: ask the operator", on, owner, w.Name)
		}
	}
	m := sc.Labels()
	maps.Copy(m, labels)
	return m, nil
}

func (a *app) fleetListCmd() *cobra.Command {
	return answerCmd(a, &cobra.Command{
		Use:   "list [--json]",
		Short: "List your launches and their runners (an admin: all)",
		Args:  noArgs,
	}, func(ctx context.Context, c *client.Client, _ []string) (apitypes.LaunchList, error) {
		return c.Launches(ctx)
	}, func(w io.Writer, l apitypes.LaunchList) error {
		if len(l.Launches) == 0 {
			_, err := fprintf(w, "no launches; start runners with 'drover fleet launch --on local'\n")
			return err
		}
		tw := newTable(w)
		fprintf(tw, "LAUNCH\tTARGET\tOWNER\tRUNNER\tSTATE\tLABELS\n")
		for _, v := range l.Launches {
			for _, r := range v.Runners {
				fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", v.ID, v.Target, v.Owner, r.Name, launchRunnerState(v, r), dash(formatLabels(v.Labels)))
			}
		}
		return tw.Flush()
	})
}

func launchRunnerState(v apitypes.LaunchView, r apitypes.LaunchRunner) string {
	switch {
	case r.Revoked || (v.Revoked && !r.Registered):
		return "revoked"
	case r.Connected:
		return "connected"
	case r.Registered:
		return "disconnected"
	}
	return "registering"
}

// launchOfRunner is the launch a launched runner's name belongs to.
func launchOfRunner(ctx context.Context, c *client.Client, name string) (apitypes.LaunchView, error) {
	l, err := c.Launches(ctx)
	if err != nil {
		return apitypes.LaunchView{}, err
	}
	for _, v := range l.Launches {
		for _, r := range v.Runners {
			if r.Name == name {
				return v, nil
			}
		}
	}
	return apitypes.LaunchView{}, fmt.Errorf("no launched runner %s of yours: 'drover fleet list' shows them", name)
}

func (a *app) fleetLogsCmd(ff *fleetFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "logs RUNNER",
		Short: "Print what a launched runner printed",
		Args:  exactArgs("RUNNER"),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := a.client(cmd.Context())
			if err != nil {
				return err
			}
			v, err := launchOfRunner(cmd.Context(), c, args[0])
			if err != nil {
				return err
			}
			t, err := a.fleetTarget(v.Target, ff)
			if err != nil {
				return err
			}
			return t.Logs(cmd.Context(), args[0], safeWriter{a.env.Stdout})
		},
	}
}

// safeWriter escapes what a terminal may act on, line by line.
type safeWriter struct{ w io.Writer }

func (s safeWriter) Write(p []byte) (int, error) {
	lines := strings.SplitAfter(string(p), "\n")
	for _, l := range lines {
		body, nl := strings.CutSuffix(l, "\n")
		out := safe(body)
		if nl {
			out += "\n"
		}
		if _, err := io.WriteString(s.w, out); err != nil {
			return 0, err
		}
	}
	return len(p), nil
}

func (a *app) fleetStopCmd(ff *fleetFlags) *cobra.Command {
	return &cobra.Command{
		Use:   "stop LAUNCH",
		Short: "Stop a launch's runners (their attempts go back to the queue) and revoke them",
		Args:  exactArgs("LAUNCH"),
		RunE: func(cmd *cobra.Command, args []string) error {
			ctx := cmd.Context()
			c, err := a.client(ctx)
			if err != nil {
				return err
			}
			v, err := c.LaunchView(ctx, args[0])
			if err != nil {
				return err
			}
			t, err := a.fleetTarget(v.Target, ff)
			if err != nil {
				return err
			}
			// Stopped first, so running attempts end gracefully; revoked
			// whatever happened, so no runner of it keeps working.
			serr := t.Stop(ctx, v.ID)
			if _, err := c.RevokeLaunch(context.WithoutCancel(ctx), v.ID); err != nil {
				return errors.Join(serr, err)
			}
			if serr != nil {
				return serr
			}
			_, err = fprintf(a.env.Stdout, "stopped and revoked launch %s (%d runner(s))\n", v.ID, len(v.Runners))
			return err
		},
	}
}

func (a *app) fleetAutoscaleCmd(ff *fleetFlags) *cobra.Command {
	var on, labels string
	var lo, hi, slots int
	var idle time.Duration
	cmd := &cobra.Command{
		Use:   "autoscale --on TARGET --max N [--min N] [--labels k=v,...] [--slots N] [--idle D]",
		Short: "Keep min(--min + your queued jobs they could run, --max) runners on a target until interrupted",
		Long: `Launch and stop runners on a target as your queue changes: the hub
answers when a dispatch pass changed the queue, so nothing polls. One launch
per runner, counted from the moment it is asked for (a queued job never
causes two); a runner is stopped once it had no attempt offered or running
for --idle; a launch that fails is shown on your waiting jobs and retried
with backoff. On SIGINT or SIGTERM every runner it launched is stopped.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			lm, err := parseLabelList(labels)
			if err != nil {
				return err
			}
			if slots < 1 {
				return usagef("--slots must be at least 1")
			}
			ctx, stop := a.signalContext(cmd.Context())
			defer stop()
			t, c, s, lm, err := a.openFleet(ctx, on, ff, lm)
			if err != nil {
				return err
			}
			as := &fleet.Autoscaler{Hub: c, Target: t, TargetName: on, HubURL: s.Hub, Min: lo, Max: hi,
				Labels: lm, Slots: slots, IdleGrace: idle, Log: a.log}
			return as.Run(ctx)
		},
	}
	cmd.Flags().StringVar(&on, "on", "", "target: local, docker, podman, kubernetes, or an SSH host of the hosts file")
	cmd.Flags().IntVar(&lo, "min", 0, "runners to keep with nothing queued")
	cmd.Flags().IntVar(&hi, "max", 0, "most runners at once")
	cmd.Flags().IntVar(&slots, "slots", 1, "jobs each runner runs at once")
	cmd.Flags().StringVar(&labels, "labels", "", "labels of the runners; only queued jobs they could run count, k=v,k2=v2")
	cmd.Flags().DurationVar(&idle, "idle", 10*time.Second, "how long a runner is idle before it is stopped")
	_ = cmd.MarkFlagRequired("on")
	_ = cmd.MarkFlagRequired("max")
	return cmd
}
