package model

import (
	"context"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/responses"
	"github.com/openai/openai-go/v3/shared"
)

// responsesCaller speaks the OpenAI Responses API, streamed, stateless
// (store false: the transcript travels with every call, as on the other
// protocols, so a resume needs nothing the provider kept).
type responsesCaller struct {
	client openai.Client
	model  string
}

func newResponses(cfg Config) *responsesCaller {
	return &responsesCaller{client: newOpenAIClient(cfg), model: cfg.Model}
}

func (c *responsesCaller) once(ctx context.Context, req Request) (Response, error) {
	params := responses.ResponseNewParams{
		Model:           shared.ResponsesModel(c.model),
		MaxOutputTokens: openai.Int(req.MaxTokens),
		Store:           openai.Bool(false),
	}
	if req.System != "" {
		params.Instructions = openai.String(req.System)
	}
	if req.CacheKey != "" {
		params.PromptCacheKey = openai.String(req.CacheKey)
	}
	for _, t := range req.Tools {
		tp := responses.ToolParamOfFunction(t.Name, t.Schema, false)
		if t.Description != "" {
			tp.OfFunction.Description = openai.String(t.Description)
		}
		params.Tools = append(params.Tools, tp)
	}
	var input responses.ResponseInputParam
	for _, m := range req.Messages {
		for _, r := range m.Results {
			item := responses.ResponseInputItemParamOfFunctionCallOutput(r.Output)
			item.OfFunctionCallOutput.CallID = openai.String(WireID(r.CallID))
			input = append(input, item)
		}
		role := responses.EasyInputMessageRoleUser
		if m.Role == Assistant {
			role = responses.EasyInputMessageRoleAssistant
		}
		if m.Text != "" {
			input = append(input, responses.ResponseInputItemParamOfMessage(m.Text, role))
		}
		for _, call := range m.Calls {
			input = append(input, responses.ResponseInputItemParamOfFunctionCall(call.Args, WireID(call.ID), call.Name))
		}
	}
	params.Input = responses.ResponseNewParamsInputUnion{OfInputItemList: input}
	stream := c.client.Responses.NewStreaming(ctx, params)
	defer stream.Close()
	var r Response
	var text []string
	var final *responses.Response
	for stream.Next() {
		ev := stream.Current()
		switch ev.Type {
		case "response.output_item.done":
			switch it := ev.Item; it.Type {
			case "function_call":
				r.Calls = append(r.Calls, Call{ID: it.CallID, Name: it.Name, Args: it.Arguments.OfString})
			case "message":
				for _, part := range it.Content {
					if part.Type == "output_text" {
						text = append(text, part.Text)
					}
				}
			}
		case "response.completed", "response.incomplete":
			resp := ev.Response
			final = &resp
		case "response.failed", "error":
			return Response{}, errGarbled
		}
	}
	if err := stream.Err(); err != nil {
		return Response{}, openAIStreamErr(err)
	}
	if final == nil {
		return Response{}, errGarbled
	}
	r.Text = strings.TrimSpace(strings.Join(text, "\n"))
	switch {
	case final.Status == "incomplete" && final.IncompleteDetails.Reason == "max_output_tokens":
		r.Stop = StopLength
	case len(r.Calls) > 0:
		r.Stop = StopTools
	default:
		r.Stop = StopEnd
	}
	u := final.Usage
	cached := u.InputTokensDetails.CachedTokens
	r.Usage = Usage{InputTokens: u.InputTokens - cached, OutputTokens: u.OutputTokens, CacheReadTokens: cached}
	return r, nil
}
