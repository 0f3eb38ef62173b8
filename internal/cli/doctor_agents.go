package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"drover/internal/accounts"
	"drover/internal/agent"
	"drover/internal/agent/catalog"
	"drover/internal/agent/facts"
	"drover/internal/protocol"
	"drover/internal/runner"
	"drover/internal/sandbox"
)

// versionRE finds a version number.
var versionRE = regexp.MustCompile(`\b\d+\.\d+`)

// versionTimeout bounds each agent CLI's `--version` in the doctor.
const versionTimeout = 30 * time.Second

// doctorAgents are the agent CLIs the doctor checks, in its order.
func doctorAgents() []string { return facts.CLIs() }

// agentPackage is the npm package a vendor CLI ships in.
func agentPackage(name string) string {
	if p := facts.Of(name).Package; p != "" {
		return p
	}
	return name
}

// agentCheck is what the doctor says about one agent CLI. Its first fields
// are those of sandbox.Check, so that --json stays one list of checks.
type agentCheck struct {
	Kind    string `json:"kind"` // "agent:" + Agent
	OK      bool   `json:"ok"`   // installed and runs in the sandbox
	Version string `json:"version,omitempty"`
	Detail  string `json:"detail"`
	Fix     string `json:"fix,omitempty"`

	Agent     string        `json:"agent"`
	Installed bool          `json:"installed"`
	Path      string        `json:"path,omitempty"`   // the resolved executable
	Mounts    []string      `json:"mounts,omitempty"` // what a sandbox mounts read-only for it
	Searched  string        `json:"searched"`         // the PATH it was looked for in
	Sandbox   string        `json:"sandbox"`          // the sandbox kind it was run in
	Runs      bool          `json:"runs"`             // its --version worked in that sandbox
	RunsError string        `json:"runs_error,omitempty"`
	Accounts  accountCounts `json:"accounts"`
	// Endpoint is the API root its api-key accounts without a base URL of
	// their own talk to, as drover resolved it; EndpointFrom says whence
	// ("vendor", or the runner's variable, e.g. OPENAI_BASE_URL) and
	// EndpointError why that variable cannot be used.
	Endpoint      string `json:"endpoint"`
	EndpointFrom  string `json:"endpoint_from"`
	EndpointError string `json:"endpoint_error,omitempty"`
}

type accountCounts struct {
	Ready   int `json:"ready"`
	Limited int `json:"limited"`
	// NeedFix counts the accounts that need a login or attention
	// ('drover runner account list' says how to fix each).
	NeedFix int `json:"need_fix"`
}

// withAgentChecks adds the agents section to `drover runner doctor`: after
// the sandbox checks (whose exit status it keeps), each agent CLI's
// location, version, whether it runs in the sandbox and the runner's
// accounts for it. A missing agent CLI is information, never a failure.
func (a *app) withAgentChecks(cmd *cobra.Command) *cobra.Command {
	sandboxes := cmd.RunE
	var home string
	cmd.Flags().StringVar(&home, "home", "", "runner home whose accounts to count (default $XDG_STATE_HOME/drover/runner)")
	cmd.Use += " [--home DIR]"
	cmd.Short = "Say which sandboxes and agent CLIs work on this machine, and how to fix the others"
	cmd.Long += `

Then, for each agent CLI (` + strings.Join(doctorAgents(), ", ") + `): where it is
on PATH, its version, whether it runs in the sandbox named by --sandbox (its
--version is run there) and how many of the runner's accounts for it are
ready or rate-limited, and the API root its api-key accounts without a
--base-url of their own use (the vendor's, or the runner's variable, e.g.
OPENAI_BASE_URL, normalised: with or without /v1 and a trailing slash). A missing agent CLI or account is reported, not a
failure. With --json the agents follow the sandbox checks in the one list,
as kind "agent:NAME".

Then each native account's model endpoint is asked once, with a tiny
request, to call a tool: whether it takes native tool calls (the native
agent needs them), or why the call failed. With --json these follow as kind
"native:ACCOUNT".`
	cmd.RunE = func(c *cobra.Command, args []string) error {
		asJSON, _ := c.Flags().GetBool("json")
		kind, _ := c.Flags().GetString("sandbox")
		out := a.env.Stdout
		var sbOut bytes.Buffer
		if asJSON {
			a.env.Stdout = &sbOut // merged with the agents below
		}
		sbErr := sandboxes(c, args)
		a.env.Stdout = out
		var code exitCode
		if sbErr != nil && !errors.As(sbErr, &code) {
			return sbErr
		}
		h := home
		if h == "" {
			var err error
			if h, err = a.runnerHome(); err != nil {
				return err
			}
		}
		checks := a.agentChecks(c.Context(), kind, a.env.Getenv("PATH"), h)
		natives := a.nativeChecks(c.Context(), h)
		if asJSON {
			var items []json.RawMessage
			if err := json.Unmarshal(sbOut.Bytes(), &items); err != nil {
				return fmt.Errorf("doctor: merge the sandbox checks: %w", err)
			}
			for _, ac := range checks {
				b, err := json.Marshal(ac)
				if err != nil {
					return fmt.Errorf("doctor: encode the agent checks: %w", err)
				}
				items = append(items, b)
			}
			for _, nc := range natives {
				b, err := json.Marshal(nc)
				if err != nil {
					return fmt.Errorf("doctor: encode the native checks: %w", err)
				}
				items = append(items, b)
			}
			if err := printJSON(out, items); err != nil {
				return err
			}
		} else if err := printAgentChecks(out, kind, checks); err != nil {
			return err
		} else if err := printNativeChecks(out, natives); err != nil {
			return err
		}
		return sbErr
	}
	return cmd
}

// agentChecks checks every agent CLI, at once: each may take seconds to
// start.
func (a *app) agentChecks(ctx context.Context, kind, path, home string) []agentCheck {
	counts, err := countAccounts(home)
	if err != nil {
		a.log.Warn("doctor: cannot read the runner's accounts", "err", err)
	}
	names := doctorAgents()
	checks := make([]agentCheck, len(names))
	var wg sync.WaitGroup
	for i, name := range names {
		checks[i] = agentCheck{Kind: "agent:" + name, Agent: name, Searched: path, Sandbox: kind, Accounts: counts[name]}
		if ad, ok := catalog.Adapter(name); ok {
			ep := ad.Endpoint
			root, from, err := ep.ResolveBaseURL("", a.env.Getenv(ep.UpstreamEnv))
			checks[i].Endpoint, checks[i].EndpointFrom = root, from
			if err != nil {
				checks[i].EndpointError = err.Error()
			}
		}
		wg.Go(func() { checkAgent(ctx, &checks[i], path) })
	}
	wg.Wait()
	return checks
}

// checkAgent fills in c: where the CLI is, and whether its --version runs
// in the sandbox.
func checkAgent(ctx context.Context, c *agentCheck, path string) {
	b, err := agent.Locate(c.Agent, path)
	if err != nil {
		c.Detail = "not installed"
		if path == "" {
			c.Detail += " (PATH is empty)"
		} else if !errors.Is(err, agent.ErrNotInstalled) {
			c.Detail = err.Error()
		}
		c.Fix = "npm install -g " + agentPackage(c.Agent) + " (on the PATH the runner runs with)"
		return
	}
	c.Installed, c.Path, c.Mounts = true, b.Path, b.Mounts
	version, err := sandboxVersion(ctx, c.Sandbox, b, path)
	if err != nil {
		c.RunsError = err.Error()
		c.Detail = b.Path
		var fe *sandbox.FixError
		if errors.As(err, &fe) {
			c.Fix = fe.Fix
		}
		return
	}
	c.OK, c.Runs, c.Version, c.Detail = true, true, version, b.Path
}

// sandboxVersion runs `<cli> --version` in a sandbox of kind that shows b's
// mounts read-only, with only PATH and HOME set, and returns its first line.
func sandboxVersion(ctx context.Context, kind string, b agent.Binary, path string) (string, error) {
	root, err := os.MkdirTemp("", "drover-doctor-"+b.Name+"-")
	if err != nil {
		return "", fmt.Errorf("make a directory to run %s in: %w", b.Name, err)
	}
	defer os.RemoveAll(root)
	mounts := make([]sandbox.Mount, len(b.Mounts))
	for i, m := range b.Mounts {
		mounts[i] = sandbox.Mount{Src: m}
	}
	limits := sandbox.DefaultLimits()
	limits.Output = 64 << 10
	box, err := sandbox.New(ctx, sandbox.Policy{Kind: kind, Mode: sandbox.ModeFix, Root: root, ReadOnly: mounts,
		Limits: limits, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		return "", err
	}
	var out bytes.Buffer
	p, err := box.Start(ctx, sandbox.Spec{
		Dir:     root,
		Argv:    []string{b.Path, "--version"},
		Env:     []string{"PATH=" + path, "HOME=" + root},
		Output:  &out,
		Timeout: versionTimeout,
	})
	if err != nil {
		return "", fmt.Errorf("start %s --version: %w", b.Name, err)
	}
	ex, err := p.Wait()
	if err != nil {
		return "", fmt.Errorf("run %s --version: %w", b.Name, err)
	}
	first := versionLine(out.String())
	switch {
	case ex.TimedOut:
		return "", fmt.Errorf("%s --version did not finish within %s", b.Name, versionTimeout)
	case ex.Code != 0:
		msg := fmt.Sprintf("%s --version exited %d", b.Name, ex.Code)
		if ex.Signal != "" {
			msg += " (" + ex.Signal + ")"
		}
		if first != "" {
			msg += ": " + first
		}
		return "", errors.New(msg)
	case first == "":
		return "", fmt.Errorf("%s --version printed nothing", b.Name)
	}
	return first, nil
}

// versionLine picks the version out of a CLI's --version output: the first
// short line with a dotted number (some CLIs print warnings first), else
// the first line.
func versionLine(s string) string {
	first := ""
	for l := range strings.Lines(s) {
		l = strings.TrimSpace(l)
		if l == "" {
			continue
		}
		if len(l) <= 100 && versionRE.MatchString(l) {
			return l
		}
		if first == "" {
			first = l
		}
	}
	if len(first) > 200 {
		first = strings.ToValidUTF8(first[:200], "") + "…"
	}
	return first
}

// runnerAccounts are the accounts of the runner home, read without
// creating anything in a home that has none (nil store and list).
func runnerAccounts(home string) (*accounts.Store, []accounts.Account, error) {
	if _, err := os.Stat(filepath.Join(home, "accounts")); errors.Is(err, os.ErrNotExist) {
		return nil, nil, nil
	}
	s, err := accounts.Open(home)
	if err != nil {
		return nil, nil, err
	}
	as, err := s.List()
	return s, as, err
}

// countAccounts counts the runner's ready and limited accounts per agent.
func countAccounts(home string) (map[string]accountCounts, error) {
	counts := map[string]accountCounts{}
	s, as, err := runnerAccounts(home)
	if err != nil {
		return counts, err
	}
	now := time.Now()
	for _, acct := range as {
		n := counts[acct.Agent]
		switch st, _, _ := runner.AccountState(catalog.LoggedIn, acct, s.Dir(acct.ID), now); st {
		case protocol.AccountReady:
			n.Ready++
		case protocol.AccountLimited:
			n.Limited++
		default:
			n.NeedFix++
		}
		counts[acct.Agent] = n
	}
	return counts, nil
}

func printAgentChecks(w io.Writer, kind string, checks []agentCheck) error {
	fprintf(w, "\n")
	tw := newTable(w)
	fprintf(tw, "AGENT\tINSTALLED\tVERSION\tRUNS IN %s\tACCOUNTS\tENDPOINT\tDETAIL\n", kind)
	for _, c := range checks {
		installed, runs := "no", "-"
		if c.Installed {
			installed, runs = "yes", "yes"
			if !c.Runs {
				runs = "NO"
			}
		}
		endpoint := c.Endpoint + " (" + c.EndpointFrom + ")"
		if c.EndpointError != "" {
			endpoint = "INVALID (" + c.EndpointFrom + ")"
		}
		fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", c.Agent, installed, dash(c.Version), runs, c.Accounts, endpoint, c.Detail)
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	missing := false
	var broken []string // distinct reasons agents do not run, in order
	who := map[string][]string{}
	for _, c := range checks {
		switch {
		case !c.Installed:
			missing = true
			fprintf(w, "to install %s: %s\n", c.Agent, c.Fix)
		case !c.Runs:
			if who[c.RunsError] == nil {
				broken = append(broken, c.RunsError)
			}
			who[c.RunsError] = append(who[c.RunsError], c.Agent)
		case c.Accounts.NeedFix > 0:
			fprintf(w, "%s has %d account(s) that need a login or attention: drover runner account list says how to fix each\n", c.Agent, c.Accounts.NeedFix)
		case c.Accounts.Ready+c.Accounts.Limited == 0:
			fprintf(w, "%s has no account yet: drover runner account add --agent %s\n", c.Agent, c.Agent)
		}
	}
	for _, c := range checks {
		if c.EndpointError != "" {
			fprintf(w, "%s: %s; the runner does not start with it\n", c.Agent, c.EndpointError)
		}
	}
	for _, why := range broken {
		fprintf(w, "%s cannot run in the %s sandbox: %s\n", strings.Join(who[why], ", "), kind, why)
	}
	if missing {
		fprintf(w, "agent CLIs were looked for in PATH=%s\n", checks[0].Searched)
	}
	return nil
}

func (n accountCounts) String() string {
	if n.Ready+n.Limited+n.NeedFix == 0 {
		return "none"
	}
	s := fmt.Sprintf("%d ready", n.Ready)
	if n.Limited > 0 {
		s += fmt.Sprintf(", %d limited", n.Limited)
	}
	if n.NeedFix > 0 {
		s += fmt.Sprintf(", %d to fix", n.NeedFix)
	}
	return s
}
