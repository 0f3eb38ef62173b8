package fleet

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"

	"drover/internal/rules"
)

// Container runs each runner in a container of a docker or podman engine,
// through the engine's CLI. The image is Config.Image, or one built from
// Config.Containerfile (tagged by its content's hash). The registration
// token goes in a 0600 --env-file, removed once the engine read it: never
// argv. Containers carry labels, which List and Stop find them by; Stop
// keeps what a runner printed in StateDir/LAUNCH/NAME/runner.log before it
// removes the container.
type Container struct {
	engine        string // "docker" or "podman"
	image         string
	containerfile string
	network       string
	dir           string
	env           []string
}

// Labels on every container the target starts.
const (
	labelLaunch = "drover.fleet.launch"
	labelRunner = "drover.fleet.runner"
	// containerHome is the runner's home inside its container.
	containerHome = "/var/lib/drover"
)

// NewContainer makes the docker or podman target.
func NewContainer(engine string, c Config) (*Container, error) {
	if c.StateDir == "" {
		return nil, errors.New("a fleet target needs a state directory")
	}
	return &Container{engine: engine, image: c.Image, containerfile: c.Containerfile, network: c.Network,
		dir: c.StateDir, env: runnerEnv(c.Env)}, nil
}

// cli runs the engine with args; its error carries what the engine said.
func (c *Container) cli(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, c.engine, args...)
	cmd.Env = c.env
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		// One line of what the engine said, at most 500 bytes.
		msg := strings.Join(strings.Fields(errb.String()), " ")
		if msg == "" {
			msg = err.Error()
		}
		return out.String(), fmt.Errorf("%s %s: %s", c.engine, args[0], msg[:min(len(msg), 500)])
	}
	return out.String(), nil
}

func (c *Container) Check(ctx context.Context) error {
	if _, err := exec.LookPath(c.engine); err != nil {
		return fmt.Errorf("the %s target needs the %s CLI on PATH: install it, or launch --on local", c.engine, c.engine)
	}
	if _, err := c.cli(ctx, "version", "--format", "{{.Client.Version}}"); err != nil {
		return fmt.Errorf("%w: start the %s engine (or fix its socket)", err, c.engine)
	}
	if c.image == "" {
		if c.containerfile == "" {
			return fmt.Errorf("the %s target needs --image, or a Containerfile (see deploy/Containerfile)", c.engine)
		}
		if _, err := os.Stat(c.containerfile); err != nil {
			return fmt.Errorf("no image: --image is not set and %s cannot be read (%v); see deploy/Containerfile", c.containerfile, err)
		}
	}
	return nil
}

// ensureImage makes the image present, so a missing image or a refused
// pull is a launch failure with its reason, before any container.
func (c *Container) ensureImage(ctx context.Context) (string, error) {
	if c.image == "" {
		b, err := os.ReadFile(c.containerfile)
		if err != nil {
			return "", fmt.Errorf("read %s: %w", c.containerfile, err)
		}
		sum := sha256.Sum256(b)
		tag := "drover-fleet:" + hex.EncodeToString(sum[:6])
		if _, err := c.cli(ctx, "image", "inspect", "--format", "{{.Id}}", tag); err == nil {
			return tag, nil
		}
		if _, err := c.cli(ctx, "build", "--tag", tag, "--file", c.containerfile, filepath.Dir(c.containerfile)); err != nil {
			return "", fmt.Errorf("build the runner image from %s: %w", c.containerfile, err)
		}
		return tag, nil
	}
	if _, err := c.cli(ctx, "image", "inspect", "--format", "{{.Id}}", c.image); err == nil {
		return c.image, nil
	}
	if _, err := c.cli(ctx, "pull", c.image); err != nil {
		return "", fmt.Errorf("image %s is not here and pulling it failed: %w", c.image, err)
	}
	return c.image, nil
}

func (c *Container) Launch(ctx context.Context, s Spec) ([]Instance, error) {
	if err := c.Check(ctx); err != nil {
		return nil, err
	}
	image, err := c.ensureImage(ctx)
	if err != nil {
		return nil, err
	}
	var out []Instance
	for _, r := range s.Runners {
		in, err := c.start(ctx, s, r, image)
		if err != nil {
			return nil, errors.Join(fmt.Errorf("start runner %s: %w", r.Name, err), c.Stop(context.WithoutCancel(ctx), s.LaunchID))
		}
		out = append(out, in)
	}
	return out, nil
}

func (c *Container) start(ctx context.Context, s Spec, r RunnerSpec, image string) (Instance, error) {
	dir, err := runnerDir(c.dir, s.LaunchID, r.Name)
	if err != nil {
		return Instance{}, err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return Instance{}, err
	}
	for _, d := range []string{c.dir, filepath.Join(c.dir, s.LaunchID), dir} {
		if err := os.Chmod(d, 0o700); err != nil {
			return Instance{}, err
		}
	}
	envFile := filepath.Join(dir, "registration.env")
	if err := os.WriteFile(envFile, []byte("DROVER_REGISTRATION_TOKEN="+r.Token+"\n"), 0o600); err != nil {
		return Instance{}, err
	}
	// The engine reads the file at run; the token is not kept at rest.
	defer os.Remove(envFile)
	args := []string{"run", "--detach", "--name", "drover-" + r.Name,
		"--label", labelLaunch + "=" + s.LaunchID, "--label", labelRunner + "=" + r.Name,
		"--pull", "never", "--env-file", envFile}
	if c.network != "" {
		args = append(args, "--network", c.network)
	}
	args = append(args, image, "drover", "runner", "--hub", s.Hub, "--home", containerHome,
		"--slots", fmt.Sprint(max(s.Slots, 1)))
	if s.MaxJobs > 0 {
		args = append(args, "--max-jobs", fmt.Sprint(s.MaxJobs))
	}
	if len(s.Labels) > 0 {
		args = append(args, "--labels", rules.FormatLabels(s.Labels))
	}
	id, err := c.cli(ctx, args...)
	if err != nil {
		return Instance{}, err
	}
	return Instance{LaunchID: s.LaunchID, Name: r.Name, Running: true, Where: c.engine + " " + shortID(id)}, nil
}

func shortID(id string) string {
	id = strings.TrimSpace(id)
	return id[:min(len(id), 12)]
}

// containers lists the target's containers ("" for every launch's).
func (c *Container) containers(ctx context.Context, launchID string) ([]Instance, []string, error) {
	filter := "label=" + labelRunner
	if launchID != "" {
		if !rules.ValidName(launchID) {
			return nil, nil, fmt.Errorf("launch %q is not a valid name", launchID)
		}
		filter = "label=" + labelLaunch + "=" + launchID
	}
	out, err := c.cli(ctx, "ps", "--all", "--quiet", "--no-trunc", "--filter", filter)
	if err != nil {
		return nil, nil, err
	}
	ids := strings.Fields(out)
	if len(ids) == 0 {
		return nil, nil, nil
	}
	out, err = c.cli(ctx, append([]string{"inspect", "--format",
		`{{index .Config.Labels "` + labelLaunch + `"}} {{index .Config.Labels "` + labelRunner + `"}} {{.State.Running}}`}, ids...)...)
	if err != nil {
		return nil, nil, err
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != len(ids) {
		return nil, nil, fmt.Errorf("%s inspect answered %d lines for %d containers", c.engine, len(lines), len(ids))
	}
	var ins []Instance
	for i, l := range lines {
		f := strings.Fields(l)
		if len(f) != 3 {
			return nil, nil, fmt.Errorf("%s inspect: unexpected line %q", c.engine, l[:min(len(l), 100)])
		}
		ins = append(ins, Instance{LaunchID: f[0], Name: f[1], Running: f[2] == "true", Where: c.engine + " " + shortID(ids[i])})
	}
	return ins, ids, nil
}

func (c *Container) List(ctx context.Context) ([]Instance, error) {
	ins, _, err := c.containers(ctx, "")
	return ins, err
}

// Stop stops the launch's containers (SIGTERM, then SIGKILL after 60 s:
// their attempts go back to the queue), keeps their logs and removes them.
func (c *Container) Stop(ctx context.Context, launchID string) error {
	ins, ids, err := c.containers(ctx, launchID)
	if err != nil || len(ids) == 0 {
		return err
	}
	if _, err := c.cli(ctx, append([]string{"stop", "--time", "60"}, ids...)...); err != nil {
		return err
	}
	var errs []error
	for i, id := range ids {
		errs = append(errs, c.keepLog(ctx, ins[i], id))
	}
	if _, err := c.cli(ctx, append([]string{"rm", "--force"}, ids...)...); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// keepLog saves what a container printed before it is removed.
func (c *Container) keepLog(ctx context.Context, in Instance, id string) error {
	dir, err := runnerDir(c.dir, in.LaunchID, in.Name)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	f, err := os.OpenFile(filepath.Join(dir, "runner.log"), os.O_CREATE|os.O_WRONLY|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	defer f.Close()
	return c.logs(ctx, id, f)
}

func (c *Container) logs(ctx context.Context, id string, w io.Writer) error {
	cmd := exec.CommandContext(ctx, c.engine, "logs", id)
	cmd.Env = c.env
	cmd.Stdout, cmd.Stderr = w, w
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%s logs %s: %w", c.engine, shortID(id), err)
	}
	return nil
}

// Logs prints a runner's container log, or the one Stop kept.
func (c *Container) Logs(ctx context.Context, name string, w io.Writer) error {
	if !rules.ValidName(name) {
		return fmt.Errorf("runner %q is not a valid name", name)
	}
	out, err := c.cli(ctx, "ps", "--all", "--quiet", "--no-trunc", "--filter", "label="+labelRunner+"="+name)
	if err != nil {
		return err
	}
	if ids := strings.Fields(out); len(ids) > 0 {
		return c.logs(ctx, ids[0], w)
	}
	files, err := filepath.Glob(filepath.Join(c.dir, "*", name, "runner.log"))
	if err != nil {
		return err
	}
	if len(files) == 0 {
		return fmt.Errorf("no %s runner %s here: `drover fleet list` shows the launched runners", c.engine, name)
	}
	f, err := os.Open(files[0])
	if err != nil {
		return err
	}
	defer f.Close()
	_, err = io.Copy(w, f)
	return err
}
