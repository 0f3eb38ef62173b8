package model

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"mime"
	"net/http"
	"strings"

	"github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"
	"github.com/openai/openai-go/v3/shared"
)

// chatCaller speaks OpenAI Chat Completions, streamed: OpenAI itself and
// every OpenAI-compatible server.
type chatCaller struct {
	client openai.Client
	model  string
	// base, key and http reach the server's own API (servedContext).
	base string
	key  string
	http *http.Client
}

func newChat(cfg Config) *chatCaller {
	return &chatCaller{client: newOpenAIClient(cfg), model: cfg.Model, base: cfg.BaseURL, key: cfg.Key, http: cfg.HTTP}
}

// newOpenAIClient is the client of both OpenAI protocols: no retries of
// its own (the shared path decides them).
func newOpenAIClient(cfg Config) openai.Client {
	opts := []option.RequestOption{option.WithHTTPClient(cfg.HTTP), option.WithMaxRetries(0)}
	if cfg.Key != "" {
		opts = append(opts, option.WithAPIKey(cfg.Key))
	} else {
		// A local server without a key: the SDK wants one all the same.
		opts = append(opts, option.WithAPIKey("none"))
	}
	if cfg.BaseURL != "" {
		opts = append(opts, option.WithBaseURL(cfg.BaseURL+"/"))
	}
	return openai.NewClient(opts...)
}

// openAIStreamErr is an openai-go stream's error for the shared path: an
// HTTP error as a statusError, anything else (transport) as it is.
func openAIStreamErr(err error) error {
	var oe *openai.Error
	if errors.As(err, &oe) {
		return httpErr(oe.StatusCode, oe.Response, oe.DumpResponse(true))
	}
	return err
}

func (c *chatCaller) once(ctx context.Context, req Request) (Response, error) {
	params := openai.ChatCompletionNewParams{
		Model:               shared.ChatModel(c.model),
		MaxCompletionTokens: openai.Int(req.MaxTokens),
		StreamOptions:       openai.ChatCompletionStreamOptionsParam{IncludeUsage: openai.Bool(true)},
	}
	if req.System != "" {
		params.Messages = append(params.Messages, openai.SystemMessage(req.System))
	}
	for _, t := range req.Tools {
		fd := shared.FunctionDefinitionParam{Name: t.Name, Parameters: shared.FunctionParameters(t.Schema)}
		if t.Description != "" {
			fd.Description = openai.String(t.Description)
		}
		params.Tools = append(params.Tools, openai.ChatCompletionFunctionTool(fd))
	}
	for _, m := range req.Messages {
		for _, r := range m.Results {
			params.Messages = append(params.Messages, openai.ToolMessage(r.Output, WireID(r.CallID)))
		}
		if m.Role == Assistant {
			am := openai.ChatCompletionAssistantMessageParam{}
			if m.Text != "" {
				am.Content.OfString = openai.String(m.Text)
			}
			for _, call := range m.Calls {
				am.ToolCalls = append(am.ToolCalls, openai.ChatCompletionMessageToolCallUnionParam{
					OfFunction: &openai.ChatCompletionMessageFunctionToolCallParam{ID: WireID(call.ID),
						Function: openai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: call.Name, Arguments: call.Args}}})
			}
			params.Messages = append(params.Messages, openai.ChatCompletionMessageParamUnion{OfAssistant: &am})
		} else if m.Text != "" {
			params.Messages = append(params.Messages, openai.UserMessage(m.Text))
		}
	}
	var cc *openai.ChatCompletion
	whole := false
	if req.NoStream {
		params.StreamOptions = openai.ChatCompletionStreamOptionsParam{}
		var err error
		if cc, err = c.client.Chat.Completions.New(ctx, params); err != nil {
			return Response{}, openAIStreamErr(err)
		}
	} else {
		var err error
		if cc, whole, err = c.stream(ctx, params); err != nil {
			return Response{}, err
		}
	}
	if len(cc.Choices) == 0 || cc.Choices[0].FinishReason == "" {
		// No finish_reason: the answer was cut mid-way.
		return Response{}, errGarbled
	}
	ch := cc.Choices[0]
	r := Response{Text: strings.TrimSpace(ch.Message.Content), Whole: whole}
	for _, tc := range ch.Message.ToolCalls {
		r.Calls = append(r.Calls, Call{ID: tc.ID, Name: tc.Function.Name, Args: tc.Function.Arguments})
	}
	switch ch.FinishReason {
	case "tool_calls", "function_call":
		r.Stop = StopTools
	case "length":
		r.Stop = StopLength
	default:
		r.Stop = StopEnd
		if len(r.Calls) > 0 {
			// Some local servers say "stop" after tool calls.
			r.Stop = StopTools
		}
	}
	u := cc.Usage
	cached := u.PromptTokensDetails.CachedTokens
	r.Usage = Usage{InputTokens: u.PromptTokens - cached, OutputTokens: u.CompletionTokens, CacheReadTokens: cached}
	return r, nil
}

// maxWhole bounds a whole answer read in place of a stream.
const maxWhole = 16 << 20

// stream makes the call streamed and gathers the answer. A server that
// answers with a whole JSON body instead (some local servers and gateways
// do when the request carries tools) has that answer taken as it is;
// whole says so.
func (c *chatCaller) stream(ctx context.Context, params openai.ChatCompletionNewParams) (cc *openai.ChatCompletion, whole bool, err error) {
	var body []byte
	catch := option.WithMiddleware(func(req *http.Request, next option.MiddlewareNext) (*http.Response, error) {
		resp, err := next(req)
		if err != nil || resp.StatusCode != http.StatusOK {
			return resp, err
		}
		if mt, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type")); mt != "application/json" {
			return resp, nil
		}
		b, rerr := io.ReadAll(io.LimitReader(resp.Body, maxWhole))
		resp.Body.Close()
		if rerr != nil {
			return nil, rerr
		}
		body, resp.Body = b, io.NopCloser(strings.NewReader(""))
		return resp, nil
	})
	stream := c.client.Chat.Completions.NewStreaming(ctx, params, catch)
	defer stream.Close()
	var acc openai.ChatCompletionAccumulator
	for stream.Next() {
		if !acc.AddChunk(stream.Current()) {
			return nil, false, errGarbled
		}
	}
	if err := stream.Err(); err != nil {
		return nil, false, openAIStreamErr(err)
	}
	if body != nil {
		var w openai.ChatCompletion
		if err := json.Unmarshal(body, &w); err != nil {
			return nil, false, errGarbled
		}
		return &w, true, nil
	}
	return &acc.ChatCompletion, false, nil
}
