package native

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"drover/internal/agent"
	"drover/internal/model"
)

// fence opens a text-protocol tool call: "```drover-tool NAME", then the
// arguments as one JSON object, then a line "```".
const fence = "```drover-tool"

// badBlock names the call a malformed fenced block stands for; the toolbox
// answers it with a malformed-call error saying what was wrong.
const badBlock = "drover-tool-block"

// forAccount is p talking to the model the way acct's probe found it can:
// native tool calls, whole answers (its streamed calls break), or the text
// protocol (it takes no tool calls). The loop above is the same for all.
// It learns as it goes (adapting): what the probe missed moves it on.
func forAccount(p model.Provider, acct *agent.Account) *adapting {
	a := &adapting{base: p, found: agent.Found{NoToolCalls: acct.NoToolCalls, NoStreamedToolCalls: acct.NoStreamedToolCalls}}
	a.cur = a.mode()
	return a
}

// adapting talks to a model in the mode found so far, and changes mode
// when an answer shows the server needs another: a streamed request
// answered whole moves it to whole answers, a server that refuses tools
// (model.KindNoTools) to the text protocol, that call made again at once.
// Learned is set once it changed; the runner records it on the account.
// The loop calls it from one goroutine.
type adapting struct {
	base, cur model.Provider
	found     agent.Found
	learned   bool
	log       io.Writer // the job's log; nil: none
}

func (a *adapting) mode() model.Provider {
	p := a.base
	if a.found.NoStreamedToolCalls || a.found.NoToolCalls {
		p = wholeAnswers{p}
	}
	if a.found.NoToolCalls {
		p = textProtocol{p}
	}
	return p
}

func (a *adapting) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	resp, err := a.cur.Complete(ctx, req)
	var me *model.Error
	switch {
	case err != nil && errors.As(err, &me) && me.Kind == model.KindNoTools && !a.found.NoToolCalls:
		a.learn(func(f *agent.Found) { f.NoToolCalls = true }, "the model server refuses tools ("+me.Message+"): the agent uses its text protocol")
		return a.cur.Complete(ctx, req)
	case err == nil && resp.Whole && !a.found.NoStreamedToolCalls:
		a.learn(func(f *agent.Found) { f.NoStreamedToolCalls = true }, "the model server answered a streamed request whole: the agent asks for whole answers")
	}
	return resp, err
}

func (a *adapting) learn(change func(*agent.Found), why string) {
	change(&a.found)
	a.learned, a.cur = true, a.mode()
	if a.log != nil {
		fmt.Fprintf(a.log, "drover: %s, and remembers it for this account\n", why)
	}
}

// Learned is what it found that its account did not say; nil: nothing.
func (a *adapting) Learned() *agent.Found {
	if !a.learned {
		return nil
	}
	f := a.found
	return &f
}

// wholeAnswers asks for every answer whole rather than streamed.
type wholeAnswers struct{ model.Provider }

func (w wholeAnswers) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	req.NoStream = true
	return w.Provider.Complete(ctx, req)
}

// textProtocol offers a model without tool calling the tools in its system
// text and reads its calls from fenced blocks in its answer, strictly;
// tool results go back as plain user text. The transcript keeps calls and
// results as for any model, so limits, durable turns and a fallback to a
// model with native calls work the same.
type textProtocol struct{ model.Provider }

func (t textProtocol) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	inner := req
	inner.Tools, inner.Messages = nil, make([]model.Message, 0, len(req.Messages))
	inner.System = req.System + "\n\n" + describeTools(req.Tools)
	for _, m := range req.Messages {
		inner.Messages = append(inner.Messages, asText(m))
	}
	resp, err := t.Provider.Complete(ctx, inner)
	if err != nil {
		return resp, err
	}
	resp.Calls = parseBlocks(resp.Text)
	if len(resp.Calls) > 0 && resp.Stop != model.StopLength {
		resp.Stop = model.StopTools
	}
	return resp, nil
}

// describeTools is the system text that offers tools through fenced blocks.
func describeTools(tools []model.Tool) string {
	var b strings.Builder
	b.WriteString("You call tools by writing fenced blocks in your answer, each exactly:\n" + fence + " TOOL_NAME\n" +
		"{\"argument\": \"value\"}\n```\nThe first line names one tool; the body is one JSON object of its arguments; " +
		"the closing ``` stands alone on its line. Several blocks run in order; their results come back in the next message. " +
		"An answer without a block ends your turn. The tools:\n")
	for _, tl := range tools {
		schema, _ := json.Marshal(tl.Schema)
		fmt.Fprintf(&b, "- %s: %s\n  arguments (JSON schema): %s\n", tl.Name, tl.Description, schema)
	}
	return b.String()
}

// asText is m as the text protocol sends it: an assistant's calls are in
// its text already (unless another provider made them), results are text.
func asText(m model.Message) model.Message {
	var b strings.Builder
	if m.Role == model.Assistant {
		b.WriteString(m.Text)
		if !strings.Contains(m.Text, fence) {
			for _, c := range m.Calls {
				fmt.Fprintf(&b, "\n%s %s\n%s\n```", fence, c.Name, c.Args)
			}
		}
		return model.Message{Role: m.Role, Text: strings.TrimSpace(b.String())}
	}
	for _, r := range m.Results {
		what := "Result"
		if r.IsError {
			what = "Error"
		}
		fmt.Fprintf(&b, "%s of %s (%s):\n%s\n\n", what, r.Name, r.CallID, r.Output)
	}
	b.WriteString(m.Text)
	return model.Message{Role: m.Role, Text: strings.TrimSpace(b.String())}
}

// parseBlocks reads the calls of an answer's fenced blocks. A block that
// does not name exactly one tool or never closes is a badBlock call (a
// malformed call); its arguments are checked as any call's.
func parseBlocks(text string) []model.Call {
	var calls []model.Call
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		head := strings.TrimSpace(lines[i])
		if !strings.HasPrefix(head, fence) {
			continue
		}
		id := "text_" + strconv.Itoa(len(calls)+1)
		name := strings.Fields(strings.TrimPrefix(head, fence))
		end := -1
		for j := i + 1; j < len(lines); j++ {
			if strings.TrimSpace(lines[j]) == "```" {
				end = j
				break
			}
		}
		switch {
		case end < 0:
			calls = append(calls, malformedBlock(id, "the block never closes with a line ```"))
			return calls
		case len(name) != 1 || !strings.HasPrefix(head, fence+" "):
			calls = append(calls, malformedBlock(id, "the block's first line must be "+fence+" and one tool name"))
		default:
			calls = append(calls, model.Call{ID: id, Name: name[0], Args: strings.TrimSpace(strings.Join(lines[i+1:end], "\n"))})
		}
		i = end
	}
	return calls
}

func malformedBlock(id, problem string) model.Call {
	args, _ := json.Marshal(map[string]string{"problem": problem})
	return model.Call{ID: id, Name: badBlock, Args: string(args)}
}
