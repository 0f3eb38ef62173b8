package model

import "context"

// probeTool is the one tool a probe offers.
const probeTool = "probe"

// Found is what a probe found a model endpoint does.
type Found struct {
	// ToolCalls: asked to call a tool, the model did, with arguments that
	// are a JSON object. The native agent needs it (a text protocol for
	// models without is not there yet).
	ToolCalls bool
	Usage     Usage
}

// Probe asks p once, with a tiny request, to call a tool. An error is the
// call's (an *Error); a model that answers in text instead is no error.
func Probe(ctx context.Context, p Provider) (Found, error) {
	r, err := p.Complete(ctx, Request{
		System:    "You are a capability probe. Answer with the tool call you are asked for and nothing else.",
		Messages:  []Message{{Role: User, Text: `Call the tool "probe" with {"ok": true}.`}},
		Tools:     []Tool{{Name: probeTool, Description: "Answer the probe.", Schema: map[string]any{"type": "object", "properties": map[string]any{"ok": map[string]any{"type": "boolean"}}, "required": []string{"ok"}}}},
		MaxTokens: 256,
	})
	if err != nil {
		return Found{}, err
	}
	f := Found{Usage: r.Usage}
	for _, c := range r.Calls {
		if _, err := ArgsObject(c.Args); c.Name == probeTool && err == nil {
			f.ToolCalls = true
		}
	}
	return f, nil
}

// String says what f means for the native agent.
func (f Found) String() string {
	if f.ToolCalls {
		return "takes native tool calls"
	}
	return "answered without a tool call: the native agent needs tool calling " +
		"(vLLM: --enable-auto-tool-choice --tool-call-parser NAME; llama.cpp: --jinja; an Ollama model with tools)"
}
