package model

import (
	"context"
	"encoding/json"
	"errors"
	"strings"

	"github.com/anthropics/anthropic-sdk-go/v2"
	"github.com/anthropics/anthropic-sdk-go/v2/option"
)

// anthropicCaller speaks Anthropic Messages, streamed.
type anthropicCaller struct {
	client anthropic.Client
	model  string
}

func newAnthropic(cfg Config) *anthropicCaller {
	opts := []option.RequestOption{option.WithAPIKey(cfg.Key), option.WithHTTPClient(cfg.HTTP), option.WithMaxRetries(0)}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL+"/"))
	}
	return &anthropicCaller{client: anthropic.NewClient(opts...), model: cfg.Model}
}

func (c *anthropicCaller) once(ctx context.Context, req Request) (Response, error) {
	params := anthropic.MessageNewParams{Model: anthropic.Model(c.model), MaxTokens: req.MaxTokens}
	if req.System != "" {
		params.System = []anthropic.TextBlockParam{{Text: req.System}}
		if req.CacheKey != "" {
			// The stable prefix: tools, then the system text.
			params.System[0].CacheControl = anthropic.NewCacheControlEphemeralParam()
		}
	}
	for _, t := range req.Tools {
		schema := anthropic.ToolInputSchemaParam{Properties: t.Schema["properties"]}
		if r, ok := t.Schema["required"].([]string); ok {
			schema.Required = r
		}
		tp := anthropic.ToolParam{Name: t.Name, InputSchema: schema}
		if t.Description != "" {
			tp.Description = anthropic.String(t.Description)
		}
		params.Tools = append(params.Tools, anthropic.ToolUnionParam{OfTool: &tp})
	}
	for i, m := range req.Messages {
		var blocks []anthropic.ContentBlockParamUnion
		for _, r := range m.Results {
			blocks = append(blocks, anthropic.NewToolResultBlock(WireID(r.CallID), r.Output, r.IsError))
		}
		if m.Text != "" {
			blocks = append(blocks, anthropic.NewTextBlock(m.Text))
		}
		for _, call := range m.Calls {
			var input any = json.RawMessage(call.Args)
			if !json.Valid([]byte(call.Args)) {
				// Sent back as the model wrote it would be refused.
				input = map[string]any{}
			}
			blocks = append(blocks, anthropic.NewToolUseBlock(WireID(call.ID), input, call.Name))
		}
		if len(blocks) == 0 {
			blocks = append(blocks, anthropic.NewTextBlock("(empty)"))
		}
		if req.CacheKey != "" && i == len(req.Messages)-1 {
			// The moving tail: the next call reads the conversation so
			// far from the cache and writes only what it adds.
			if cc := blocks[len(blocks)-1].GetCacheControl(); cc != nil {
				*cc = anthropic.NewCacheControlEphemeralParam()
			}
		}
		if m.Role == Assistant {
			params.Messages = append(params.Messages, anthropic.NewAssistantMessage(blocks...))
		} else {
			params.Messages = append(params.Messages, anthropic.NewUserMessage(blocks...))
		}
	}
	stream := c.client.Messages.NewStreaming(ctx, params)
	defer stream.Close()
	var msg anthropic.Message
	stopped := false
	for stream.Next() {
		ev := stream.Current()
		if err := msg.Accumulate(ev); err != nil {
			return Response{}, errGarbled
		}
		if ev.Type == "message_stop" {
			stopped = true
		}
	}
	if err := stream.Err(); err != nil {
		var ae *anthropic.Error
		if errors.As(err, &ae) {
			return Response{}, httpErr(ae.StatusCode, ae.Response, ae.DumpResponse(true))
		}
		return Response{}, err
	}
	if !stopped {
		return Response{}, errGarbled
	}
	var r Response
	var text []string
	for _, b := range msg.Content {
		switch b.Type {
		case "text":
			text = append(text, b.Text)
		case "tool_use":
			r.Calls = append(r.Calls, Call{ID: b.ID, Name: b.Name, Args: string(b.Input)})
		}
	}
	r.Text = strings.Join(text, "\n")
	switch msg.StopReason {
	case anthropic.StopReasonToolUse:
		r.Stop = StopTools
	case anthropic.StopReasonMaxTokens:
		r.Stop = StopLength
	default:
		r.Stop = StopEnd
	}
	u := msg.Usage
	r.Usage = Usage{InputTokens: u.InputTokens, OutputTokens: u.OutputTokens,
		CacheReadTokens: u.CacheReadInputTokens, CacheWriteTokens: u.CacheCreationInputTokens}
	return r, nil
}
