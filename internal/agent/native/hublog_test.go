package native

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"drover/internal/agent"
	"drover/internal/model"
	"drover/internal/protocol"
	"drover/internal/sandbox"
	"drover/internal/testkit/fakemodel"
)

// memTurns is a hub's turn log in memory (agent.TurnLog), checking each
// record as the hub does.
type memTurns struct {
	mu   sync.Mutex
	recs map[string][]protocol.TurnRecord
}

func (m *memTurns) Append(_ context.Context, session string, recs []protocol.TurnRecord) error {
	if err := (protocol.Turns{Session: session, Records: recs}).Check(); err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.recs == nil {
		m.recs = map[string][]protocol.TurnRecord{}
	}
	m.recs[session] = append(m.recs[session], recs...)
	return nil
}

func (m *memTurns) Load(_ context.Context, session string) ([]protocol.TurnRecord, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]protocol.TurnRecord(nil), m.recs[session]...), nil
}

// TestRunResumesFromTheHub: with a turn log the transcript lives there,
// not in the account's directory, so an attempt under another account
// (another runner) resumes it, its dangling call back-filled; an output
// too big for a record is kept whole in the job's log and cut in the
// record; no record holds the key.
func TestRunResumesFromTheHub(t *testing.T) {
	dir := t.TempDir()
	turns := &memTurns{}
	var sc *script
	g := New(Config{NewProvider: func(model.Config) (model.Provider, error) { return sc, nil }})
	att := func(resume string) (agent.Attempt, *strings.Builder) {
		out := &strings.Builder{}
		return agent.Attempt{Dir: dir, Prompt: "the job", Output: out, NewSession: "s-1", Resume: resume, Turns: turns,
			Env:     []string{"PATH=/usr/bin:/bin"},
			Account: &agent.Account{Dir: t.TempDir(), Key: "sk-SECRET", Provider: model.OpenAICompatible, BaseURL: "http://127.0.0.1:9/v1", Model: "m"},
			Sandbox: func(agent.Extra) (sandbox.Boundary, error) {
				return sandbox.New(context.Background(), sandbox.Policy{Kind: sandbox.KindNone, Root: dir})
			}}, out
	}
	big := strings.Repeat("B", 3*inlineLimit)
	sc = &script{resps: []model.Response{
		call("1", toolWrite, fmt.Sprintf(`{"path":"big.txt","content":%q}`, big)),
		call("2", toolRead, `{"path":"big.txt"}`),
		{Text: "paused", Stop: model.StopEnd},
	}}
	a, out1 := att("")
	if res, err := g.Run(context.Background(), a); err != nil || res.Session != "s-1" || res.ExitCode != 0 {
		t.Fatalf("first: %+v, %v", res, err)
	}
	recs, _ := turns.Load(context.Background(), "s-1")
	if len(recs) != 7 { // the start, the prompt, two calls and their results, the end
		t.Fatalf("%d records", len(recs))
	}
	if !strings.Contains(recs[0].Summary, "started") || recs[1].Summary != "turn 0 user: the job" {
		t.Fatalf("the transcript does not begin with the session and the prompt: %q, %q", recs[0].Summary, recs[1].Summary)
	}
	for _, r := range recs {
		if strings.Contains(string(r.Data), "sk-SECRET") || len(r.Data) > 2*inlineLimit {
			t.Fatalf("record of turn %d: %d bytes, or it holds the key", r.Turn, len(r.Data))
		}
	}
	if !strings.Contains(out1.String(), "drover: the whole arguments of call 1") || !strings.Contains(out1.String(), big) {
		t.Fatal("the elided arguments are not whole in the job's log")
	}
	if !strings.Contains(recs[2].Summary, "turn 1 assistant: write_file") || !strings.Contains(recs[5].Summary, "read_file →") {
		t.Fatalf("summaries %q, %q", recs[2].Summary, recs[3].Summary)
	}
	// A crash between a call and its result: the hub's transcript ends in
	// the call.
	m := model.Message{Role: model.Assistant, Calls: []model.Call{{ID: "9", Name: toolRun, Args: `{"command":"true"}`}}}
	data, _ := json.Marshal(record{Message: &m, Turns: 4})
	if err := turns.Append(context.Background(), "s-1", []protocol.TurnRecord{{Turn: 4, Summary: "turn 4", Data: data}}); err != nil {
		t.Fatal(err)
	}
	sc = &script{}
	b, out2 := att("s-1")
	if res, err := g.Run(context.Background(), b); err != nil || res.ExitCode != 0 {
		t.Fatalf("resumed: %+v, %v", res, err)
	}
	msgs := sc.reqs[0].Messages
	if len(msgs) != 8 || msgs[len(msgs)-1].Results[0].Output != interrupted || msgs[len(msgs)-1].Text != "the job" {
		t.Fatalf("resumed with %d messages, last %+v", len(msgs), msgs[len(msgs)-1])
	}
	if !strings.Contains(out2.String(), "after turn 4") || strings.Contains(out1.String()+out2.String(), "sk-SECRET") {
		t.Fatalf("the resumed log:\n%s", out2.String())
	}
	// A session the hub holds nothing of is refused, not started anew.
	c, _ := att("s-none")
	if res, _ := g.Run(context.Background(), c); res.Reason != "spawn_failed" || !strings.Contains(res.Message, "no transcript") {
		t.Fatalf("unknown session: %+v", res)
	}
}

// TestLimitParksOnlyUntilAStatedResetWithinTheBudget: a 429 from the
// provider (the fake Anthropic server, through the real client) parks the
// job only until a reset the provider stated, within the job's wait
// budget; without one, or past the budget, the attempt ends with why and
// no guessed wait.
func TestLimitParksOnlyUntilAStatedResetWithinTheBudget(t *testing.T) {
	soon := time.Now().Add(10 * time.Minute).Truncate(time.Second)
	for _, tc := range []struct {
		name  string
		reset time.Time
		park  bool
		has   string
	}{
		{"a stated reset within the budget", soon, true, "rate limit"},
		{"no stated reset", time.Time{}, false, "no reset time"},
		{"a reset past the budget", time.Now().Add(48 * time.Hour), false, "past the job's wait budget of 1h0m0s"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := fakemodel.NewFakeAnthropic(t, []fakemodel.Turn{fakemodel.Text("done")}, fakemodel.RequireKey("sk-SECRET"),
				fakemodel.RateLimit(0, tc.reset))
			dir := t.TempDir()
			g := New(Config{Limits: Limits{MaxWait: time.Hour}})
			res, err := g.Run(context.Background(), agent.Attempt{Dir: dir, Prompt: "the job", Output: io.Discard, NewSession: "s-1",
				Turns: &memTurns{}, Env: []string{"PATH=/usr/bin:/bin"},
				Account: &agent.Account{Dir: t.TempDir(), Key: "sk-SECRET", Provider: model.Anthropic, BaseURL: fake.URL, Model: "m"},
				Sandbox: func(agent.Extra) (sandbox.Boundary, error) {
					return sandbox.New(context.Background(), sandbox.Policy{Kind: sandbox.KindNone, Root: dir})
				}})
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case tc.park && (res.Limit == nil || res.Limit.ResetsAt.Sub(tc.reset).Abs() > 2*time.Second):
				t.Fatalf("limit %+v; want it to reset at %s", res.Limit, tc.reset)
			case !tc.park && res.Limit != nil:
				t.Fatalf("parked until %s", res.Limit.ResetsAt)
			case !strings.Contains(strings.ToLower(res.Message+limitMessage(res.Limit)), tc.has) || res.ExitCode != 1:
				t.Fatalf("result %+v; want exit 1 and %q", res, tc.has)
			case strings.Contains(res.Message, "sk-SECRET"):
				t.Fatal("the key is in the result")
			}
		})
	}
}

func limitMessage(l *agent.Limit) string {
	if l == nil {
		return ""
	}
	return l.Message
}

// TestCompactionFiresAndIsRecorded: past 80% of the context window the
// loop asks for a summary and sends, from then on, the job's prompt (the
// stable prefix), the summary and the latest turns; the compaction is a
// record of its own naming what was dropped, and a resumed attempt sends
// the same view.
func TestCompactionFiresAndIsRecorded(t *testing.T) {
	var resps []model.Response
	for i, tokens := range []int64{300, 600, 900, 200, 300} {
		r := call(fmt.Sprint(i+1), toolRead, fmt.Sprintf(`{"path":"f%d"}`, i+1))
		r.Usage.InputTokens = tokens
		resps = append(resps, r)
	}
	l, sc, _ := newLoop(t, Limits{ContextWindow: 1000}, resps...)
	turns := &memTurns{}
	tr := newTranscript()
	tr.Session = "s-1"
	hl, _, err := openHubLog(context.Background(), turns, io.Discard, tr, false)
	if err != nil {
		t.Fatal(err)
	}
	l.save = hl.save
	if out := l.run(context.Background(), tr); out.End != EndAnswered {
		t.Fatalf("ended %s (%s)", out.End, out.Reason)
	}
	if len(tr.Compactions) != 1 || tr.Compactions[0].Upto != 3 { // keeps turns 2 and 3
		t.Fatalf("compactions %+v", tr.Compactions)
	}
	// Requests: turns 1-3, the summary, turns 4-6.
	if len(sc.reqs) != 7 {
		t.Fatalf("%d requests", len(sc.reqs))
	}
	after := sc.reqs[4].Messages
	if after[0].Text != "do it" || !strings.Contains(after[1].Text, "SUMMARY: read f1-f3") || len(after) != 3+4 {
		t.Fatalf("sent after the compaction: %+v", after)
	}
	recs, _ := turns.Load(context.Background(), "s-1")
	var comp *protocol.TurnRecord
	for i := range recs {
		if recs[i].Kind == protocol.KindCompaction {
			comp = &recs[i]
		}
	}
	if comp == nil || !strings.Contains(comp.Summary, "dropped messages 1-2 of 7") || !strings.Contains(comp.Summary, "read_file×1") {
		t.Fatalf("compaction record %+v", comp)
	}
	_, back, err := openHubLog(context.Background(), turns, io.Discard, &Transcript{Session: "s-1"}, true)
	if err != nil {
		t.Fatal(err)
	}
	if v := back.view(); len(back.Compactions) != 1 || len(v) != len(tr.view()) || v[1].Text != tr.view()[1].Text {
		t.Fatalf("read back %d compactions, a view of %d messages", len(back.Compactions), len(v))
	}
}

// TestFallbackContinuesTheTranscript: a 429 without a stated reset on the
// job's account (Anthropic) moves the loop to its fallback account
// (another provider, openai-compatible), which is sent the same transcript,
// the first provider's tool calls and results included, and finishes it.
// A reset the first account stated is reported for it to sit out.
func TestFallbackContinuesTheTranscript(t *testing.T) {
	for _, reset := range []time.Time{{}, time.Now().Add(10 * time.Minute)} {
		t.Run(fmt.Sprint("reset ", !reset.IsZero()), func(t *testing.T) { fallsBack(t, reset) })
	}
}

func fallsBack(t *testing.T, reset time.Time) {
	primary := fakemodel.NewFakeAnthropic(t, []fakemodel.Turn{
		fakemodel.CallTool("write_file", map[string]any{"path": "a.txt", "content": "from the first\n"}),
		fakemodel.Text("never reached"),
	}, fakemodel.RequireKey("sk-ONE"), fakemodel.RateLimit(1, reset))
	fallback := fakemodel.NewFakeChat(t, []fakemodel.Turn{
		fakemodel.CallTool("write_file", map[string]any{"path": "b.txt", "content": "from the fallback\n"}),
		fakemodel.Text("done"),
	}, fakemodel.RequireKey("sk-TWO"))
	dir := t.TempDir()
	out := &strings.Builder{}
	res, err := New(Config{}).Run(context.Background(), agent.Attempt{Dir: dir, Prompt: "the job", Output: out, NewSession: "s-1",
		Turns: &memTurns{}, Env: []string{"PATH=/usr/bin:/bin"},
		Account:  &agent.Account{ID: "acct_one", Dir: t.TempDir(), Key: "sk-ONE", Provider: model.Anthropic, BaseURL: primary.URL, Model: "claude-x"},
		Fallback: &agent.Account{Dir: t.TempDir(), Key: "sk-TWO", Provider: model.OpenAICompatible, BaseURL: fallback.URL + "/v1", Model: "qwen-x"},
		Sandbox: func(agent.Extra) (sandbox.Boundary, error) {
			return sandbox.New(context.Background(), sandbox.Policy{Kind: sandbox.KindNone, Root: dir})
		}})
	if err != nil || res.ExitCode != 0 || res.Limit != nil {
		t.Fatalf("result %+v, %v\n%s\n--- fallback:\n%s", res, err, out, fallback.Dump())
	}
	for f, want := range map[string]string{"a.txt": "from the first\n", "b.txt": "from the fallback\n"} {
		if b, _ := os.ReadFile(filepath.Join(dir, f)); string(b) != want {
			t.Fatalf("%s holds %q", f, b)
		}
	}
	reqs := fallback.Requests()
	if len(reqs) == 0 || !strings.Contains(string(reqs[0].Body), "from the first") || !strings.Contains(string(reqs[0].Body), "wrote") {
		t.Fatalf("the fallback was not sent the transcript so far:\n%s", fallback.Dump())
	}
	if reset.IsZero() != (len(res.Passed) == 0) || (len(res.Passed) == 1 && (res.Passed[0].Account != "acct_one" || res.Passed[0].ResetsAt.Sub(reset).Abs() > 2*time.Second)) {
		t.Fatalf("the first account's limit: %+v", res.Passed)
	}
	if !strings.Contains(out.String(), "continues its transcript on the fallback account") || strings.Contains(out.String(), "sk-") {
		t.Fatalf("the log:\n%s", out)
	}
}

// TestPromptOverTheWindowIsRefused: a prompt the model's context window
// cannot hold is never sent (a server would cut it silently); the attempt
// ends saying why.
func TestPromptOverTheWindowIsRefused(t *testing.T) {
	l, sc, _ := newLoop(t, Limits{ContextWindow: 100})
	tr := newTranscript()
	tr.Messages[0].Text = strings.Repeat("a long task ", 100)
	out := l.run(context.Background(), tr)
	if out.End != EndTooLong || !strings.Contains(out.Reason, "context window of 100") || len(sc.reqs) != 0 {
		t.Fatalf("ended %s (%s) after %d requests", out.End, out.Reason, len(sc.reqs))
	}
	if r := result(out, true, time.Hour, time.Now()); r.ExitCode != 1 || !strings.Contains(r.Message, "refused") {
		t.Fatalf("result %+v", r)
	}
}
