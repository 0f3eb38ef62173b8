package runner

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"drover/internal/agent"
	"drover/internal/job"
	"drover/internal/netpolicy"
	"drover/internal/protocol"
	"drover/internal/sandbox"
	"drover/internal/sandbox/egress"
)

// setupOutputCap bounds the output of each setup command in the log: a
// flooding command is cut there (and ends at the setup timeout at the latest).
const setupOutputCap = 8 << 20

// dirEnv is where the attempt's commands run (its worktree, else dir) and
// the environment they get beyond jobEnv's: the workspace's and the caches'.
func (a *attempt) dirEnv(dir string, env []string) (string, []string) {
	if a.ws != nil {
		dir = a.ws.wt.Dir()
		env = append(env, a.ws.env()...)
	}
	if a.caches != nil {
		env = append(env, a.caches.env...)
	}
	return dir, env
}

// runSetup runs the project's setup commands in the attempt's sandbox
// under the setup policy, within the setup's timeout, as a marked section
// of the log. A zero outcome means setup succeeded and the agent runs.
func (r *Runner) runSetup(a *attempt, out io.Writer, dir string) job.Outcome {
	s := a.spec.Setup
	dir, env := a.dirEnv(dir, jobEnv(a.ref, dir))
	// The proxy keeps every key out of what the sandbox hears; the log is
	// masked as well, should a key come back some other way.
	var needles []string
	for _, c := range s.Credentials {
		needles = append(needles, egress.Needles(egress.FromSetup(c))...)
	}
	masked := egress.NewScrubWriter(out, needles)
	defer masked.Flush()
	out = masked
	box, err := r.phaseBoundary(a, dir, agent.Extra{}, netpolicy.PhaseSetup, s.Credentials)
	if err != nil {
		return job.Outcome{State: job.AttemptFailed, Reason: job.ReasonSetupFailed, Message: clip("setup sandbox: "+err.Error(), 4096)}
	}
	a.box = box
	timeout := s.Timeout.D()
	if timeout <= 0 {
		timeout = protocol.DefaultSetupTimeout
	}
	network := "none"
	if a.spec.Network != nil {
		network = describePhase(a.spec.Network.Setup)
	}
	key := ""
	if len(s.KeyFiles) > 0 && a.caches != nil && a.spec.Repo != nil {
		if key, err = setupKey(s, dir); err != nil {
			r.log.Warn("setup key", "attempt", a.ref.String(), "err", err)
		} else if _, err := os.Stat(r.setupMarker(a.spec.Repo.Project, key)); err == nil {
			a.setupReused = true
			fmt.Fprintf(out, "=== drover setup reused: the same commands ran successfully on this runner with the same %s ===\n",
				strings.Join(s.KeyFiles, ", "))
			return job.Outcome{}
		}
	}
	steps := setupSteps(s)
	fmt.Fprintf(out, "=== drover setup: %d command(s), network %s, within %s ===\n", len(steps), network, timeout)
	ctx, cancel := context.WithTimeout(a.ctx, timeout)
	defer cancel()
	fail := func(format string, args ...any) job.Outcome {
		msg := fmt.Sprintf(format, args...)
		fmt.Fprintf(out, "=== drover setup FAILED: %s ===\n", msg)
		return job.Outcome{State: job.AttemptFailed, Reason: job.ReasonSetupFailed, Message: clip(msg, 4096)}
	}
	if s.File != "" {
		// The repository's script, as the job's commit has it: read (and
		// run) only inside the sandbox; here only its kind is looked at.
		if fi, err := lstatIn(dir, s.File); err != nil || !fi.Mode().IsRegular() {
			return fail("setup file %s is not a file in the job's commit (the project's owner enabled it: drover projects setup --from-repo)", s.File)
		}
	}
	for i, st := range steps {
		cmd := st.shown
		fmt.Fprintf(out, "--- setup %d/%d: $ %s\n", i+1, len(steps), oneLine(cmd))
		left := timeout
		if dl, ok := ctx.Deadline(); ok {
			left = time.Until(dl)
		}
		if left <= 0 {
			return fail("setup ran past its timeout of %s before command %d", timeout, i+1)
		}
		if st.repo {
			if box, err = r.scriptBox(a, out, dir, box); err != nil {
				return fail("setup sandbox of %s: %v", s.File, err)
			}
		}
		p, err := box.Start(ctx, sandbox.Spec{Dir: dir, Argv: st.argv, Env: env, Output: out,
			Timeout: left, Grace: r.cfg.StopGrace})
		if err != nil {
			return fail("setup command %d could not start: %v", i+1, err)
		}
		ex, err := p.Wait()
		switch {
		case err != nil:
			return fail("setup command %d: %v", i+1, err)
		case a.ctx.Err() != nil:
			o := unlaunched(context.Cause(a.ctx))
			fmt.Fprintf(out, "=== drover setup stopped: %s ===\n", o.Message)
			return o
		case ex.TimedOut || errors.Is(ctx.Err(), context.DeadlineExceeded):
			return fail("setup ran past its timeout of %s in command %d ($ %s)", timeout, i+1, oneLine(cmd))
		case ex.Code != 0:
			return fail("setup command %d exited with code %d ($ %s)", i+1, ex.Code, oneLine(cmd))
		}
	}
	fmt.Fprintf(out, "=== drover setup done ===\n")
	if key != "" {
		m := r.setupMarker(a.spec.Repo.Project, key)
		if err := os.MkdirAll(filepath.Dir(m), 0o700); err != nil {
			r.log.Warn("remember the setup", "attempt", a.ref.String(), "err", err)
		} else if err := os.WriteFile(m, nil, 0o600); err != nil {
			r.log.Warn("remember the setup", "attempt", a.ref.String(), "err", err)
		}
	}
	return job.Outcome{}
}

// maxSetupFile bounds the repository setup script the runner hashes: a
// larger one is no version its owner approved.
const maxSetupFile = 1 << 20

// scriptBox is the boundary the repository's setup script runs in: box,
// unless the setup brings project secrets and the script, as it is now
// (after the commands before it), is no version the project's owner
// approved. Then it is one without the project's secrets, and the log
// says why: any member's commit can change the script.
func (r *Runner) scriptBox(a *attempt, out io.Writer, dir string, box sandbox.Boundary) (sandbox.Boundary, error) {
	s := a.spec.Setup
	isSecret := func(c protocol.SetupCredential) bool { return c.Secret }
	if !slices.ContainsFunc(s.Credentials, isSecret) {
		return box, nil
	}
	sum, err := fileHash(dir, s.File)
	if err == nil && slices.Contains(s.FileApproved, sum) {
		fmt.Fprintf(out, "=== drover setup: %s (sha256 %s) is a version the project's owner approved: it runs with the project's secrets ===\n",
			s.File, sum)
		return box, nil
	}
	project := ""
	if a.spec.Repo != nil {
		project = a.spec.Repo.Project
	}
	why := fmt.Sprintf("its sha256 %s is not one the project's owner approved; after reading it, the owner approves it with: drover projects setup %s --approve %s",
		sum, project, sum)
	if err != nil {
		why = fmt.Sprintf("it could not be hashed (%v)", err)
	}
	fmt.Fprintf(out, "=== drover setup: %s runs WITHOUT the project's secrets: %s ===\n", s.File, why)
	nb, err := r.phaseBoundary(a, dir, agent.Extra{}, netpolicy.PhaseSetup, slices.DeleteFunc(slices.Clone(s.Credentials), isSecret))
	if err != nil {
		return nil, err
	}
	a.box = nb
	return nb, nil
}

// fileHash is protocol.SetupFileHash of the regular file name inside dir
// (never outside it), of at most maxSetupFile bytes.
func fileHash(dir, name string) (string, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", err
	}
	defer root.Close()
	f, err := root.Open(name)
	if err != nil {
		return "", err
	}
	defer f.Close()
	if fi, err := f.Stat(); err != nil || !fi.Mode().IsRegular() {
		return "", fmt.Errorf("%s is not a regular file", name)
	}
	b, err := io.ReadAll(io.LimitReader(f, maxSetupFile+1))
	if err != nil {
		return "", err
	}
	if len(b) > maxSetupFile {
		return "", fmt.Errorf("%s is larger than %d bytes", name, maxSetupFile)
	}
	return protocol.SetupFileHash(b), nil
}

// lstatIn is os.Lstat of name inside dir, never outside it.
func lstatIn(dir, name string) (os.FileInfo, error) {
	root, err := os.OpenRoot(dir)
	if err != nil {
		return nil, err
	}
	defer root.Close()
	return root.Lstat(name)
}

// setupStep is one command of a setup: as the log shows it and as it
// runs, and whether it is the repository's script.
type setupStep struct {
	shown string
	argv  []string
	repo  bool
}

// setupSteps are the setup's commands, then its repository script.
func setupSteps(s *protocol.SetupSpec) []setupStep {
	var out []setupStep
	for _, c := range s.Commands {
		out = append(out, setupStep{shown: c, argv: []string{"/bin/sh", "-c", c}})
	}
	if s.File != "" {
		out = append(out, setupStep{shown: "sh " + s.File, argv: []string{"/bin/sh", "--", s.File}, repo: true})
	}
	return out
}

// setupMarker is the file that says a setup with this key succeeded for
// the project: outside every cache, so that no sandbox can forge it.
func (r *Runner) setupMarker(project, key string) string {
	return filepath.Join(setupKeysDir(r.cfg.Home, project), key)
}

// maxKeyFile bounds how much of one key file is hashed.
const maxKeyFile = 64 << 20

// setupKey hashes a setup's commands and the contents of its key files in
// the worktree dir (a file that is missing or not a regular file counts as
// such: symlinks are not followed).
func setupKey(s *protocol.SetupSpec, dir string) (string, error) {
	h := sha256.New()
	for _, c := range s.Commands {
		fmt.Fprintf(h, "command %d\x00%s\x00", len(c), c)
	}
	// The repository's script is keyed by its contents, like a lockfile.
	files := s.KeyFiles
	if s.File != "" {
		// Its approvals decide what it ran with: a new one runs it again.
		fmt.Fprintf(h, "setup file %s\x00approved %s\x00", s.File, strings.Join(s.FileApproved, ","))
		files = append(slices.Clone(files), s.File)
	}
	// Read through an os.Root: a repository's symlinked folder never takes
	// the runner outside the worktree.
	root, err := os.OpenRoot(dir)
	if err != nil {
		return "", fmt.Errorf("open the worktree for the setup key: %w", err)
	}
	defer root.Close()
	for _, name := range files {
		if err := protocol.CheckKeyFile(name); err != nil {
			return "", err
		}
		fmt.Fprintf(h, "file %s\x00", name)
		fi, err := root.Lstat(name)
		if err != nil || !fi.Mode().IsRegular() || fi.Size() > maxKeyFile {
			fmt.Fprintf(h, "absent\x00")
			continue
		}
		f, err := root.Open(name)
		if err != nil {
			return "", fmt.Errorf("read setup key file %s: %w", name, err)
		}
		n, err := io.Copy(h, io.LimitReader(f, maxKeyFile))
		f.Close()
		if err != nil {
			return "", fmt.Errorf("read setup key file %s: %w", name, err)
		}
		fmt.Fprintf(h, "\x00%d\x00", n)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// oneLine shortens a command for the log and messages.
func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	return clip(s, 200)
}
