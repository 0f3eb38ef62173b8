package model

import (
	"context"
	"errors"
	"fmt"
)

// probeTool is the one tool a probe offers.
const probeTool = "probe"

// Found is what a probe found a model endpoint does: how the native agent
// talks to it.
type Found struct {
	// ToolCalls: asked to call a tool, the model did, with arguments that
	// are a JSON object (streamed or whole). Without, the native agent
	// uses its text protocol.
	ToolCalls bool
	// StreamedToolCalls: it did so in a streamed answer too. A stream
	// whose call arrives broken or empty (Ollama's have), or a streamed
	// request answered whole, counts as not.
	StreamedToolCalls bool
	// ContextLength is the context in tokens the server says it serves
	// the model with; 0: it says none (the account's window stands).
	ContextLength int64
	Usage         Usage
}

// contextServer is a caller that can ask its server for the context
// length it serves.
type contextServer interface {
	servedContext(ctx context.Context) int64
}

// Probe asks p with tiny requests to call a tool, streamed and, when that
// fails, whole, and asks its server for the context length it serves. An
// error is the calls' (an *Error); a model that answers in text instead,
// or whose server refuses tools (KindNoTools), is no error.
func Probe(ctx context.Context, p Provider) (Found, error) {
	var f Found
	streamed, err := probeCall(ctx, p, false, &f.Usage)
	var me *Error
	switch {
	case err != nil && errors.As(err, &me) && me.Kind == KindNoTools:
		return f, nil
	case err != nil && (me == nil || me.Kind != KindTransport):
		return Found{}, err
	}
	f.ToolCalls, f.StreamedToolCalls = streamed, streamed
	if !streamed {
		// A broken stream or no call: try whole.
		if f.ToolCalls, err = probeCall(ctx, p, true, &f.Usage); err != nil {
			return Found{}, err
		}
	}
	if pp, ok := p.(*provider); ok {
		if cs, ok := pp.call.(contextServer); ok {
			f.ContextLength = cs.servedContext(ctx)
		}
	}
	return f, nil
}

// probeCall asks p once to call the probe tool and says whether it did.
func probeCall(ctx context.Context, p Provider, whole bool, u *Usage) (bool, error) {
	r, err := p.Complete(ctx, Request{
		System:    "You are a capability probe. Answer with the tool call you are asked for and nothing else.",
		Messages:  []Message{{Role: User, Text: `Call the tool "probe" with {"ok": true}.`}},
		Tools:     []Tool{{Name: probeTool, Description: "Answer the probe.", Schema: map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}, "required": []string{"ok"}}}},
		MaxTokens: 256,
		NoStream:  whole,
	})
	if err != nil {
		return false, err
	}
	*u = u.Add(r.Usage)
	for _, c := range r.Calls {
		if _, err := ArgsObject(c.Args); c.Name == probeTool && err == nil {
			// A streamed request answered whole did not stream its call.
			return whole || !r.Whole, nil
		}
	}
	return false, nil
}

// String says what f means for the native agent.
func (f Found) String() string {
	s := "takes native tool calls"
	switch {
	case !f.ToolCalls:
		s = "answered without a tool call: the native agent uses its text protocol " +
			"(for native calls, vLLM: --enable-auto-tool-choice --tool-call-parser NAME; llama.cpp: --jinja; an Ollama model with tools)"
	case !f.StreamedToolCalls:
		s = "takes native tool calls, but not streamed: the native agent asks for whole answers"
	}
	if f.ContextLength > 0 {
		s += fmt.Sprintf("; serves a context of %d tokens", f.ContextLength)
	}
	return s
}
