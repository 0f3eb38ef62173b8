package native

import (
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/e2e/e2ekit"
	"drover/internal/job"
	"drover/internal/testkit"
	"drover/internal/testkit/fakemodel"
)

// hubAndRunner starts a hub and logs a runner called name in to it.
func hubAndRunner(t *testing.T, name string) (*testkit.Hub, *testkit.Runner) {
	t.Helper()
	h := testkit.StartHub(t, bin)
	return h, h.LoginRunner(t, name, h.URL)
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
			}, fakemodel.RequireKey(e2ekit.RealKey))
			var model []string
			if tc.model != "" {
				model = []string{"--model", tc.model}
			}
			e2ekit.AddNativeAccount(t, r, tc.provider, fake.URL+tc.form, model...)
			r.Start()
			src := e2ekit.SourceCheckout(t)
			run := []string{"--repo", src, "--agent", "native"}
			if tc.jobModel != "" {
				run = append(run, "--model", tc.jobModel)
			}
			v := e2ekit.RunRepo(t, h, append(run, "--", "Change one to two in a.txt, check it, and deliver.")...)
			c := h.Client()
			v = testkit.WaitJob(t, c, v.ID, 3*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() || v.State == job.Waiting })
			log := testkit.Log(t, c, v.ID, 0)
			if v.State != job.Completed {
				t.Fatalf("job %s: %s/%s\nlog:\n%s\nmodel:\n%s", v.ID, v.State, v.Reason, log, fake.Dump())
			}
			t.Logf("the job's log:\n%s", log)
			if got := e2ekit.Fetched(t, h, src, v.ID, "a.txt"); got["a.txt"] != "two" {
				t.Fatalf("published a.txt = %q", got["a.txt"])
			}
			read, _ := fake.Result(0)
			ran, ok := fake.Result(2)
			if !strings.Contains(read.Output, "one") || !ok || !strings.Contains(ran.Output, "TEST-OK") {
				t.Fatalf("the model saw read %q, command %q\n%s", read.Output, ran.Output, fake.Dump())
			}
			if strings.Contains(ran.Output, e2ekit.RealKey) || strings.Contains(log, e2ekit.RealKey) || strings.Contains(ran.Output, "RUNNER-LOGIN-VISIBLE") {
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
// the kept worktree (the stopped command's file is still there) from the
// last recorded turn, and the job completes.
func TestNativeAgentResumesAfterRunnerStop(t *testing.T) {
	t.Parallel()
	h := testkit.StartHub(t, bin)
	r := h.LoginRunner(t, "r-native", h.URL)
	j := startInterruptedAtTurn3(t, h, r)
	if err := r.Terminate(time.Minute); err != nil {
		t.Fatalf("runner stop: %v", err)
	}
	r.Start()
	j.resumesOn(t, "r-native", "exit code")
	if got := e2ekit.Fetched(t, h, j.src, j.id, "started.txt"); got["started.txt"] != "started" {
		t.Fatalf("published %v; want the kept worktree's started.txt", got)
	}
}

// A 429 with a stated reset mid-job releases the attempt as limited (no
// slot held while the account sits out); once the reset has passed the
// job runs again and continues the same transcript, from the turn the
// limit interrupted.
func TestNativeAgentLimitedWaitsForTheResetAndContinues(t *testing.T) {
	t.Parallel()
	h, r := hubAndRunner(t, "r-native-limit")
	fake := fakemodel.NewFakeAnthropic(t, []fakemodel.Turn{
		fakemodel.CallTool("write_file", map[string]any{"path": "first.txt", "content": "before the limit\n"}),
		fakemodel.CallTool("write_file", map[string]any{"path": "second.txt", "content": "after the limit\n"}),
		fakemodel.CallTool("deliver", map[string]any{"summary": "done across a limit"}),
		fakemodel.Text("Done."),
	}, fakemodel.RequireKey(e2ekit.RealKey), fakemodel.RateLimit(1, time.Now().Add(2*time.Second)))
	e2ekit.AddNativeAccount(t, r, "anthropic", fake.URL)
	r.Start()
	src := e2ekit.SourceCheckout(t)
	v := e2ekit.RunRepo(t, h, "--repo", src, "--agent", "native", "--", "Write two files across a limit.")
	c := h.Client()
	done := testkit.WaitJob(t, c, v.ID, 3*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	log1, log2 := testkit.Log(t, c, v.ID, 1), testkit.Log(t, c, v.ID, 2)
	if done.State != job.Completed || len(done.Attempts) != 2 || done.Attempts[0].State != job.AttemptReleased ||
		done.Attempts[0].Reason != job.ReasonLimited {
		t.Fatalf("job %s/%s, attempts %+v\n--- 1:\n%s\n--- 2:\n%s\n--- model:\n%s", done.State, done.Reason, done.Attempts, log1, log2, fake.Dump())
	}
	if !strings.Contains(log2, "native resumes session") || strings.Contains(log1+log2, e2ekit.RealKey) {
		t.Fatalf("attempt 2 did not resume the session (or a log holds the key):\n%s", log2)
	}
	if got := e2ekit.Fetched(t, h, src, v.ID, "first.txt", "second.txt"); got["first.txt"] != "before the limit" || got["second.txt"] != "after the limit" {
		t.Fatalf("published %v", got)
	}
}

// interruptedAtTurn3 is a native job whose third model turn runs a
// command that outlives the runner; the next runner continues the same
// transcript at turn 4 from the hub.
type interruptedAtTurn3 struct {
	h    *testkit.Hub
	fake *fakemodel.FakeServer
	src  string
	id   string
}

// startInterruptedAtTurn3 submits the job and waits for its third turn's
// command to run on r.
func startInterruptedAtTurn3(t *testing.T, h *testkit.Hub, r *testkit.Runner) *interruptedAtTurn3 {
	t.Helper()
	fake := fakemodel.NewFakeAnthropic(t, []fakemodel.Turn{
		fakemodel.CallTool("list_files", map[string]any{"path": "."}),
		fakemodel.CallTool("read_file", map[string]any{"path": "a.txt"}),
		fakemodel.CallTool("run_command", map[string]any{"command": "echo started > started.txt && sleep 120"}),
		fakemodel.CallTool("write_file", map[string]any{"path": "four.txt", "content": "turn four\n"}),
		fakemodel.CallTool("deliver", map[string]any{"summary": "done on another runner"}),
		fakemodel.Text("Done."),
	}, fakemodel.RequireKey(e2ekit.RealKey))
	e2ekit.AddNativeAccount(t, r, "anthropic", fake.URL)
	r.Start()
	src := e2ekit.SourceCheckout(t)
	v := e2ekit.RunRepo(t, h, "--repo", src, "--agent", "native", "--", "Look around, then write four.txt.")
	testkit.WaitJob(t, h.Client(), v.ID, 2*time.Minute, func(apitypes.JobView) bool {
		return e2ekit.WroteStarted(r)
	})
	return &interruptedAtTurn3{h: h, fake: fake, src: src, id: v.ID}
}

// resumesOn checks that the job completed on runner name, its last
// attempt continuing the transcript at turn 4 with turn 3's call answered
// (want is in that answer); the history holds the turns, never the key.
func (j *interruptedAtTurn3) resumesOn(t *testing.T, name, want string) {
	t.Helper()
	c := j.h.Client()
	done := testkit.WaitJob(t, c, j.id, 3*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	last := done.Attempts[len(done.Attempts)-1]
	log := testkit.Log(t, c, j.id, last.Number)
	if done.State != job.Completed || last.Runner != name {
		t.Fatalf("job %s/%s, last attempt on %s\n%s\n--- model:\n%s", done.State, done.Reason, last.Runner, log, j.fake.Dump())
	}
	if !strings.Contains(log, "after turn 3") {
		t.Fatalf("the last attempt did not resume after turn 3:\n%s", log)
	}
	if res, ok := j.fake.Result(2); !ok || !strings.Contains(res.Output, want) {
		t.Fatalf("turn 3's call was answered %+v; want %q\n%s", res, want, j.fake.Dump())
	}
	n := 0
	for _, req := range j.fake.Requests() {
		if req.Turn == 3 {
			n++
			// Turn 4 is asked with the whole transcript: turn 1's call too.
			if !strings.Contains(string(req.Body), "list_files") {
				t.Fatalf("turn 4 was asked without the earlier turns: %.500s", req.Body)
			}
		}
	}
	if n != 1 {
		t.Fatalf("turn 4 was asked %d times\n%s", n, j.fake.Dump())
	}
	if got := e2ekit.Fetched(t, j.h, j.src, j.id, "four.txt"); got["four.txt"] != "turn four" {
		t.Fatalf("published %v", got)
	}
	out, err := j.h.CLI("show", j.id)
	if err != nil || !strings.Contains(out, "Transcript:") || !strings.Contains(out, "turn 3 assistant: run_command") {
		t.Fatalf("drover show has no transcript: %v\n%s", err, out)
	}
	if out, _ = j.h.CLI("show", "--json", j.id); strings.Contains(out+log, e2ekit.RealKey) {
		t.Fatal("the key reached the job's events or log")
	}
}

// A runner stopped (SIGTERM) in the third turn's command releases the
// attempt with the command's result recorded in the hub; another runner,
// which never saw the job, continues the transcript at turn 4.
func TestNativeAgentResumesOnAnotherRunnerAfterStop(t *testing.T) {
	t.Parallel()
	h := testkit.StartHub(t, bin)
	r1 := h.LoginRunner(t, "r-native-1", h.URL)
	j := startInterruptedAtTurn3(t, h, r1)
	if err := r1.Terminate(time.Minute); err != nil {
		t.Fatalf("runner stop: %v", err)
	}
	r2 := h.LoginRunner(t, "r-native-2", h.URL)
	e2ekit.AddNativeAccount(t, r2, "anthropic", j.fake.URL)
	r2.Start()
	j.resumesOn(t, "r-native-2", "exit code")
}

// A runner killed (SIGKILL) in the third turn's command leaves the job
// unknown; the owner's retry continues the transcript at turn 4 on another
// runner, the call that never got a result answered as interrupted.
func TestNativeAgentRetryAfterUnknownResumes(t *testing.T) {
	t.Parallel()
	h := testkit.StartHub(t, bin, "--lease", "2s", "--heartbeat", "200ms")
	r1 := h.LoginRunner(t, "r-native-k1", h.URL)
	j := startInterruptedAtTurn3(t, h, r1)
	r1.Kill()
	testkit.WaitJob(t, h.Client(), j.id, time.Minute, func(v apitypes.JobView) bool { return v.State == job.Unknown })
	r2 := h.LoginRunner(t, "r-native-k2", h.URL)
	e2ekit.AddNativeAccount(t, r2, "anthropic", j.fake.URL)
	r2.Start()
	if out, err := h.CLI("retry", j.id); err != nil || !strings.Contains(out, "queued") {
		t.Fatalf("retry: %v\n%s", err, out)
	}
	j.resumesOn(t, "r-native-k2", "interrupted")
}

// A 429 on the job's account moves the job, in the same attempt, to its
// --fallback account on another provider, which continues the transcript
// and delivers; the limited account sits out until the reset it stated.
func TestNativeAgentFallsBackAndTheLimitedAccountSitsOut(t *testing.T) {
	t.Parallel()
	h, r := hubAndRunner(t, "r-native-fallback")
	primary := fakemodel.NewFakeAnthropic(t, []fakemodel.Turn{
		fakemodel.CallTool("write_file", map[string]any{"path": "first.txt", "content": "on the main account\n"}),
		fakemodel.Text("never reached"),
	}, fakemodel.RequireKey(e2ekit.RealKey), fakemodel.RateLimit(1, time.Now().Add(time.Hour)))
	backup := fakemodel.NewFakeChat(t, []fakemodel.Turn{
		fakemodel.CallTool("write_file", map[string]any{"path": "second.txt", "content": "on the fallback\n"}),
		fakemodel.CallTool("deliver", map[string]any{"summary": "done on the fallback"}),
		fakemodel.Text("Done."),
	})
	e2ekit.AddNativeAccount(t, r, "anthropic", primary.URL)
	if out, err := r.CLI("", "account", "add", "--agent", "native", "--label", "backup", "--provider", "openai-compatible",
		"--base-url", backup.URL+"/v1", "--model", "qwen-fake", "--no-key", "--no-probe"); err != nil {
		t.Fatalf("account add: %v\n%s", err, out)
	}
	r.Start()
	src := e2ekit.SourceCheckout(t)
	v := e2ekit.RunRepo(t, h, "--repo", src, "--agent", "native", "--account", "main", "--fallback", "backup", "--", "Write two files.")
	c := h.Client()
	done := testkit.WaitJob(t, c, v.ID, 3*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	log := testkit.Log(t, c, v.ID, 1)
	if done.State != job.Completed || len(done.Attempts) != 1 || !strings.Contains(log, "on the fallback account") {
		t.Fatalf("job %s/%s, %d attempts\n%s\n--- backup:\n%s", done.State, done.Reason, len(done.Attempts), log, backup.Dump())
	}
	if got := e2ekit.Fetched(t, h, src, v.ID, "first.txt", "second.txt"); got["first.txt"] != "on the main account" || got["second.txt"] != "on the fallback" {
		t.Fatalf("published %v", got)
	}
	if strings.Contains(log, e2ekit.RealKey) {
		t.Fatal("the key reached the log")
	}
	if runner, _ := e2ekit.AccountStates(t, h, r); runner["main"] != "limited" || runner["backup"] != "ready" {
		t.Fatalf("account states %v; want main limited, backup ready", runner)
	}
}

// A model without tool calling, through a real hub and runner under
// bubblewrap: the doctor probes the account as such (its two probe
// requests get the script's first two answers) and records it; the job
// then reads, edits and delivers through the text protocol's fenced
// blocks, and drover fetch has the change.
func TestNativeAgentTextProtocolAfterDoctor(t *testing.T) {
	t.Parallel()
	h, r := hubAndRunner(t, "r-native-text")
	block := func(name, args string) fakemodel.Turn {
		return fakemodel.Text("Next step.\n```drover-tool " + name + "\n" + args + "\n```")
	}
	fake := fakemodel.NewFakeChat(t, []fakemodel.Turn{
		fakemodel.Text("I have no tools."), fakemodel.Text("Still no tools."), // the doctor's probe
		block("read_file", `{"path":"a.txt"}`),
		block("edit_file", `{"path":"a.txt","old_text":"one","new_text":"two"}`),
		block("deliver", `{"summary":"a.txt says two"}`),
	}, fakemodel.RequireKey(e2ekit.RealKey), fakemodel.TextOnly(), fakemodel.ServedContext(32768))
	e2ekit.AddNativeAccount(t, r, "openai-compatible", fake.URL+"/v1", "--model", "plain-fake")
	out, _ := r.CLI("", "doctor")
	if !strings.Contains(out, "text protocol") || !strings.Contains(out, "32768") || strings.Contains(out, e2ekit.RealKey) {
		t.Fatalf("doctor printed:\n%s", out)
	}
	r.Start()
	src := e2ekit.SourceCheckout(t)
	v := e2ekit.RunRepo(t, h, "--repo", src, "--agent", "native", "--", "Change one to two in a.txt and deliver.")
	c := h.Client()
	v = testkit.WaitJob(t, c, v.ID, 3*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() || v.State == job.Waiting })
	if v.State != job.Completed {
		t.Fatalf("job %s: %s/%s\nlog:\n%s\nmodel:\n%s", v.ID, v.State, v.Reason, testkit.Log(t, c, v.ID, 0), fake.Dump())
	}
	if got := e2ekit.Fetched(t, h, src, v.ID, "a.txt"); got["a.txt"] != "two" {
		t.Fatalf("published a.txt = %q", got["a.txt"])
	}
	for _, req := range fake.Requests()[2:] {
		if len(req.Tools) != 0 {
			t.Fatalf("the job offered native tools to a model without tool calling:\n%s", fake.Dump())
		}
	}
}
