package agents

import (
	"encoding/json"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"drover/internal/apitypes"
	"drover/internal/client"
	"drover/internal/e2e/e2ekit"
	"drover/internal/job"
	"drover/internal/protocol"
	"drover/internal/testkit"
	"drover/internal/testkit/fakemodel"
)

// checkAgentJob waits for the job, then checks that it completed with a
// commit holding the file, that the command's output reached the model,
// and that the real key stayed outside the sandbox.
func checkAgentJob(t *testing.T, h *testkit.Hub, fake *fakemodel.FakeServer, src, id string) {
	t.Helper()
	c := h.Client()
	v := testkit.WaitJob(t, c, id, 4*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() || v.State == job.Waiting })
	log := testkit.Log(t, c, id, 0)
	if v.State != job.Completed {
		t.Fatalf("job %s: %s/%s\nlog:\n%s\nmodel:\n%s", id, v.State, v.Reason, log, fake.Dump())
	}
	if !strings.Contains(log, "[drover egress] allowed credential") {
		t.Fatalf("the log does not show the egress proxy's evidence:\n%s", log)
	}
	if u := v.Attempts[len(v.Attempts)-1].Usage; u == nil || u.InputTokens == 0 || u.OutputTokens == 0 {
		t.Fatalf("the attempt recorded no usage: %+v", u)
	}
	if got := e2ekit.Fetched(t, h, src, id, "hello.txt"); got["hello.txt"] != "hello from the agent" {
		t.Fatalf("published hello.txt = %q", got["hello.txt"])
	}
	res, ok := fake.Result(1)
	if !ok || !strings.Contains(res.Output, "hello from the agent") {
		t.Fatalf("the command's output did not reach the model: %+v\n%s", res, fake.Dump())
	}
	if strings.Contains(res.Output, e2ekit.RealKey) || strings.Contains(log, e2ekit.RealKey) {
		t.Fatal("the real key reached the sandbox or the log")
	}
	if strings.Contains(res.Output, "drv_") || strings.Contains(res.Output, "RUNNER-LOGIN-VISIBLE") {
		t.Fatalf("a drover token or the runner's login is visible in the sandbox:\n%s", res.Output)
	}
	for _, k := range fake.Keys() {
		if k != e2ekit.RealKey {
			t.Fatalf("the model server saw key %q, want only the real one (swapped in by the egress proxy)", k)
		}
	}
}

func TestRealAgentCLIsRunJobsOffline(t *testing.T) {
	t.Parallel()
	h := testkit.StartHub(t, bin)
	for _, tc := range []struct {
		cli  string
		fake func(testing.TB, []fakemodel.Turn, ...fakemodel.Option) *fakemodel.FakeServer
		args []string // extra runner flags
		// The base URL in a form the vendor's SDKs document, given as the
		// account's --base-url, or else in the runner's environment as env.
		form, env string
	}{
		{cli: "claude", fake: fakemodel.NewFakeAnthropic, form: "/v1/"},
		// A named model gets function tools (the default model's exec tool
		// is TestCodexDefaultModelDeliversThroughExec's). OPENAI_BASE_URL as
		// the OpenAI SDKs document it, with /v1.
		{cli: "codex", fake: fakemodel.NewFakeResponses, args: []string{"--agent-model", "codex=fake-model"}, form: "/v1", env: "OPENAI_BASE_URL"},
		{cli: "opencode", fake: fakemodel.NewFakeChat, args: []string{"--agent-model", "opencode=fake-model"}, form: "/v1"},
		{cli: "gemini", fake: fakemodel.NewFakeGemini, form: "/v1beta/", env: "GOOGLE_GEMINI_BASE_URL"},
	} {
		t.Run(tc.cli, func(t *testing.T) {
			// One CLI at a time: four start-ups at once on a 2-core machine
			// (with the rest of the suite) only make the timing noisier.
			r := e2ekit.AgentRunner(t, h, "r-"+tc.cli, tc.cli)
			fake := tc.fake(t, e2ekit.Script(r.Home), fakemodel.RequireKey(e2ekit.RealKey))
			if tc.env != "" {
				r.Env = append(r.Env, tc.env+"="+fake.URL+tc.form)
				e2ekit.AddAccount(t, r, tc.cli, "main", "")
			} else {
				e2ekit.AddAccount(t, r, tc.cli, "main", fake.URL+tc.form)
			}
			r.Start(tc.args...)
			src := e2ekit.SourceCheckout(t)
			v := e2ekit.RunRepo(t, h, "--repo", src, "--agent", tc.cli, "--", "Write hello.txt, show it, and deliver.")
			checkAgentJob(t, h, fake, src, v.ID)
		})
	}
}

// Claude Code asks through drover's ask tool (never the terminal); the job
// waits without a slot; the requester's answer resumes the same session
// (--resume, same account, the kept worktree), which writes the file and
// delivers.
func TestClaudeAsksThenResumesItsSession(t *testing.T) {
	t.Parallel()
	fake := fakemodel.NewFakeAnthropic(t, []fakemodel.Turn{
		fakemodel.RunCommand("echo draft > draft.txt"),
		fakemodel.CallTool("mcp__drover__ask", map[string]any{"question": "Which greeting?", "choices": []string{"hello", "hi"}}),
		fakemodel.Text("I asked; waiting for the answer."),
		fakemodel.WriteFile("greeting.txt", "hi\n"),
		fakemodel.CallTool("mcp__drover__deliver", map[string]any{"summary": "greeting written"}),
		fakemodel.Text("Done."),
	}, fakemodel.RequireKey(e2ekit.RealKey))
	h := testkit.StartHub(t, bin)
	r := e2ekit.AgentRunner(t, h, "r1", "claude")
	e2ekit.AddAccount(t, r, "claude", "main", fake.URL)
	r.Start()
	src := e2ekit.SourceCheckout(t)
	v := e2ekit.RunRepo(t, h, "--repo", src, "--agent", "claude", "--", "Write a greeting; ask which one first.")
	c := h.Client()
	w := testkit.WaitJob(t, c, v.ID, 3*time.Minute, func(v apitypes.JobView) bool { return v.State == job.Waiting || v.State.Terminal() })
	if w.State != job.Waiting {
		t.Fatalf("job is %s/%s, want waiting\n%s\n%s", w.State, w.Reason, testkit.Log(t, c, v.ID, 0), fake.Dump())
	}
	if out, err := h.CLI("questions"); err != nil || !strings.Contains(out, "Which greeting?") {
		t.Fatalf("drover questions: %v\n%s", err, out)
	}
	if out, err := h.CLI("answer", v.ID, "--choice", "2"); err != nil {
		t.Fatalf("drover answer: %v\n%s", err, out)
	}
	checkDone := testkit.WaitJob(t, c, v.ID, 3*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	log2 := testkit.Log(t, c, v.ID, 2)
	if checkDone.State != job.Completed {
		t.Fatalf("job is %s/%s after the answer\n%s\n%s", checkDone.State, checkDone.Reason, log2, fake.Dump())
	}
	log1 := testkit.Log(t, c, v.ID, 1)
	session := regexpSession.FindStringSubmatch(log1)
	if session == nil || !strings.Contains(log2, "with account main") || !strings.Contains(log2, "session "+session[1]) ||
		!strings.Contains(log2, "resumed (kept from the job's earlier attempt") {
		t.Fatalf("the second attempt did not resume session %v in the kept worktree:\n%s", session, log2)
	}
	// The resumed request carries the first attempt's conversation, and
	// the answer.
	reqs := fake.Requests()
	last := string(reqs[len(reqs)-1].Body)
	if !strings.Contains(last, "Which greeting?") || !strings.Contains(last, "hi") {
		t.Fatalf("the resumed session's request lacks its history:\n%.2000s", last)
	}
	got := e2ekit.Fetched(t, h, src, v.ID, "greeting.txt", "draft.txt")
	if got["greeting.txt"] != "hi" || got["draft.txt"] != "draft" {
		t.Fatalf("published %v", got)
	}
}

// A scripted rate limit makes the account limited; the job goes back to
// the queue and runs on the runner's second account, while the first sits
// out until its reset.
func TestClaudeLimitedAccountSitsOutAndTheJobMoves(t *testing.T) {
	t.Parallel()
	h := testkit.StartHub(t, bin)
	r := e2ekit.AgentRunner(t, h, "r1", "claude")
	reset := time.Now().Add(2 * time.Hour).Truncate(time.Second)
	limited := fakemodel.NewFakeAnthropic(t, e2ekit.Script(r.Home), fakemodel.RequireKey(e2ekit.RealKey), fakemodel.RateLimit(0, reset))
	spare := fakemodel.NewFakeAnthropic(t, e2ekit.Script(r.Home), fakemodel.RequireKey(e2ekit.RealKey))
	e2ekit.AddAccount(t, r, "claude", "first", limited.URL)
	e2ekit.AddAccount(t, r, "claude", "second", spare.URL)
	r.Start()
	src := e2ekit.SourceCheckout(t)
	v := e2ekit.RunRepo(t, h, "--repo", src, "--agent", "claude", "--", "Write hello.txt, show it, and deliver.")
	checkAgentJob(t, h, spare, src, v.ID)
	c := h.Client()
	if log1 := testkit.Log(t, c, v.ID, 1); !strings.Contains(log1, "account first") || !strings.Contains(log1, "is limited until") {
		t.Fatalf("first attempt:\n%s", log1)
	}
	out, err := r.CLI("", "account", "list", "--json")
	var accts []struct {
		Label        string    `json:"label"`
		State        string    `json:"state"`
		LimitedUntil time.Time `json:"limited_until"`
	}
	if err != nil || json.Unmarshal([]byte(out), &accts) != nil || len(accts) != 2 {
		t.Fatalf("account list: %v\n%s", err, out)
	}
	// With an API key Claude Code prints no reset time for a 429: the
	// provider's reset header, as the egress proxy saw it, gives it.
	if a := accts[0]; a.Label != "first" || a.State != "limited" || !a.LimitedUntil.Equal(reset) {
		t.Fatalf("first account %+v, want limited until the provider's reset %s", a, reset)
	}
	if a := accts[1]; a.Label != "second" || a.State != "ready" {
		t.Fatalf("second account %+v, want ready", a)
	}
}

// regexpSession finds the session id in Claude Code's init line.
var regexpSession = regexp.MustCompile(`"subtype":"init".*?"session_id":"([0-9a-f-]+)"`)

// A runner stopped mid-job (SIGTERM) releases the attempt; when it comes
// back, the job's next attempt resumes the same Claude Code session in the
// kept worktree and finishes the job. A session the CLI lost cannot be
// resumed: the attempt then starts a new one instead of failing.
func TestClaudeInterruptedJobResumesItsSession(t *testing.T) {
	t.Parallel()
	for _, lose := range []bool{false, true} {
		t.Run(map[bool]string{false: "session kept", true: "session lost"}[lose], func(t *testing.T) {
			t.Parallel()
			interruptAndResume(t, lose)
		})
	}
}

func interruptAndResume(t *testing.T, loseSession bool) {
	h := testkit.StartHub(t, bin)
	r := e2ekit.AgentRunner(t, h, "r1", "claude")
	fake := fakemodel.NewFakeAnthropic(t, []fakemodel.Turn{
		// The resumed session asks for this turn again (the interrupted
		// call has no result); the second time it returns at once.
		fakemodel.RunCommand("if [ -e started.txt ]; then echo again; else echo started > started.txt && sleep 120; fi"),
		fakemodel.WriteFile("after.txt", "after the interruption\n"),
		fakemodel.CallTool("mcp__drover__deliver", map[string]any{"summary": "done after resuming"}),
		fakemodel.Text("Done."),
	}, fakemodel.RequireKey(e2ekit.RealKey))
	e2ekit.AddAccount(t, r, "claude", "main", fake.URL)
	r.Start()
	src := e2ekit.SourceCheckout(t)
	v := e2ekit.RunRepo(t, h, "--repo", src, "--agent", "claude", "--", "Start, then finish.")
	c := h.Client()
	stopOnceStarted(t, c, r, v.ID)
	if loseSession {
		projects, _ := filepath.Glob(filepath.Join(r.Home, "accounts", "*", "config", "projects"))
		if len(projects) != 1 {
			t.Fatalf("Claude Code's session folder: %v", projects)
		}
		if err := os.RemoveAll(projects[0]); err != nil {
			t.Fatal(err)
		}
	}
	r.Start()
	done := testkit.WaitJob(t, c, v.ID, 3*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	log1, log2 := testkit.Log(t, c, v.ID, 1), testkit.Log(t, c, v.ID, 2)
	if done.State != job.Completed {
		t.Fatalf("job %s/%s\n--- attempt 2:\n%s\n--- model:\n%s", done.State, done.Reason, log2, fake.Dump())
	}
	session := regexpSession.FindStringSubmatch(log1)
	if session == nil || !strings.Contains(log2, "session "+session[1]) || !strings.Contains(log2, "resumed (kept from the job's earlier attempt") {
		t.Fatalf("attempt 2 did not try session %v in the kept worktree:\n%s", session, log2)
	}
	if lost := strings.Contains(log2, "could not resume session"); lost != loseSession {
		t.Fatalf("attempt 2 started a new session: %v, want %v:\n%s", lost, loseSession, log2)
	}
	got := e2ekit.Fetched(t, h, src, v.ID, "started.txt", "after.txt")
	if got["started.txt"] != "started" || got["after.txt"] != "after the interruption" {
		t.Fatalf("published %v", got)
	}
}

// stopOnceStarted stops r (SIGTERM) once job id's command is running (it
// wrote started.txt), and checks that the attempt was released and the job
// requeued.
func stopOnceStarted(t *testing.T, c *client.Client, r *testkit.Runner, id string) {
	t.Helper()
	testkit.WaitJob(t, c, id, 2*time.Minute, func(apitypes.JobView) bool {
		return e2ekit.WroteStarted(r)
	})
	if err := r.Terminate(time.Minute); err != nil {
		t.Fatalf("runner stop: %v", err)
	}
	w := testkit.WaitJob(t, c, id, time.Minute, func(v apitypes.JobView) bool { return v.State == job.Queued || v.State.Terminal() })
	if w.State != job.Queued || w.Attempts[0].State != job.AttemptReleased {
		t.Fatalf("after the stop: %s, attempt %s\n%s", w.State, w.Attempts[0].State, testkit.Log(t, c, id, 1))
	}
}

// A wrong key is the provider's 401, not a model that failed to deliver:
// the job fails auth_failed naming the account, which needs attention and
// gets no further job until its owner resets it with a good key.
func TestWrongKeyFailsAuthFailedAndTheAccountNeedsAttention(t *testing.T) {
	t.Parallel()
	h := testkit.StartHub(t, bin)
	r := e2ekit.AgentRunner(t, h, "r1", "opencode")
	fake := fakemodel.NewFakeChat(t, e2ekit.Script(r.Home), fakemodel.RequireKey(e2ekit.RealKey))
	if out, err := r.CLI("sk-wrong-key-0000\n", "account", "add", "--agent", "opencode", "--label", "bad",
		"--api-key-stdin", "--base-url", fake.URL+"/v1"); err != nil {
		t.Fatalf("account add: %v\n%s", err, out)
	}
	r.Start("--agent-model", "opencode=fake-model")
	src := e2ekit.SourceCheckout(t)
	v := e2ekit.RunRepo(t, h, "--repo", src, "--agent", "opencode", "--", "Write hello.txt, show it, and deliver.")
	c := h.Client()
	w := testkit.WaitJob(t, c, v.ID, 3*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	log := testkit.Log(t, c, v.ID, 0)
	msg := w.Attempts[len(w.Attempts)-1].Message
	if w.State != job.Failed || w.Reason != job.ReasonAuthFailed || !strings.Contains(msg, "account bad") ||
		!strings.Contains(msg, "HTTP 401") || !strings.Contains(msg, fake.URL) {
		t.Fatalf("job %s/%s: %q, want failed/auth_failed naming the account and the URL\n%s\n%s", w.State, w.Reason, msg, log, fake.Dump())
	}
	deadline := time.Now().Add(time.Minute)
	for {
		rs, hs := e2ekit.AccountStates(t, h, r)
		if rs["bad"] == protocol.AccountNeedsAttention && hs["bad"] == protocol.AccountNeedsAttention {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("account states: runner %v, hub %v; want needs attention", rs, hs)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// Skipped: the next job is not offered at all.
	v2 := e2ekit.RunRepo(t, h, "--repo", src, "--agent", "opencode", "--", "Again.")
	if j := testkit.WaitJob(t, c, v2.ID, time.Minute, func(v apitypes.JobView) bool { return v.Waiting != "" || v.State != job.Queued }); j.State != job.Queued || len(j.Attempts) != 0 {
		t.Fatalf("job after the refusal: %s, %d attempts; want it queued and never offered", j.State, len(j.Attempts))
	}
	// Fixed: a good key and a reset; the queued job runs.
	if out, err := r.CLI(e2ekit.RealKey+"\n", "account", "reset", "bad", "--api-key-stdin"); err != nil || !strings.Contains(out, "it is ready") {
		t.Fatalf("account reset: %v\n%s", err, out)
	}
	// (checkAgentJob would object to the wrong key the fake saw first.)
	if w := testkit.WaitJob(t, c, v2.ID, 4*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() }); w.State != job.Completed {
		t.Fatalf("job after the reset: %s/%s\n%s", w.State, w.Reason, testkit.Log(t, c, v2.ID, 0))
	}
	if got := e2ekit.Fetched(t, h, src, v2.ID, "hello.txt"); got["hello.txt"] != "hello from the agent" {
		t.Fatalf("published hello.txt = %q", got["hello.txt"])
	}
}

// A login account that never logged in needs a login, says how, and is
// never offered a job.
func TestLoginAccountWithoutLoginNeedsLogin(t *testing.T) {
	t.Parallel()
	h := testkit.StartHub(t, bin)
	r := e2ekit.AgentRunner(t, h, "r1", "codex")
	if out, err := r.CLI("", "account", "add", "--agent", "codex", "--label", "sub"); err != nil {
		t.Fatalf("account add: %v\n%s", err, out)
	}
	r.Start()
	v, _, err := h.Client().Submit(t.Context(), apitypes.SubmitRequest{Agent: "codex", Args: []string{"Do something."}})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		rs, hs := e2ekit.AccountStates(t, h, r)
		if rs["sub"] == protocol.AccountNeedsLogin && hs["sub"] == protocol.AccountNeedsLogin {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("account states: runner %v, hub %v; want needs login", rs, hs)
		}
		time.Sleep(200 * time.Millisecond)
	}
	if out, err := h.CLI("accounts"); err != nil || !strings.Contains(out, "needs login") || !strings.Contains(out, "drover runner account login ") {
		t.Fatalf("drover accounts: %v\n%s", err, out)
	}
	j := testkit.WaitJob(t, h.Client(), v.ID, time.Minute, func(v apitypes.JobView) bool { return v.Waiting != "" || v.State != job.Queued })
	if j.State != job.Queued || len(j.Attempts) != 0 {
		t.Fatalf("job %s, %d attempts (%s); want it queued and never offered", j.State, len(j.Attempts), j.Waiting)
	}
}

// Codex's default model gets no function tools, only a JavaScript "exec"
// tool whose scripts reach every other tool, MCP tools included, as
// tools.NAME: a job without --agent-model runs there and delivers through
// tools.mcp__drover__deliver.
func TestCodexDefaultModelDeliversThroughExec(t *testing.T) {
	t.Parallel()
	h := testkit.StartHub(t, bin)
	r := e2ekit.AgentRunner(t, h, "r1", "codex")
	fake := fakemodel.NewFakeResponses(t, e2ekit.Script(r.Home), fakemodel.RequireKey(e2ekit.RealKey))
	e2ekit.AddAccount(t, r, "codex", "main", fake.URL)
	r.Start()
	src := e2ekit.SourceCheckout(t)
	v := e2ekit.RunRepo(t, h, "--repo", src, "--agent", "codex", "--", "Write hello.txt, show it, and deliver.")
	checkAgentJob(t, h, fake, src, v.ID)
	// It ran on the default model, whose only way to the tools is exec
	// (the job completes only by deliver, so the deliver went through it).
	for _, req := range fake.Requests() {
		var body struct {
			Model string            `json:"model"`
			Tools []json.RawMessage `json:"tools"`
		}
		if req.Turn < 0 {
			continue
		}
		if err := json.Unmarshal(req.Body, &body); err != nil || len(body.Tools) != 0 || body.Model == "" ||
			!slices.Contains(req.Tools, "exec_command") {
			t.Fatalf("turn %d: model %q, function tools %d, exec's tools %v (%v); want the default model with exec only",
				req.Turn, body.Model, len(body.Tools), req.Tools, err)
		}
	}
}

// On its default model Codex asks through exec as well (tools.mcp__drover__ask);
// the answer resumes its thread, which delivers.
func TestCodexDefaultModelAsksThroughExec(t *testing.T) {
	t.Parallel()
	fake := fakemodel.NewFakeResponses(t, []fakemodel.Turn{
		fakemodel.RunCommand("echo draft > draft.txt"),
		fakemodel.CallTool("mcp__drover__ask", map[string]any{"question": "Which greeting?", "choices": []string{"hello", "hi"}}),
		fakemodel.Text("I asked; waiting for the answer."),
		fakemodel.WriteFile("greeting.txt", "hi\n"),
		fakemodel.CallTool("mcp__drover__deliver", map[string]any{"summary": "greeting written"}),
		fakemodel.Text("Done."),
	}, fakemodel.RequireKey(e2ekit.RealKey))
	h := testkit.StartHub(t, bin)
	r := e2ekit.AgentRunner(t, h, "r1", "codex")
	e2ekit.AddAccount(t, r, "codex", "main", fake.URL)
	r.Start()
	src := e2ekit.SourceCheckout(t)
	v := e2ekit.RunRepo(t, h, "--repo", src, "--agent", "codex", "--", "Write a greeting; ask which one first.")
	c := h.Client()
	w := testkit.WaitJob(t, c, v.ID, 3*time.Minute, func(v apitypes.JobView) bool { return v.State == job.Waiting || v.State.Terminal() })
	if w.State != job.Waiting {
		t.Fatalf("job is %s/%s, want waiting\n%s\n%s", w.State, w.Reason, testkit.Log(t, c, v.ID, 0), fake.Dump())
	}
	if out, err := h.CLI("answer", v.ID, "--choice", "2"); err != nil {
		t.Fatalf("drover answer: %v\n%s", err, out)
	}
	done := testkit.WaitJob(t, c, v.ID, 3*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	if done.State != job.Completed {
		t.Fatalf("job is %s/%s after the answer\n%s\n%s", done.State, done.Reason, testkit.Log(t, c, v.ID, 2), fake.Dump())
	}
	if got := e2ekit.Fetched(t, h, src, v.ID, "greeting.txt", "draft.txt"); got["greeting.txt"] != "hi" || got["draft.txt"] != "draft" {
		t.Fatalf("published %v", got)
	}
}

// An endpoint nothing listens on is endpoint_unreachable, with the URL as
// drover resolved it; the account stays ready (the endpoint, not the key,
// is at fault).
func TestUnreachableEndpointFailsEndpointUnreachable(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	root := "http://" + l.Addr().String()
	l.Close() // nothing listens there now
	h := testkit.StartHub(t, bin)
	r := e2ekit.AgentRunner(t, h, "r1", "claude")
	e2ekit.AddAccount(t, r, "claude", "main", root+"/v1/")
	r.Start()
	v, _, err := h.Client().Submit(t.Context(), apitypes.SubmitRequest{Agent: "claude", Args: []string{"Say hi."}})
	if err != nil {
		t.Fatal(err)
	}
	c := h.Client()
	w := testkit.WaitJob(t, c, v.ID, 3*time.Minute, func(v apitypes.JobView) bool { return v.State.Terminal() })
	msg := w.Attempts[len(w.Attempts)-1].Message
	if w.State != job.Failed || w.Reason != job.ReasonEndpointUnreachable || !strings.Contains(msg, "cannot reach the model API at "+root+":") {
		t.Fatalf("job %s/%s: %q, want failed/endpoint_unreachable naming %s\n%s", w.State, w.Reason, msg, root, testkit.Log(t, c, v.ID, 0))
	}
	if rs, _ := e2ekit.AccountStates(t, h, r); rs["main"] != protocol.AccountReady {
		t.Fatalf("account states %v; want main still ready", rs)
	}
}
