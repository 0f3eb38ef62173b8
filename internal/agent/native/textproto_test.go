package native

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"drover/internal/agent"
	"drover/internal/model"
	"drover/internal/testkit/fakemodel"
	"drover/internal/tools"
)

// say is a text answer of a model without tool calling.
func say(text string) model.Response {
	return model.Response{Text: text, Stop: model.StopEnd, Usage: model.Usage{InputTokens: 100, OutputTokens: 10}}
}

func block(name, args string) string { return fence + " " + name + "\n" + args + "\n```" }

// TestTextProtocolTask: a model without tool calling reads, edits and
// delivers through fenced blocks; it is offered no native tools, is told
// the protocol, and gets the results back as text.
func TestTextProtocolTask(t *testing.T) {
	l, sc, dir := newLoop(t, Limits{},
		say("First I look.\n"+block(toolRead, `{"path":"a.txt"}`)),
		say(block(toolEdit, `{"path":"a.txt","old_text":"world","new_text":"drover"}`)+"\n"+block(toolRead, `{"path":"a.txt"}`)),
		say("Done.\n"+block(tools.ToolDeliver, `{"summary":"greeted drover"}`)),
	)
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("hello world\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l.model = forAccount(sc, &agent.Account{NoToolCalls: true})
	tr := newTranscript()
	if out := l.run(context.Background(), tr); out.End != EndDelivered {
		t.Fatalf("ended %s (%s); want delivered", out.End, out.Reason)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(got) != "hello drover\n" {
		t.Fatalf("file holds %q", got)
	}
	for i, req := range sc.reqs {
		if len(req.Tools) != 0 || !req.NoStream || !strings.Contains(req.System, fence+" TOOL_NAME") || !strings.Contains(req.System, toolEdit) {
			t.Fatalf("request %d: %d native tools, system %q", i, len(req.Tools), req.System)
		}
		for _, m := range req.Messages {
			if len(m.Calls) > 0 || len(m.Results) > 0 {
				t.Fatalf("request %d sent native calls or results: %+v", i, m)
			}
		}
	}
	last := sc.reqs[2].Messages
	if got := last[len(last)-1].Text; !strings.Contains(got, "Result of read_file (text_2") || !strings.Contains(got, "hello drover") {
		t.Fatalf("the results went back as %q", got)
	}
}

// TestTextProtocolMalformed: three malformed blocks in a row (one that
// never closes, one without a tool name, one whose body is no JSON) end
// the attempt with the reason; each got a tool error saying what was
// wrong.
func TestTextProtocolMalformed(t *testing.T) {
	l, sc, _ := newLoop(t, Limits{},
		say(fence+" "+toolRead+"\n{\"path\":\"a.txt\"}"),
		say(fence+"\n{}\n```"),
		say(block(toolRead, `{"path": a.txt}`)),
		say(block(toolList, `{}`)),
	)
	l.model = textProtocol{sc}
	tr := newTranscript()
	out := l.run(context.Background(), tr)
	if out.End != EndMalformed || !strings.Contains(out.Reason, "3 malformed") || len(sc.reqs) != 3 {
		t.Fatalf("ended %s (%s) after %d calls; want malformed after 3", out.End, out.Reason, len(sc.reqs))
	}
	var errs []string
	for _, m := range tr.Messages {
		for _, r := range m.Results {
			if !r.IsError {
				t.Fatalf("result %+v is no error", r)
			}
			errs = append(errs, r.Output)
		}
	}
	if len(errs) != 3 || !strings.Contains(errs[0], "never closes") || !strings.Contains(errs[1], "one tool name") || !strings.Contains(errs[2], "not valid JSON") {
		t.Fatalf("tool errors %q", errs)
	}
}

// TestParseBlocks: only drover-tool fences are calls; other fences are
// text.
func TestParseBlocks(t *testing.T) {
	for _, tt := range []struct {
		text string
		want []string // name and args of each call
	}{
		{"no blocks, just an answer", nil},
		{"```go\nfmt.Println()\n```", nil},
		{block("a", `{"x":1}`) + "\ntext\n" + block("b", "{}"), []string{"a " + `{"x":1}`, "b {}"}},
		{fence + "x\n{}\n```", []string{badBlock + ` {"problem":"the block's first line must be ` + fence + ` and one tool name"}`}},
		{fence + " a b\n{}\n```", []string{badBlock + ` {"problem":"the block's first line must be ` + fence + ` and one tool name"}`}},
	} {
		var got []string
		for _, c := range parseBlocks(tt.text) {
			got = append(got, c.Name+" "+c.Args)
		}
		if strings.Join(got, "|") != strings.Join(tt.want, "|") {
			t.Errorf("parseBlocks(%q) = %q; want %q", tt.text, got, tt.want)
		}
	}
}

// TestCutMidCall: an answer cut at the token limit in the middle of a
// tool call (native or a block) never runs it; the model is told to send
// it again, and a whole call then runs.
func TestCutMidCall(t *testing.T) {
	cutNative := call("1", toolWrite, `{"path":"a.txt","content":"hal`)
	cutNative.Stop = model.StopLength
	cutBlock := say(fence + " " + toolWrite + "\n{\"path\":\"a.txt\",")
	cutBlock.Stop = model.StopLength
	for _, tt := range []struct {
		name  string
		text  bool
		resps []model.Response
	}{
		{"native", false, []model.Response{cutNative, call("2", toolWrite, `{"path":"a.txt","content":"whole"}`)}},
		{"text protocol", true, []model.Response{cutBlock, say(block(toolWrite, `{"path":"a.txt","content":"whole"}`))}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			l, sc, dir := newLoop(t, Limits{}, tt.resps...)
			if tt.text {
				l.model = textProtocol{sc}
			}
			tr := newTranscript()
			if out := l.run(context.Background(), tr); out.End != EndAnswered {
				t.Fatalf("ended %s (%s)", out.End, out.Reason)
			}
			if r := tr.Messages[2].Results; len(r) != 1 || !r[0].IsError || !strings.Contains(r[0].Output, "cut off") {
				t.Fatalf("the cut call got %+v", r)
			}
			if got, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(got) != "whole" {
				t.Fatalf("file holds %q", got)
			}
		})
	}
}

// TestBrokenStreamUsesWholeAnswers: against a server whose streamed tool
// calls break, an account probed as such gets whole answers and the task
// goes on; unprobed, the same server fails the attempt.
func TestBrokenStreamUsesWholeAnswers(t *testing.T) {
	for _, probed := range []bool{true, false} {
		srv := fakemodel.NewFakeChat(t, []fakemodel.Turn{
			fakemodel.CallTool(toolWrite, map[string]any{"path": "a.txt", "content": "whole"}),
			fakemodel.Text("done"),
		}, fakemodel.BrokenStreamedTools())
		p, err := model.New(model.Config{Provider: model.OpenAICompatible, BaseURL: srv.URL + "/v1", Model: "m", Retries: -1})
		if err != nil {
			t.Fatal(err)
		}
		l, _, dir := newLoop(t, Limits{})
		l.model = forAccount(p, &agent.Account{NoStreamedToolCalls: probed})
		out := l.run(context.Background(), newTranscript())
		got, _ := os.ReadFile(filepath.Join(dir, "a.txt"))
		if probed != (out.End == EndAnswered && string(got) == "whole") {
			t.Fatalf("probed %v: ended %s (%s), file %q\n%s", probed, out.End, out.Reason, got, srv.Dump())
		}
	}
}

// TestProbedContextWindow: the context length an account's server said it
// serves bounds the loop's requests, not the operator's configured window:
// a prompt past it is refused rather than sent to be cut.
func TestProbedContextWindow(t *testing.T) {
	g := New(Config{Limits: Limits{ContextWindow: 128_000}})
	for _, tt := range []struct {
		served int64
		want   End
	}{{0, EndAnswered}, {200, EndTooLong}} {
		lim := g.limits(&agent.Account{ContextLength: tt.served}, 0)
		l, _, _ := newLoop(t, lim)
		tr := newTranscript()
		tr.Messages[0].Text = strings.Repeat("a long task ", 100)
		if out := l.run(context.Background(), tr); out.End != tt.want {
			t.Fatalf("served %d: ended %s (%s); want %s", tt.served, out.End, out.Reason, tt.want)
		}
	}
}

// TestTextProtocolOnChatServer: on a Chat Completions server whose model
// does not call tools, an account probed as such completes a task (read,
// edit, deliver) through the text protocol; the server is offered no
// tools and gets the results as text.
func TestTextProtocolOnChatServer(t *testing.T) {
	turns := []fakemodel.Turn{
		fakemodel.Text("Looking first.\n" + block(toolRead, `{"path":"a.txt"}`)),
		fakemodel.Text(block(toolEdit, `{"path":"a.txt","old_text":"world","new_text":"drover"}`)),
		fakemodel.Text(block(tools.ToolDeliver, `{"summary":"greeted drover"}`)),
	}
	srv := fakemodel.NewFakeChat(t, turns, fakemodel.TextOnly())
	p, err := model.New(model.Config{Provider: model.OpenAICompatible, BaseURL: srv.URL + "/v1", Model: "m", Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	f, err := model.Probe(context.Background(), p)
	if err != nil || f.ToolCalls {
		t.Fatalf("probe found %+v, %v", f, err)
	}
	srv = fakemodel.NewFakeChat(t, turns, fakemodel.TextOnly()) // a fresh script for the task
	if p, err = model.New(model.Config{Provider: model.OpenAICompatible, BaseURL: srv.URL + "/v1", Model: "m", Retries: -1}); err != nil {
		t.Fatal(err)
	}
	l, _, dir := newLoop(t, Limits{})
	if err := os.WriteFile(filepath.Join(dir, "a.txt"), []byte("hello world\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	l.model = forAccount(p, &agent.Account{NoToolCalls: !f.ToolCalls})
	if out := l.run(context.Background(), newTranscript()); out.End != EndDelivered {
		t.Fatalf("ended %s (%s)\n%s", out.End, out.Reason, srv.Dump())
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(got) != "hello drover\n" {
		t.Fatalf("file holds %q", got)
	}
	reqs := srv.Requests()
	if len(reqs) != 3 || len(reqs[0].Tools) != 0 || !strings.Contains(string(reqs[2].Body), "Result of edit_file") {
		t.Fatalf("requests:\n%s\nlast body %s", srv.Dump(), reqs[len(reqs)-1].Body)
	}
}

// TestCutMidCallOnChatServer: a Chat server's answer cut by
// finish_reason=length halfway through a tool call's arguments is not run;
// the model gets a tool error asking again, and its whole call then runs.
func TestCutMidCallOnChatServer(t *testing.T) {
	args := map[string]any{"path": "a.txt", "content": "whole"}
	srv := fakemodel.NewFakeChat(t, []fakemodel.Turn{
		fakemodel.CutCall(toolWrite, args), fakemodel.CallTool(toolWrite, args), fakemodel.Text("done"),
	})
	p, err := model.New(model.Config{Provider: model.OpenAICompatible, BaseURL: srv.URL + "/v1", Model: "m", Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	l, _, dir := newLoop(t, Limits{})
	l.model = p
	tr := newTranscript()
	if out := l.run(context.Background(), tr); out.End != EndAnswered {
		t.Fatalf("ended %s (%s)\n%s", out.End, out.Reason, srv.Dump())
	}
	if r, ok := srv.Result(0); !ok || !strings.Contains(r.Output, "cut off") {
		t.Fatalf("the cut call got %+v, %v", r, ok)
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(got) != "whole" {
		t.Fatalf("file holds %q", got)
	}
}

// chatLoop is a loop on a fresh worktree talking to a Chat fake with
// turns through an account that was never probed.
func chatLoop(t *testing.T, turns []fakemodel.Turn, opts ...fakemodel.Option) (*loop, *adapting, *fakemodel.FakeServer, string) {
	t.Helper()
	srv := fakemodel.NewFakeChat(t, turns, opts...)
	p, err := model.New(model.Config{Provider: model.OpenAICompatible, BaseURL: srv.URL + "/v1", Model: "m", Retries: -1})
	if err != nil {
		t.Fatal(err)
	}
	l, _, dir := newLoop(t, Limits{})
	ad := forAccount(p, &agent.Account{})
	l.model = ad
	return l, ad, srv, dir
}

// TestServerThatAnswersStreamsWhole: a server that answers a streamed
// request carrying tools with a whole JSON body (as some local servers
// and gateways do) gets its task done on an account never probed; the
// loop asks for whole answers from then on and says so for the account.
func TestServerThatAnswersStreamsWhole(t *testing.T) {
	l, ad, srv, dir := chatLoop(t, []fakemodel.Turn{
		fakemodel.CallTool(toolWrite, map[string]any{"path": "a.txt", "content": "whole"}), fakemodel.Text("done"),
	}, fakemodel.WholeStreams())
	out := l.run(context.Background(), newTranscript())
	got, _ := os.ReadFile(filepath.Join(dir, "a.txt"))
	if out.End != EndAnswered || string(got) != "whole" {
		t.Fatalf("ended %s (%s), file %q\n%s", out.End, out.Reason, got, srv.Dump())
	}
	if f := ad.Learned(); f == nil || !f.NoStreamedToolCalls || f.NoToolCalls {
		t.Fatalf("learned %+v; want whole answers", f)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 || !strings.Contains(string(reqs[0].Body), `"stream":true`) || strings.Contains(string(reqs[1].Body), `"stream":true`) {
		t.Fatalf("requests:\n%s", srv.Dump())
	}
}

// TestServerThatRefusesTools: a model whose server refuses tools (Ollama's
// 400 "does not support tools") gets the text protocol at once, on an
// account never probed, and the task goes on; the loop says so for the
// account.
func TestServerThatRefusesTools(t *testing.T) {
	l, ad, srv, dir := chatLoop(t, []fakemodel.Turn{
		fakemodel.Text(block(toolWrite, `{"path":"a.txt","content":"text"}`)), fakemodel.Text("done"),
	}, fakemodel.RefuseTools())
	out := l.run(context.Background(), newTranscript())
	got, _ := os.ReadFile(filepath.Join(dir, "a.txt"))
	if out.End != EndAnswered || string(got) != "text" {
		t.Fatalf("ended %s (%s), file %q\n%s", out.End, out.Reason, got, srv.Dump())
	}
	if f := ad.Learned(); f == nil || !f.NoToolCalls {
		t.Fatalf("learned %+v; want the text protocol", f)
	}
}

// TestEmptyAnswers: an empty answer (what Ollama makes of a malformed or
// unknown tool call) is a malformed turn: the model is nudged and goes
// on; the limit of them in a row ends the attempt with its own reason.
func TestEmptyAnswers(t *testing.T) {
	write := fakemodel.CallTool(toolWrite, map[string]any{"path": "a.txt", "content": "x"})
	l, _, srv, dir := chatLoop(t, []fakemodel.Turn{fakemodel.Text(""), fakemodel.Text(""), write, fakemodel.Text("done")})
	tr := newTranscript()
	if out := l.run(context.Background(), tr); out.End != EndAnswered {
		t.Fatalf("ended %s (%s)\n%s", out.End, out.Reason, srv.Dump())
	}
	if got, _ := os.ReadFile(filepath.Join(dir, "a.txt")); string(got) != "x" || !strings.Contains(string(srv.Requests()[1].Body), "Your answer was empty") {
		t.Fatalf("file %q; the model was not nudged:\n%s", got, srv.Requests()[1].Body)
	}
	l, _, srv, _ = chatLoop(t, []fakemodel.Turn{fakemodel.Text(""), fakemodel.Text(""), fakemodel.Text(""), fakemodel.Text("never")})
	out := l.run(context.Background(), newTranscript())
	if out.End != EndEmpty || !strings.Contains(out.Reason, "3 malformed or empty answers") || len(srv.Requests()) != 3 {
		t.Fatalf("ended %s (%s)\n%s", out.End, out.Reason, srv.Dump())
	}
}
