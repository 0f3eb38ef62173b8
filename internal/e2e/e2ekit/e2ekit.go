// Package e2ekit holds the helpers that the end-to-end test packages
// (internal/e2e and its subpackages) share: submitting and checking jobs,
// git checkouts, the CLI's JSON, agent accounts and fake model scripts. The
// e2e tests are split into packages by theme so that they run in parallel;
// what more than one of them needs lives here, once.
package e2ekit

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/client"
	"drover/internal/gitcmd"
	"drover/internal/job"
	"drover/internal/testkit"
	"drover/internal/testkit/fakemodel"
)

// RealKey is the API key only the runner's config and the fake model
// server know: the sandboxed CLI must never see it.
const RealKey = "sk-test-real-key-0123456789abcdef"

// AgentRunner logs in a runner whose PATH holds the pinned vendor CLIs.
func AgentRunner(t *testing.T, h *testkit.Hub, name, cli string) *testkit.Runner {
	t.Helper()
	dir := testkit.AgentCLI(t, cli)
	r := h.LoginRunner(t, name, h.URL)
	r.Env = []string{"PATH=" + dir + ":" + os.Getenv("PATH")}
	return r
}

// AddAccount gives r an API-key account of cli at baseURL ("": the
// runner's environment decides).
func AddAccount(t *testing.T, r *testkit.Runner, cli, label, baseURL string) {
	t.Helper()
	args := []string{"account", "add", "--agent", cli, "--label", label, "--api-key-stdin"}
	if baseURL != "" {
		args = append(args, "--base-url", baseURL)
	}
	if out, err := r.CLI(RealKey+"\n", args...); err != nil {
		t.Fatalf("account add: %v\n%s", err, out)
	}
}

// Script is what the fake model does in every CLI's test: write a file,
// run a command that shows it, the sandbox's environment and whether the
// runner's login (under home) is visible, deliver through drover's tool,
// and end.
func Script(home string) []fakemodel.Turn {
	return []fakemodel.Turn{
		fakemodel.WriteFile("hello.txt", "hello from the agent\n"),
		fakemodel.RunCommand("cat hello.txt && env && ls -a; cat " + home + "/login.json && echo RUNNER-LOGIN-VISIBLE; true"),
		fakemodel.CallTool("mcp__drover__deliver", map[string]any{"summary": "wrote hello.txt"}),
		fakemodel.Text("Done."),
	}
}

// Demo runs `drover demo` with args in a fresh home, PATH and env, and
// returns its output.
func Demo(t *testing.T, bin, path string, env []string, args ...string) (string, error) {
	t.Helper()
	// Hang guards, not time targets: the whole story took over the demo's
	// own 3 minutes on a busy 2-core machine ('stopped waiting').
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, append([]string{"demo", "--timeout", "14m"}, args...)...)
	cmd.Env = append([]string{"HOME=" + t.TempDir(), "PATH=" + path, "LANG=C.UTF-8"}, env...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// from e2e_test.go
func Submit(t *testing.T, c *client.Client, args ...string) apitypes.JobView {
	t.Helper()
	return testkit.Submit(t, c, apitypes.SubmitRequest{Agent: "exec", Args: args})
}

// from e2e_test.go
func SubmitReq(t *testing.T, c *client.Client, req apitypes.SubmitRequest) apitypes.JobView {
	t.Helper()
	return testkit.Submit(t, c, req)
}

// from e2e_test.go
// ClaimsOf counts, per job, the attempts the runners' own journals say they
// claimed.
func ClaimsOf(rs ...*testkit.Runner) map[string]int {
	n := map[string]int{}
	for _, r := range rs {
		for _, c := range r.Claims() {
			n[c.Job]++
		}
	}
	return n
}

// Deliver is the fake model's turn that calls drover's deliver tool.
func Deliver(summary string) fakemodel.Turn {
	return fakemodel.CallTool("deliver", map[string]any{"summary": summary})
}

// connectedRE finds the hub of each "connected to hub" line of a runner's log.
var connectedRE = regexp.MustCompile(`msg="connected to hub" [^\n]*?hub=(\S+)`)

// Connections lists the hubs the runner connected to, in order.
func Connections(r *testkit.Runner) []string {
	var out []string
	for _, m := range connectedRE.FindAllStringSubmatch(r.Output(), -1) {
		out = append(out, m[1])
	}
	return out
}

// ResultChanges fetches job id's result into a clone of src with `drover
// fetch` on h and lists its changes from base (git diff --name-status).
func ResultChanges(t *testing.T, h *testkit.Hub, src, base, id string) string {
	t.Helper()
	clone := filepath.Join(t.TempDir(), "clone")
	Git(t, src, "clone", "--quiet", src, clone)
	if out, err := h.CLI("fetch", id, "--repo", clone); err != nil {
		t.Fatalf("drover fetch: %v\n%s", err, out)
	}
	return Git(t, clone, "diff", "--name-status", base, "drover/"+id)
}

// AddNativeAccount gives r a native account of provider at baseURL with
// the real key.
func AddNativeAccount(t *testing.T, r *testkit.Runner, provider, baseURL string, args ...string) {
	t.Helper()
	args = append([]string{"account", "add", "--agent", "native", "--label", "main", "--provider", provider,
		"--base-url", baseURL, "--api-key-stdin", "--no-probe"}, args...)
	if out, err := r.CLI(RealKey+"\n", args...); err != nil {
		t.Fatalf("account add: %v\n%s", err, out)
	}
}

// Checkout makes a one-commit repository in a directory named name (the
// project's name).
func Checkout(t *testing.T, name string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), name)
	Git(t, t.TempDir(), "init", "--quiet", dir)
	if err := os.WriteFile(filepath.Join(dir, "go.sum"), []byte("left-pad 1.0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	Git(t, dir, "add", "-A")
	Git(t, dir, "commit", "--quiet", "-m", "base")
	return dir
}

// Stopped is a pipeline wait's condition that the pipeline no longer runs.
func Stopped(v apitypes.PipelineView) bool { return v.State != "running" }

// Git runs git (sanitized, as drover does) in dir.
func Git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := gitcmd.Git{}.Out(context.Background(), dir, args...)
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return out
}

// SourceCheckout makes a small repository: a file to edit, a script whose
// mode the job changes, an ignore rule, one commit.
func SourceCheckout(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "demo")
	Git(t, t.TempDir(), "init", "--quiet", dir)
	for name, content := range map[string]string{
		"a.txt": "one\n", "script.sh": "echo hi\n", ".gitignore": "*.log\n", "lib/keep.txt": "keep\n",
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	Git(t, dir, "add", "-A")
	Git(t, dir, "commit", "--quiet", "-m", "base")
	return dir
}

// RunRepo submits `drover run --repo` through the real CLI.
func RunRepo(t *testing.T, h *testkit.Hub, args ...string) apitypes.JobView {
	t.Helper()
	return RunWith(t, h.CLI, args...)
}

// RunWith submits `drover run --json` with a user's CLI and returns the job.
func RunWith(t *testing.T, cli func(...string) (string, error), args ...string) apitypes.JobView {
	t.Helper()
	out, err := cli(append([]string{"run", "--json"}, args...)...)
	if err != nil {
		t.Fatalf("drover run: %v\n%s", err, out)
	}
	var v apitypes.JobView
	if i := strings.Index(out, "{"); i < 0 || json.Unmarshal([]byte(out[i:]), &v) != nil {
		t.Fatalf("drover run printed:\n%s", out)
	}
	return v
}

// Must runs a CLI command that has to succeed and returns its output.
func Must(t *testing.T, cli func(...string) (string, error), args ...string) string {
	t.Helper()
	out, err := cli(args...)
	if err != nil {
		t.Fatalf("drover %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// Refused runs a CLI command that has to fail and returns its output.
func Refused(t *testing.T, cli func(...string) (string, error), args ...string) string {
	t.Helper()
	out, err := cli(args...)
	if err == nil {
		t.Fatalf("drover %s succeeded, want a refusal:\n%s", strings.Join(args, " "), out)
	}
	t.Logf("drover %s: refused: %s", strings.Join(args, " "), strings.TrimSpace(out))
	return out
}

// CLIJSON runs a CLI command with --json and decodes its answer.
func CLIJSON[T any](t *testing.T, cli func(...string) (string, error), args ...string) T {
	t.Helper()
	out := Must(t, cli, append(args, "--json")...)
	var v T
	if err := json.Unmarshal([]byte(out), &v); err != nil {
		t.Fatalf("drover %s --json: %v\n%s", strings.Join(args, " "), err, out)
	}
	return v
}

// Waiting is a WaitJob condition: queued, never offered, with a reason
// that contains want.
func Waiting(want string) func(apitypes.JobView) bool {
	return func(v apitypes.JobView) bool {
		return v.State == job.Queued && len(v.Attempts) == 0 && strings.Contains(v.Waiting, want)
	}
}

// Fetched fetches a job's result into a clone of src and returns the
// content of each file of the result (a missing one is "").
func Fetched(t *testing.T, h *testkit.Hub, src, jobID string, files ...string) map[string]string {
	t.Helper()
	clone := filepath.Join(t.TempDir(), "clone")
	Git(t, src, "clone", "--quiet", src, clone)
	if out, err := h.CLI("fetch", jobID, "--repo", clone); err != nil {
		t.Fatalf("drover fetch: %v\n%s", err, out)
	}
	got := map[string]string{}
	for _, f := range files {
		if out, err := exec.Command("git", "-C", clone, "show", "drover/"+jobID+":"+f).Output(); err == nil {
			got[f] = strings.TrimSpace(string(out))
		}
	}
	return got
}

// WroteStarted: the job's command on r has written started.txt in its
// worktree. The shell creates the file empty before echo writes it, so a
// stop between the two (seen under load) would publish it empty: the file
// counts once it has its content (one write).
func WroteStarted(r *testkit.Runner) bool {
	m, _ := filepath.Glob(filepath.Join(r.Home, "trees", "*", "*", "started.txt"))
	for _, f := range m {
		if b, err := os.ReadFile(f); err == nil && len(b) > 0 {
			return true
		}
	}
	return false
}

// AccountStates are the states of r's accounts by label, as the runner
// lists them and as the hub's 'drover accounts' does.
func AccountStates(t *testing.T, h *testkit.Hub, r *testkit.Runner) (runner, hub map[string]string) {
	t.Helper()
	var list []struct{ Label, State, Fix string }
	out, err := r.CLI("", "account", "list", "--json")
	if err != nil || json.Unmarshal([]byte(out), &list) != nil {
		t.Fatalf("account list: %v\n%s", err, out)
	}
	runner, hub = map[string]string{}, map[string]string{}
	for _, a := range list {
		runner[a.Label] = a.State
	}
	var views apitypes.AccountList
	out, err = h.CLI("accounts", "--json")
	if err != nil || json.Unmarshal([]byte(out), &views) != nil {
		t.Fatalf("drover accounts: %v\n%s", err, out)
	}
	for _, v := range views.Accounts {
		hub[v.Label] = v.State
	}
	return runner, hub
}
