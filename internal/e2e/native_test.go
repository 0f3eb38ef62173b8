package e2e

import (
	"strings"
	"testing"
	"time"

	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/testkit"
	"drover/internal/testkit/fakemodel"
)

// addNativeAccount gives r a native account of provider at baseURL with
// the real key.
func addNativeAccount(t *testing.T, r *testkit.Runner, provider, baseURL string, args ...string) {
	t.Helper()
	args = append([]string{"account", "add", "--agent", "native", "--label", "main", "--provider", provider,
		"--base-url", baseURL, "--api-key-stdin"}, args...)
	if out, err := r.CLI(realKey+"\n", args...); err != nil {
		t.Fatalf("account add: %v\n%s", err, out)
	}
}

// The native agent on each wire protocol, through a real hub and runner
// under bubblewrap: the scripted model reads a file, edits it, runs a test
// command in the sandbox and delivers; the job completes and drover fetch
// has the change. The key stays in the runner: the sandbox, the log and
// the model's view of the command never hold it.
func TestNativeAgentReadsEditsTestsDelivers(t *testing.T) {
	t.Parallel()
	h := testkit.StartHub(t, bin)
	for _, tc := range []struct {
		provider string
		fake     func(testing.TB, []fakemodel.Turn, ...fakemodel.Option) *fakemodel.FakeServer
		form     string
		model    string
		jobModel string // drover run --model
	}{
		{provider: "anthropic", fake: fakemodel.NewFakeAnthropic, jobModel: "claude-job-model"},
		{provider: "openai-compatible", fake: fakemodel.NewFakeChat, form: "/v1", model: "qwen-fake"},
		{provider: "openai", fake: fakemodel.NewFakeResponses, form: "/v1", model: "gpt-fake"},
	} {
		t.Run(tc.provider, func(t *testing.T) {
			r := h.LoginRunner(t, "r-native-"+tc.provider, h.URL)
			fake := tc.fake(t, []fakemodel.Turn{
				fakemodel.CallTool("read_file", map[string]any{"path": "a.txt"}),
				fakemodel.CallTool("edit_file", map[string]any{"path": "a.txt", "old_text": "one", "new_text": "two"}),
				fakemodel.CallTool("run_command", map[string]any{"command": "grep -qx two a.txt && echo TEST-OK; env; cat " +
					r.Home + "/login.json && echo RUNNER-LOGIN-VISIBLE; true"}),
				// A link to the runner's login, planted by a command (which
				// cannot see it) for the file tools (which run in the
				// runner's process) to follow: os.Root refuses it.
				fakemodel.CallTool("run_command", map[string]any{"command": "ln -s " + r.Home + "/login.json planted"}),
				fakemodel.CallTool("read_file", map[string]any{"path": "planted"}),
				fakemodel.CallTool("run_command", map[string]any{"command": "rm planted"}),
				fakemodel.CallTool("deliver", map[string]any{"summary": "a.txt says two; checked with grep"}),
				fakemodel.Text("Done."),
			}, fakemodel.RequireKey(realKey))
			var model []string
			if tc.model != "" {
				model = []string{"--model", tc.model}
			}
			addNativeAccount(t, r, tc.provider, fake.URL+tc.form, model...)
			r.Start()
			src := sourceCheckout(t)
			run := []string{"--repo", src, "--agent", "native"}
			if tc.jobModel != "" {
				run = append(run, "--model", tc.jobModel)
			}
			v := runRepo(t, h, append(run, "--", "Change one to two in a.txt, check it, and deliver.")...)
			c := h.Client()
			v = testkit.WaitJob(t, c, v.ID, 3*time.Minute, func(v protocol.JobView) bool { return v.State.Terminal() || v.State == job.Waiting })
			log := testkit.Log(t, c, v.ID, 0)
			if v.State != job.Completed {
				t.Fatalf("job %s: %s/%s\nlog:\n%s\nmodel:\n%s", v.ID, v.State, v.Reason, log, fake.Dump())
			}
			t.Logf("the job's log:\n%s", log)
			if got := fetched(t, h, src, v.ID, "a.txt"); got["a.txt"] != "two" {
				t.Fatalf("published a.txt = %q", got["a.txt"])
			}
			read, _ := fake.Result(0)
			ran, ok := fake.Result(2)
			if !strings.Contains(read.Output, "one") || !ok || !strings.Contains(ran.Output, "TEST-OK") {
				t.Fatalf("the model saw read %q, command %q\n%s", read.Output, ran.Output, fake.Dump())
			}
			if strings.Contains(ran.Output, realKey) || strings.Contains(log, realKey) || strings.Contains(ran.Output, "RUNNER-LOGIN-VISIBLE") {
				t.Fatalf("the key or the runner's login reached the sandbox or the log:\n%s\n%s", ran.Output, log)
			}
			if planted, ok := fake.Result(4); !ok || strings.Contains(planted.Output, "drv_") ||
				!strings.Contains(planted.Output, "outside the worktree") {
				t.Fatalf("read_file of a planted link to the runner's login: %+v", planted)
			}
			if u := v.Attempts[len(v.Attempts)-1].Usage; u == nil || u.InputTokens == 0 {
				t.Fatalf("the attempt recorded no usage: %+v", u)
			}
			want := tc.model + tc.jobModel
			for _, req := range fake.Requests() {
				if !strings.Contains(string(req.Body), `"model":"`+want+`"`) {
					t.Fatalf("a model request did not ask for %q: %.300s", want, req.Body)
				}
			}
		})
	}
}

// A runner stopped (SIGTERM) while the native agent's command runs
// releases the attempt; the restarted runner resumes the same session in
// the kept worktree from the last recorded turn (the stopped command's
// result is in it), and the job completes.
func TestNativeAgentResumesAfterRunnerStop(t *testing.T) {
	t.Parallel()
	h := testkit.StartHub(t, bin)
	r := h.LoginRunner(t, "r-native", h.URL)
	fake := fakemodel.NewFakeAnthropic(t, []fakemodel.Turn{
		fakemodel.CallTool("run_command", map[string]any{"command": "echo started > started.txt && sleep 120"}),
		fakemodel.CallTool("write_file", map[string]any{"path": "after.txt", "content": "after the stop\n"}),
		fakemodel.CallTool("deliver", map[string]any{"summary": "done after resuming"}),
		fakemodel.Text("Done."),
	}, fakemodel.RequireKey(realKey))
	addNativeAccount(t, r, "anthropic", fake.URL)
	r.Start()
	src := sourceCheckout(t)
	v := runRepo(t, h, "--repo", src, "--agent", "native", "--", "Start, then finish.")
	c := h.Client()
	stopOnceStarted(t, c, r, v.ID)
	r.Start()
	done := testkit.WaitJob(t, c, v.ID, 3*time.Minute, func(v protocol.JobView) bool { return v.State.Terminal() })
	log2 := testkit.Log(t, c, v.ID, 2)
	if done.State != job.Completed {
		t.Fatalf("job %s/%s\n--- attempt 2:\n%s\n--- model:\n%s", done.State, done.Reason, log2, fake.Dump())
	}
	if !strings.Contains(log2, "native resumes session") || !strings.Contains(log2, "after turn 1") {
		t.Fatalf("attempt 2 did not resume the session after turn 1:\n%s", log2)
	}
	if got := fetched(t, h, src, v.ID, "started.txt", "after.txt"); got["started.txt"] != "started" || got["after.txt"] != "after the stop" {
		t.Fatalf("published %v", got)
	}
	if res, ok := fake.Result(0); !ok || res.Output == "" {
		t.Fatalf("the stopped command's result did not reach the model: %+v\n%s", res, fake.Dump())
	}
}

// A 429 with a stated reset mid-job releases the attempt as limited (no
// slot held while the account sits out); once the reset has passed the
// job runs again and continues the same transcript, from the turn the
// limit interrupted.
func TestNativeAgentLimitedWaitsForTheResetAndContinues(t *testing.T) {
	t.Parallel()
	h := testkit.StartHub(t, bin)
	r := h.LoginRunner(t, "r-native-limit", h.URL)
	fake := fakemodel.NewFakeAnthropic(t, []fakemodel.Turn{
		fakemodel.CallTool("write_file", map[string]any{"path": "first.txt", "content": "before the limit\n"}),
		fakemodel.CallTool("write_file", map[string]any{"path": "second.txt", "content": "after the limit\n"}),
		fakemodel.CallTool("deliver", map[string]any{"summary": "done across a limit"}),
		fakemodel.Text("Done."),
	}, fakemodel.RequireKey(realKey), fakemodel.RateLimit(1, time.Now().Add(2*time.Second)))
	addNativeAccount(t, r, "anthropic", fake.URL)
	r.Start()
	src := sourceCheckout(t)
	v := runRepo(t, h, "--repo", src, "--agent", "native", "--", "Write two files across a limit.")
	c := h.Client()
	done := testkit.WaitJob(t, c, v.ID, 3*time.Minute, func(v protocol.JobView) bool { return v.State.Terminal() })
	log1, log2 := testkit.Log(t, c, v.ID, 1), testkit.Log(t, c, v.ID, 2)
	if done.State != job.Completed || len(done.Attempts) != 2 || done.Attempts[0].State != job.AttemptReleased ||
		done.Attempts[0].Reason != job.ReasonLimited {
		t.Fatalf("job %s/%s, attempts %+v\n--- 1:\n%s\n--- 2:\n%s\n--- model:\n%s", done.State, done.Reason, done.Attempts, log1, log2, fake.Dump())
	}
	if !strings.Contains(log2, "native resumes session") || strings.Contains(log1+log2, realKey) {
		t.Fatalf("attempt 2 did not resume the session (or a log holds the key):\n%s", log2)
	}
	if got := fetched(t, h, src, v.ID, "first.txt", "second.txt"); got["first.txt"] != "before the limit" || got["second.txt"] != "after the limit" {
		t.Fatalf("published %v", got)
	}
}
