package cli

import (
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"drover/internal/rules"
	"drover/internal/sandbox"
)

// sandboxOptions are the flags that choose where a runner's jobs run.
type sandboxOptions struct {
	kind   string
	image  string
	pull   bool
	images []string // the images jobs may name (rules.CheckImagePatterns)
}

func (o *sandboxOptions) addFlags(cmd *cobra.Command) {
	f := cmd.Flags()
	f.StringVar(&o.kind, "sandbox", sandbox.KindBwrap,
		"where jobs run: bwrap (isolated, the default), docker or podman (containers), none (UNISOLATED: the job can do all the runner can)")
	f.StringVar(&o.image, "sandbox-image", "", "image jobs run in with --sandbox docker or podman")
	f.BoolVar(&o.pull, "sandbox-pull", false, "let the container engine pull the image when it is missing")
	f.StringSliceVar(&o.images, "images", nil, "with --sandbox docker or podman: the images a job may name (drover run --image), each exact or a prefix ending in '*', e.g. swebench/sweb.eval.x86_64.*")
}

// check refuses a sandbox drover does not know, before anything starts.
func (o sandboxOptions) check() error {
	if !slices.Contains(sandbox.Kinds(), o.kind) {
		return usagef("--sandbox %q: want one of %s", o.kind, strings.Join(sandbox.Kinds(), ", "))
	}
	if o.image != "" && o.kind != sandbox.KindDocker && o.kind != sandbox.KindPodman {
		return usagef("--sandbox-image is for --sandbox docker or podman")
	}
	if len(o.images) > 0 && o.kind != sandbox.KindDocker && o.kind != sandbox.KindPodman {
		return usagef("--images is for --sandbox docker or podman: a %s sandbox runs no image", o.kind)
	}
	if err := rules.CheckImagePatterns(o.images); err != nil {
		return usagef("--images: %v", err)
	}
	return nil
}

// policy is the runner's sandbox policy; the runner adds each attempt's
// root, mode and variables.
func (o sandboxOptions) policy() sandbox.Policy {
	return sandbox.Policy{Kind: o.kind, Image: o.image, AllowPull: o.pull, Limits: sandbox.DefaultLimits()}
}

func (a *app) runnerDoctorCmd() *cobra.Command {
	var asJSON bool
	var kind, labels string
	cmd := &cobra.Command{
		Use:   "doctor [--sandbox KIND] [--labels k=v,...] [--json]",
		Short: "Say which sandboxes work on this machine, and how to fix the others",
		Long: `Check each sandbox a runner can run jobs in (bwrap, docker, podman, none),
how resource limits are enforced here, and git. Exits 1 when the sandbox
named by --sandbox (default bwrap) does not work. With --labels, checks the
runner's labels by the hub's rule, naming each it would refuse and why, and
exits 1 if there is one.`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			checks := sandbox.Doctor(cmd.Context())
			if cmd.Flags().Changed("labels") {
				checks = append(checks, labelCheck(labels))
			}
			if asJSON {
				if err := printJSON(a.env.Stdout, checks); err != nil {
					return err
				}
			} else if err := printChecks(a, checks); err != nil {
				return err
			}
			var failed exitCode
			for _, c := range checks {
				switch {
				case c.OK:
				case c.Kind == kind:
					fprintf(a.env.Stderr, "drover: --sandbox %s does not work here: %s\n", kind, c.Fix)
					failed = 1
				case c.Kind == "labels":
					fprintf(a.env.Stderr, "drover: --labels: the hub would refuse this runner: %s\n", c.Detail)
					failed = 1
				}
			}
			if failed != 0 {
				return failed
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&kind, "sandbox", sandbox.KindBwrap, "the sandbox this runner will use: exit 1 if it does not work")
	cmd.Flags().StringVar(&labels, "labels", "", "the labels this runner will use (as drover runner --labels): exit 1 if the hub would refuse one")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print the checks as JSON")
	return cmd
}

func printChecks(a *app, checks []sandbox.Check) error {
	tw := newTable(a.env.Stdout)
	fprintf(tw, "CHECK\tWORKS\tVERSION\tDETAIL\n")
	for _, c := range checks {
		works := "yes"
		if !c.OK {
			works = "NO"
		}
		fprintf(tw, "%s\t%s\t%s\t%s\n", c.Kind, works, dash(c.Version), c.Detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	for _, c := range checks {
		if c.Fix != "" {
			fprintf(a.env.Stdout, "to fix %s: %s\n", c.Kind, c.Fix)
		}
	}
	return nil
}

// sandboxInitCmd is the first process drover runs inside a sandbox that
// needs bridges (see sandbox.Init); users never call it.
func (a *app) sandboxInitCmd() *cobra.Command {
	return &cobra.Command{
		Use:                "sandbox-init [--bridge TCP=UNIX]... [--proxy ADDR] -- ARGV",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			if code := sandbox.Init(cmd.Context(), args, a.env.Stderr); code != 0 {
				return exitCode(code)
			}
			return nil
		},
	}
}
