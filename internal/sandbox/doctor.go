package sandbox

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"time"
)

// FixError is a sandbox that does not work here, with what would fix it.
type FixError struct {
	Problem string
	Fix     string
}

func (e *FixError) Error() string { return e.Problem + ": " + e.Fix }

// Check is what `drover runner doctor` says about one thing a runner uses.
type Check struct {
	Kind    string `json:"kind"` // a sandbox kind, "limits" or "git"
	OK      bool   `json:"ok"`
	Version string `json:"version,omitempty"`
	Detail  string `json:"detail"`
	Fix     string `json:"fix,omitempty"`
}

// Doctor reports which sandboxes work on this machine and why the others
// do not, how limits are enforced, and whether git is there.
func Doctor(ctx context.Context) []Check {
	var checks []Check
	root, err := os.MkdirTemp("", "drover-doctor-")
	if err == nil {
		defer os.RemoveAll(root)
	}
	for _, kind := range Kinds() {
		c := Check{Kind: kind}
		switch kind {
		case KindBwrap:
			var b Boundary
			if err == nil {
				b, err = New(ctx, Policy{Kind: kind, Root: root, Limits: DefaultLimits(), Logger: slog.New(slog.DiscardHandler)})
			}
			if err != nil {
				c.Detail, c.Fix = splitFix(err)
				break
			}
			iso := b.Describe()
			c.OK, c.Version, c.Detail = true, iso.Version, "namespaces: user, pid, ipc, uts, cgroup, network; "+iso.User
		case KindDocker, KindPodman:
			v, err := engineCheck(ctx, kind)
			if err != nil {
				c.Detail, c.Fix = splitFix(err)
				break
			}
			c.OK, c.Version, c.Detail = true, v, "runs jobs in an image the operator names (--pull never unless allowed)"
		case KindNone:
			c.OK, c.Detail = true, "always available; runs jobs UNISOLATED, as the runner's user: explicit opt-in only"
		}
		checks = append(checks, c)
	}
	checks = append(checks, limitsCheck(), gitCheck(ctx))
	return checks
}

func splitFix(err error) (detail, fix string) {
	var fe *FixError
	if errors.As(err, &fe) {
		return fe.Problem, fe.Fix
	}
	return err.Error(), ""
}

func limitsCheck() Check {
	cg := findCgroups([]string{"pids", "memory", "cpu"})
	var parts []string
	for _, ctrl := range []string{"pids", "memory", "cpu"} {
		m := cg.mechanism(ctrl)
		switch {
		case m != "":
		case ctrl == "pids" && os.Getuid() == 0:
			m = "NOT enforceable: root is exempt from RLIMIT_NPROC"
		case ctrl == "pids":
			m = "rlimit"
		case ctrl == "memory":
			m = "rlimit on address space"
		default:
			m = "not enforced (bwrap); containers only"
		}
		parts = append(parts, ctrl+": "+m)
	}
	c := Check{Kind: "limits", OK: true, Detail: strings.Join(parts, "; ") + "; cpu time: rlimit"}
	if strings.Contains(c.Detail, "NOT") {
		c.OK, c.Fix = false, "run the runner as a non-root user, or give it a writable pids cgroup"
	}
	return c
}

func gitCheck(ctx context.Context) Check {
	c := Check{Kind: "git"}
	bin, err := exec.LookPath("git")
	if err != nil {
		c.Detail, c.Fix = "git is not installed", "apt-get install git (git workspaces need it)"
		return c
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, bin, "--version").Output()
	if err != nil {
		c.Detail = fmt.Sprintf("%s --version failed: %v", bin, err)
		return c
	}
	c.OK, c.Version, c.Detail = true, strings.TrimSpace(string(out)), bin
	return c
}
