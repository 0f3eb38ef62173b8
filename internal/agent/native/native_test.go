package native

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"drover/internal/agent"
	"drover/internal/job"
	"drover/internal/model"
	"drover/internal/sandbox"
	"drover/internal/tools"
)

// script is a Provider that answers from a list, recording each request.
type script struct {
	mu    sync.Mutex
	resps []model.Response
	reqs  []model.Request
}

func (s *script) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.reqs = append(s.reqs, req)
	if n := len(req.Messages); n > 0 && strings.Contains(req.Messages[n-1].Text, compactInstruction) {
		return model.Response{Text: "SUMMARY: read f1-f3", Stop: model.StopEnd, Usage: model.Usage{InputTokens: 900, OutputTokens: 20}}, nil
	}
	if len(s.resps) == 0 {
		return model.Response{Text: "done", Stop: model.StopEnd}, nil
	}
	r := s.resps[0]
	s.resps = s.resps[1:]
	return r, nil
}

func call(id, name, args string) model.Response {
	return model.Response{Calls: []model.Call{{ID: id, Name: name, Args: args}}, Stop: model.StopTools,
		Usage: model.Usage{InputTokens: 100, OutputTokens: 10}}
}

// fakeTools stands in for drover's tools: deliver ends the turn.
type fakeTools struct {
	mu     sync.Mutex
	status tools.Status
	calls  []string
}

func (f *fakeTools) Call(_ context.Context, name string, args json.RawMessage) (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, name+" "+string(args))
	if name == tools.ToolDeliver {
		f.status = tools.Delivered
	}
	return "ok", nil
}

func (f *fakeTools) Status() tools.Status {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.status == "" {
		return tools.Working
	}
	return f.status
}

// newLoop is a loop on a fresh worktree (returned) with resps scripted.
func newLoop(t testing.TB, lim Limits, resps ...model.Response) (*loop, *script, string) {
	t.Helper()
	dir := t.TempDir()
	root, err := os.OpenRoot(dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { root.Close() })
	box, err := sandbox.New(context.Background(), sandbox.Policy{Kind: sandbox.KindNone, Root: dir, Logger: slog.New(slog.DiscardHandler)})
	if err != nil {
		t.Fatal(err)
	}
	sc := &script{resps: resps}
	tb := &toolbox{files: files{root: root, dir: dir}, cmds: commands{box: box, dir: dir, env: []string{"PATH=/usr/bin:/bin"}},
		drover: &fakeTools{}}
	return &loop{model: sc, tools: tb, limits: lim, save: func(context.Context, *Transcript) error { return nil }}, sc, dir
}

func newTranscript() *Transcript {
	return &Transcript{System: "sys", Messages: []model.Message{{Role: model.User, Text: "do it"}}}
}

// lastResults are the tool results of the transcript's last message.
func lastResults(tr *Transcript) []model.Result { return tr.Messages[len(tr.Messages)-1].Results }

// TestScriptedTask: the file tools and a command work on the worktree, and
// deliver ends the loop.
func TestScriptedTask(t *testing.T) {
	l, sc, dir := newLoop(t, Limits{})
	sc.resps = []model.Response{
		call("1", toolWrite, `{"path":"src/a.txt","content":"hello world\n"}`),
		call("2", toolEdit, `{"path":"src/a.txt","old_text":"world","new_text":"drover"}`),
		call("3", toolRead, `{"path":"src/a.txt"}`),
		call("4", toolList, `{"path":"src"}`),
		call("5", toolSearch, `{"pattern":"dro+ver","path":"`+dir+`/src"}`),
		call("6", toolRun, `{"command":"cat src/a.txt; exit 3"}`),
		call("7", tools.ToolDeliver, `{"summary":"done"}`),
	}
	tr := newTranscript()
	out := l.run(context.Background(), tr)
	if out.End != EndDelivered {
		t.Fatalf("ended %s (%s); want delivered", out.End, out.Reason)
	}
	got, _ := os.ReadFile(filepath.Join(dir, "src/a.txt"))
	if string(got) != "hello drover\n" {
		t.Fatalf("file holds %q", got)
	}
	want := map[string]string{"3": "hello drover", "4": "a.txt", "5": "a.txt:1:hello drover", "6": "[exit code 3]"}
	for _, m := range tr.Messages {
		for _, r := range m.Results {
			if w, ok := want[r.CallID]; ok && (!strings.Contains(r.Output, w) || r.IsError) {
				t.Errorf("call %s: %q; want it to hold %q", r.CallID, r.Output, w)
			}
		}
	}
	if tr.Turns != 7 || tr.Usage.InputTokens != 700 {
		t.Errorf("turns %d usage %+v", tr.Turns, tr.Usage)
	}
}

// TestMalformedEndsAttempt: three malformed calls in a row (bad JSON, an
// unknown tool, a wrong argument) end the attempt; each got a tool error.
func TestMalformedEndsAttempt(t *testing.T) {
	l, _, _ := newLoop(t, Limits{},
		call("1", toolRead, `{"path":`),
		call("2", "rm_rf", `{}`),
		call("3", toolWrite, `{"path":"x","content":"`+strings.Repeat("x", maxArgs)+`"}`),
		call("4", toolList, `{}`),
	)
	tr := newTranscript()
	out := l.run(context.Background(), tr)
	if out.End != EndMalformed || !strings.Contains(out.Reason, "3 malformed") {
		t.Fatalf("ended %s (%s); want malformed", out.End, out.Reason)
	}
	if r := lastResults(tr); len(r) != 1 || !r[0].IsError {
		t.Fatalf("results %+v; want a tool error", r)
	}
}

// TestMalformedStreakResets: a good call between malformed ones resets the
// count.
func TestMalformedStreakResets(t *testing.T) {
	l, _, _ := newLoop(t, Limits{},
		call("1", toolRead, `nope`), call("2", toolRead, `nope`), call("3", toolList, `{}`),
		call("4", toolRead, `nope`), call("5", toolRead, `nope`),
	)
	if out := l.run(context.Background(), newTranscript()); out.End != EndAnswered {
		t.Fatalf("ended %s (%s); want answered", out.End, out.Reason)
	}
}

// TestStuck: the same call over and over stops the loop.
func TestStuck(t *testing.T) {
	l, _, _ := newLoop(t, Limits{}, call("1", toolList, `{}`), call("2", toolList, `{}`), call("3", toolList, `{}`), call("4", toolList, `{}`))
	if out := l.run(context.Background(), newTranscript()); out.End != EndStuck {
		t.Fatalf("ended %s (%s); want stuck", out.End, out.Reason)
	}
}

// TestLimits: turns, tokens and cost are enforced by the loop.
func TestLimits(t *testing.T) {
	many := func() []model.Response {
		var rs []model.Response
		for i := range 10 {
			r := call(fmt.Sprint(i), toolRead, fmt.Sprintf(`{"path":"f%d"}`, i))
			r.Usage.CostUSD = 1
			rs = append(rs, r)
		}
		return rs
	}
	for _, tt := range []struct {
		name string
		lim  Limits
		has  string
	}{
		{"turns", Limits{MaxTurns: 3}, "3 model turns"},
		{"tokens", Limits{MaxTokens: 250}, "tokens"},
		{"cost", Limits{MaxCost: 2}, "spent $2"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l, sc, _ := newLoop(t, tt.lim, many()...)
			out := l.run(context.Background(), newTranscript())
			if out.End != EndLimit || !strings.Contains(out.Reason, tt.has) {
				t.Fatalf("ended %s (%s); want a limit mentioning %q", out.End, out.Reason, tt.has)
			}
			if len(sc.reqs) > 3 {
				t.Fatalf("%d model calls", len(sc.reqs))
			}
		})
	}
}

// TestSymlinkEscape: a symlink a command planted to the runner's files,
// and paths with "..", are refused by every file tool.
func TestSymlinkEscape(t *testing.T) {
	outside := t.TempDir()
	secret := filepath.Join(outside, "login.json")
	if err := os.WriteFile(secret, []byte("TOKEN-SECRET"), 0o600); err != nil {
		t.Fatal(err)
	}
	l, _, dir := newLoop(t, Limits{},
		call("1", toolRun, fmt.Sprintf(`{"command":"ln -s %s login && ln -s %s up"}`, secret, outside)),
		call("2", toolRead, `{"path":"login"}`),
		call("3", toolRead, `{"path":"up/login.json"}`),
		call("4", toolRead, `{"path":"../`+filepath.Base(outside)+`/login.json"}`),
		call("5", toolWrite, `{"path":"up/new","content":"x"}`),
		call("6", toolEdit, `{"path":"login","old_text":"TOKEN","new_text":"x"}`),
		call("7", toolSearch, `{"pattern":"TOKEN","path":"up"}`),
		call("8", toolRead, `{"path":"`+secret+`"}`),
	)
	tr := newTranscript()
	l.run(context.Background(), tr)
	if _, err := os.Lstat(filepath.Join(dir, "login")); err != nil {
		t.Fatalf("the command did not plant the link: %v", err)
	}
	n := 0
	for _, m := range tr.Messages {
		for _, r := range m.Results {
			if r.CallID == "1" {
				continue
			}
			n++
			if strings.Contains(r.Output, "TOKEN-SECRET") || (!r.IsError && r.Output != "(no matches)") {
				t.Errorf("call %s reached outside: %q", r.CallID, r.Output)
			}
		}
	}
	if n != 7 {
		t.Fatalf("%d results", n)
	}
	if _, err := os.Stat(filepath.Join(outside, "new")); err == nil {
		t.Fatal("write_file wrote outside the worktree")
	}
	if b, _ := os.ReadFile(secret); string(b) != "TOKEN-SECRET" {
		t.Fatal("edit_file changed a file outside the worktree")
	}
}

// TestBackfill: a dangling call gets an interrupted result before the
// resumed prompt, in one user message.
func TestBackfill(t *testing.T) {
	tr := newTranscript()
	tr.Messages = append(tr.Messages, model.Message{Role: model.Assistant, Calls: []model.Call{{ID: "c1", Name: toolRun, Args: `{}`}}})
	tr.backfill("continue")
	last := tr.Messages[len(tr.Messages)-1]
	if last.Role != model.User || len(last.Results) != 1 || last.Results[0].CallID != "c1" || !last.Results[0].IsError || last.Text != "continue" {
		t.Fatalf("got %+v", last)
	}
}

// TestTruncatedAnswer: answers cut at the token limit are asked again,
// then end the attempt.
func TestTruncatedAnswer(t *testing.T) {
	cut := model.Response{Text: "I will now", Stop: model.StopLength}
	l, sc, _ := newLoop(t, Limits{}, cut, cut, cut)
	out := l.run(context.Background(), newTranscript())
	if out.End != EndMalformed || len(sc.reqs) != 3 {
		t.Fatalf("ended %s (%s) after %d calls", out.End, out.Reason, len(sc.reqs))
	}
}

// TestWallTime: the loop stops at its time limit, also in a command.
func TestWallTime(t *testing.T) {
	l, _, _ := newLoop(t, Limits{MaxWall: 300 * time.Millisecond}, call("1", toolRun, `{"command":"sleep 30"}`))
	out := l.run(context.Background(), newTranscript())
	if out.End != EndTimeout {
		t.Fatalf("ended %s (%s); want the time limit", out.End, out.Reason)
	}
	if r := result(out, true, time.Hour, time.Now()); r.Reason != "timeout" {
		t.Fatalf("result %+v", r)
	}
}

// TestHeadTail: long output keeps its head and tail.
func TestHeadTail(t *testing.T) {
	var h headTail
	h.Write([]byte("HEAD"))
	h.Write([]byte(strings.Repeat("x", 100<<10)))
	h.Write([]byte("TAIL"))
	s := h.String()
	if !strings.HasPrefix(s, "HEAD") || !strings.HasSuffix(s, "TAIL\n") || !strings.Contains(s, "bytes of output elided") || len(s) > 17<<10 {
		t.Fatalf("got %d bytes: %q…", len(s), s[:40])
	}
}

// TestRunResumes: the agent records its transcript; a resumed attempt
// continues it after the last recorded turn with the dangling call
// back-filled, and the key never reaches the job's log.
func TestRunResumes(t *testing.T) {
	dir, acctDir := t.TempDir(), t.TempDir()
	var sc *script
	g := New(Config{NewProvider: func(c model.Config) (model.Provider, error) {
		if c.Key != "sk-SECRET" || c.Provider != model.OpenAICompatible {
			return nil, fmt.Errorf("config %s", c.Provider)
		}
		return sc, nil
	}})
	att := func(resume string) agent.Attempt {
		return agent.Attempt{Dir: dir, Prompt: "the job", Output: &strings.Builder{}, NewSession: "s-1", Resume: resume,
			Env:     []string{"PATH=/usr/bin:/bin"},
			Account: &agent.Account{Dir: acctDir, Key: "sk-SECRET", Provider: model.OpenAICompatible, BaseURL: "http://127.0.0.1:9/v1", Model: "m"},
			Sandbox: func(agent.Extra) (sandbox.Boundary, error) {
				return sandbox.New(context.Background(), sandbox.Policy{Kind: sandbox.KindNone, Root: dir})
			}}
	}
	sc = &script{resps: []model.Response{call("1", toolWrite, `{"path":"a","content":"1"}`), {Text: "paused", Stop: model.StopEnd}}}
	a := att("")
	res, err := g.Run(context.Background(), a)
	if err != nil || res.Session != "s-1" || res.ExitCode != 0 {
		t.Fatalf("first: %+v, %v", res, err)
	}
	// A crash between a call and its result: the saved transcript ends in
	// the call.
	j, tr, err := openJournal(filepath.Join(acctDir, "native", "s-1.jsonl"), nil, true)
	if err != nil {
		t.Fatal(err)
	}
	if tr.Session != "s-1" || tr.Turns != 2 || len(tr.Messages) != 4 {
		t.Fatalf("read back %+v", tr)
	}
	tr.Messages = append(tr.Messages, model.Message{Role: model.Assistant, Calls: []model.Call{{ID: "9", Name: toolRun, Args: `{"command":"true"}`}}})
	if err := j.save(context.Background(), tr); err != nil {
		t.Fatal(err)
	}
	// A torn line after it, as a crash mid-write leaves.
	if _, err := j.f.WriteString(`{"message":{"role":"assis`); err != nil {
		t.Fatal(err)
	}
	j.Close()
	sc = &script{}
	b := att("s-1")
	if res, err = g.Run(context.Background(), b); err != nil || res.ExitCode != 0 {
		t.Fatalf("resumed: %+v, %v", res, err)
	}
	msgs := sc.reqs[0].Messages
	if len(msgs) != len(tr.Messages)+1 || msgs[len(msgs)-1].Results[0].Output != interrupted {
		t.Fatalf("resumed with %d messages, last %+v", len(msgs), msgs[len(msgs)-1])
	}
	for _, w := range []*strings.Builder{a.Output.(*strings.Builder), b.Output.(*strings.Builder)} {
		if strings.Contains(w.String(), "sk-SECRET") {
			t.Fatal("the key reached the job's log")
		}
	}
}

// TestExitCodeRule: one rule for a native attempt's exit code: 0 when the
// model ended the turn as it should (deliver or ask where drover's tools
// were on offer), -1 when stopped, else 1, whatever ended it; a refusal
// of the account's model or endpoint has its own reason.
func TestExitCodeRule(t *testing.T) {
	for _, tt := range []struct {
		out    Outcome
		tools  bool
		code   int
		reason job.Reason
	}{
		{Outcome{End: EndDelivered}, true, 0, job.ReasonExited},
		{Outcome{End: EndAnswered}, false, 0, job.ReasonExited},
		{Outcome{End: EndAnswered}, true, 1, job.ReasonExited},
		{Outcome{End: EndEmpty}, true, 1, job.ReasonExited},
		{Outcome{End: EndStuck}, true, 1, job.ReasonExited},
		{Outcome{End: EndModel, Err: &model.Error{Kind: model.KindNoModel}}, true, 1, job.ReasonModelNotFound},
		{Outcome{End: EndModel, Err: &model.Error{Kind: model.KindRefused, Status: 404}}, true, 1, job.ReasonEndpointRefused},
		{Outcome{End: EndModel, Err: &model.Error{Kind: model.KindRefused, Status: 400, Message: "HTTP 400: prompt is too long"}}, true, 1, job.ReasonExited},
		{Outcome{End: EndCancelled}, true, -1, job.ReasonCancelled},
	} {
		if r := result(tt.out, tt.tools, time.Hour, time.Now()); r.ExitCode != tt.code || r.Reason != tt.reason {
			t.Errorf("%s (tools %v): exit %d reason %s; want %d %s", tt.out.End, tt.tools, r.ExitCode, r.Reason, tt.code, tt.reason)
		}
	}
}
