package pipeline

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"drover/internal/e2e/e2ekit"
	"drover/internal/testkit"
	"drover/internal/testkit/fakemodel"
)

// The demo tells the whole story, each step with its command: the fix job's
// live log, the diff, the fetched branch and its log, the question, its
// answer, the resumed job's delivery and its change. With --sandbox none it
// tells the same story unisolated, and says so.
func TestDemo(t *testing.T) {
	t.Parallel()
	for _, sb := range []string{"bwrap", "none"} {
		t.Run(sb, func(t *testing.T) {
			t.Parallel()
			out, err := e2ekit.Demo(t, bin, os.Getenv("PATH"), nil, "--sandbox", sb)
			if err != nil {
				t.Fatalf("drover demo: %v\n%s", err, out)
			}
			steps := []string{
				"$ drover runner approve 'http://127.0.0.1:",
				"approved runner demo (owner admin)",
				"$ drover runner --home ",
				"$ drover run --repo . --wait --agent exec -- sh -c 'sh test.sh;",
				"FAIL: greet.sh says 'Hello, wrold', want 'Hello, world'",
				"PASS: greet.sh says 'Hello, world'",
				"completed (exit 0)",
				"$ drover diff j-",
				"+echo \"Hello, world\"",
				"$ drover fetch j-",
				"created at ",
				"$ git log --stat",
				"drover: result of job j-",
				" greet.sh | 2 +-",
				"$ drover run --repo . --ref drover/j-",
				"$ drover logs -f j-",
				`drover tool ask: asked "Add a CHANGELOG entry for the fix?"`,
				"waits for an answer: drover questions",
				"$ drover questions",
				"  Add a CHANGELOG entry for the fix?\n  1) yes\n  2) no\n",
				"$ drover answer j-",
				"answered and ", // queued, or already running again
				"--- attempt 2 on demo ---",
				"answer: yes",
				"$ drover show j-",
				"State:      completed",
				"Delivered:\n  CHANGELOG: yes",
				"+- greet.sh: world, not wrold",
			}
			inOrder(t, out, append(steps, demoPipelineSteps...))
			checkDemoReplayed(t, out)
			// The delivery event is printed as the follower sees it: after
			// the resumed attempt's log when it follows the attempt live,
			// before it when that attempt ran to its end while the first
			// one's log was still being printed.
			inOrder(t, out, []string{"$ drover answer j-", "delivered: CHANGELOG: yes", "$ drover show j-"})
			if sb == "none" && !strings.Contains(out, "UNISOLATED") {
				t.Errorf("--sandbox none did not say the jobs run unisolated:\n%s", out)
			}
			if sb == "bwrap" && !strings.Contains(out, "bwrap, network none") {
				t.Errorf("the jobs' isolation is not shown:\n%s", out)
			}
		})
	}
}

// Without bubblewrap the demo says the one command that installs it, and
// the --sandbox flag it names exists.
func TestDemoWithoutBubblewrap(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, tool := range []string{"git", "sh"} {
		p, err := exec.LookPath(tool)
		if err != nil {
			t.Skip(tool, "not found")
		}
		if err := os.Symlink(p, filepath.Join(dir, tool)); err != nil {
			t.Fatal(err)
		}
	}
	out, err := e2ekit.Demo(t, bin, dir, nil)
	if err == nil {
		t.Fatalf("the demo ran without bubblewrap:\n%s", out)
	}
	for _, want := range []string{"apt-get install bubblewrap", "--install-deps", "drover demo --sandbox none"} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if out, err := e2ekit.Demo(t, bin, dir, nil, "--sandbox", "nonsense"); err == nil || !strings.Contains(out, "bwrap or none") {
		t.Errorf("--sandbox nonsense: %v\n%s", err, out)
	}
}

// demoPipelineSteps are the demo's pipeline chapter: the review loop took
// 2 rounds and is done, show shows it, and it ran again done.
var demoPipelineSteps = []string{
	"$ drover pipeline run examples/pipelines/review-loop.yaml --repo . --wait",
	"done: pipeline done",
	" review-loop: done\n",
	"review [exec] done, round 2/3,",
	"$ drover pipeline show p-",
	" review-loop: done\n",
	"review [exec] done, round 2/3,",
	"$ drover pipeline run examples/pipelines/review-loop.yaml --repo . --wait",
	"replayed review#2: ",
	" review-loop: done\n",
	"stopping the runner and the hub",
}

// checkDemoReplayed checks that the demo's second run of the pipeline
// replayed each of the exec steps' five runs.
func checkDemoReplayed(t *testing.T, out string) {
	t.Helper()
	rerun := out[strings.LastIndex(out, "$ drover pipeline run "):]
	for _, run := range []string{"build#1", "fix#1", "review#1", "fix#2", "review#2"} {
		if !regexp.MustCompile(`(?m)^  - ` + run + `: done job j-\S+ completed, 1 attempt\(s\), replayed, commit `).MatchString(rerun) {
			t.Errorf("the rerun did not replay %s:\n%s", run, rerun)
		}
	}
}

// inOrder checks that out holds each of steps, in that order.
func inOrder(t *testing.T, out string, steps []string) {
	t.Helper()
	rest := out
	for _, want := range steps {
		i := strings.Index(rest, want)
		if i < 0 {
			t.Fatalf("demo output lacks %q (in order):\n%s", want, out)
		}
		rest = rest[i+len(want):]
	}
}

// With --agent claude and a key, the same story runs with Claude Code (here
// against a scripted model server, reached through ANTHROPIC_BASE_URL as a
// gateway would be): the fix, the question, the answer, the delivery.
func TestDemoWithClaude(t *testing.T) {
	t.Parallel()
	dir := testkit.AgentCLI(t, "claude")
	fake := fakemodel.NewFakeAnthropic(t, []fakemodel.Turn{
		fakemodel.RunCommand("sh test.sh; sed -i s/wrold/world/ greet.sh; sh test.sh"),
		fakemodel.CallTool("mcp__drover__deliver", map[string]any{"summary": "fixed the typo in greet.sh"}),
		fakemodel.Text("Done."),
		fakemodel.CallTool("mcp__drover__ask", map[string]any{"question": "Add a CHANGELOG entry for the fix?", "choices": []string{"yes", "no"}}),
		fakemodel.Text("I asked; waiting for the answer."),
		fakemodel.RunCommand("echo '- greet.sh: world, not wrold' >> CHANGELOG.md"),
		fakemodel.CallTool("mcp__drover__deliver", map[string]any{"summary": "CHANGELOG: yes"}),
		fakemodel.Text("Done."),
	}, fakemodel.RequireKey(e2ekit.RealKey))
	out, err := e2ekit.Demo(t, bin, dir+":"+os.Getenv("PATH"), []string{"ANTHROPIC_API_KEY=" + e2ekit.RealKey, "ANTHROPIC_BASE_URL=" + fake.URL}, "--agent", "claude")
	if err != nil {
		t.Fatalf("drover demo --agent claude: %v\n%s\n%s", err, out, fake.Dump())
	}
	inOrder(t, out, []string{
		"$ printenv ANTHROPIC_API_KEY | drover runner account add --agent claude --api-key-stdin",
		"$ drover run --repo . --wait --agent claude -- 'The test fails",
		"completed",
		"+echo \"Hello, world\"",
		"branch drover/j-",
		"$ drover questions",
		"  Add a CHANGELOG entry for the fix?\n  1) yes\n  2) no\n",
		"answered and ", // queued, or already running again
		"Delivered:\n  CHANGELOG: yes",
		"+- greet.sh: world, not wrold",
	})
	// The pipeline's steps are exec steps whatever the agent.
	inOrder(t, out, demoPipelineSteps)
	checkDemoReplayed(t, out)
	if strings.Contains(out, e2ekit.RealKey) {
		t.Fatal("the API key was printed")
	}
}
