// Package model is drover's one contract with a model API: a Provider
// takes a conversation and the tools on offer and answers one assistant
// turn. Anthropic Messages, OpenAI Chat Completions and any
// OpenAI-compatible server (Ollama, vLLM, llama.cpp) sit behind it on the
// official SDKs (OpenAI itself on the Responses API), and share one path for tool calls, usage, timeouts,
// retries (transport errors only) and error redaction (see Error).
package model

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"time"

	"drover/internal/agent/facts"
	"drover/internal/protocol"
	"drover/internal/retry"
	"drover/internal/rules"
)

// Provider kinds an account may name (package facts lists them).
const (
	Anthropic        = facts.Anthropic
	OpenAI           = facts.OpenAI
	OpenAICompatible = facts.OpenAICompatible
)

// Providers are the provider kinds, in the order drover lists them.
func Providers() []string { return facts.Providers() }

// Role is who said a message.
type Role string

const (
	User      Role = "user"
	Assistant Role = "assistant"
)

// Message is one turn of the conversation. An assistant message holds text
// and tool calls; a user message text and the results of the calls of the
// assistant message before it.
type Message struct {
	Role    Role     `json:"role"`
	Text    string   `json:"text,omitempty"`
	Calls   []Call   `json:"calls,omitempty"`
	Results []Result `json:"results,omitempty"`
}

// Call is a tool call the model made. Args is what it sent, which need not
// be valid JSON: the caller checks it.
type Call struct {
	ID   string `json:"id"`
	Name string `json:"name"`
	Args string `json:"args"`
}

// Result is what a tool call gave back.
type Result struct {
	CallID  string `json:"call_id"`
	Name    string `json:"name"`
	Output  string `json:"output"`
	IsError bool   `json:"is_error,omitempty"`
}

// Tool is a tool the model may call; Schema is its arguments' JSON schema
// (an object).
type Tool struct {
	Name        string
	Description string
	Schema      map[string]any
}

// Request is one model call.
type Request struct {
	System    string
	Messages  []Message
	Tools     []Tool
	MaxTokens int64 // the answer's limit; 0: DefaultMaxTokens
	// CacheKey names the conversation (the session) for the provider's
	// prompt cache: Anthropic gets breakpoints on the stable prefix (tools
	// and system text) and the moving tail, OpenAI's Responses API
	// prompt_cache_key. "" sets no cache hints.
	CacheKey string
	// NoStream asks for the answer whole rather than streamed, on
	// OpenAI-compatible servers whose streamed tool calls break (Ollama's
	// have); the other providers always stream.
	NoStream bool
}

// DefaultMaxTokens bounds one answer when the request names no limit.
const DefaultMaxTokens = 8192

// Stop is why the model stopped.
type Stop string

const (
	StopEnd    Stop = "end"    // it answered
	StopTools  Stop = "tools"  // it wants its tool calls run
	StopLength Stop = "length" // it hit the token limit mid-answer
)

// Response is the model's turn.
type Response struct {
	Text  string
	Calls []Call
	Stop  Stop
	Usage Usage
	// Whole: the request was streamed and the server answered it whole
	// (a JSON body); the next ones are better asked for whole.
	Whole bool
}

// Message is the response as a message of the conversation.
func (r Response) Message() Message { return Message{Role: Assistant, Text: r.Text, Calls: r.Calls} }

// Usage is what a call consumed.
type Usage = protocol.Usage

// Provider answers model calls. Complete returns an *Error for every
// failure the provider or the transport caused.
type Provider interface {
	Complete(ctx context.Context, req Request) (Response, error)
}

// Config is one account's model endpoint, from the runner's operator.
type Config struct {
	Provider string // Anthropic, OpenAI or OpenAICompatible
	// BaseURL is the API root (for OpenAI kinds with its /v1); empty: the
	// vendor's. OpenAICompatible needs one.
	BaseURL string
	Model   string
	Key     string // a secret: it never appears in an error or a log line
	// HTTP is the client calls go through; nil: http.DefaultClient's
	// transport.
	HTTP *http.Client
	// Timeout bounds one call, streaming included (default 5 minutes).
	Timeout time.Duration
	// Retries is how often a call that failed in transport (no answer, a
	// cut or garbled stream) is tried again (default 2; negative: never).
	Retries int
	// RetryWait is the wait before the first retry, doubled for each next
	// one (default 1s).
	RetryWait time.Duration
	Logger    *slog.Logger
}

// DefaultModel is the model of a provider an account that names none uses.
func DefaultModel(provider string) string { return facts.DefaultModel(provider) }

// New is the provider cfg describes.
func New(cfg Config) (Provider, error) {
	if cfg.Model == "" {
		cfg.Model = DefaultModel(cfg.Provider)
	}
	if cfg.Model == "" {
		return nil, fmt.Errorf("model provider %s: no model (give the account --model)", cfg.Provider)
	}
	u, err := rules.CheckBaseURL(cfg.BaseURL)
	if err != nil {
		return nil, fmt.Errorf("model provider %s: %w", cfg.Provider, err)
	}
	cfg.BaseURL = u
	if cfg.Timeout <= 0 {
		cfg.Timeout = 5 * time.Minute
	}
	if cfg.Retries == 0 {
		cfg.Retries = 2
	}
	if cfg.RetryWait <= 0 {
		cfg.RetryWait = time.Second
	}
	if cfg.HTTP == nil {
		cfg.HTTP = &http.Client{}
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.Default()
	}
	var call caller
	switch cfg.Provider {
	case Anthropic:
		call = newAnthropic(cfg)
	case OpenAI:
		call = newResponses(cfg)
	case OpenAICompatible:
		if cfg.BaseURL == "" {
			return nil, fmt.Errorf("model provider %s: needs a base URL (give the account --base-url)", cfg.Provider)
		}
		call = newChat(cfg)
	default:
		return nil, fmt.Errorf("model provider %q: want one of %s", cfg.Provider, strings.Join(Providers(), ", "))
	}
	return &provider{cfg: cfg, call: call}, nil
}

// caller makes one attempt at a call on one wire protocol; errors are the
// SDK's, classified by provider.Complete.
type caller interface {
	once(ctx context.Context, req Request) (Response, error)
}

// provider is the shared path: timeout, retries, redaction, cost.
type provider struct {
	cfg  Config
	call caller
}

func (p *provider) Complete(ctx context.Context, req Request) (Response, error) {
	if req.MaxTokens <= 0 {
		req.MaxTokens = DefaultMaxTokens
	}
	var resp Response
	pol := retry.Policy{First: p.cfg.RetryWait, Tries: max(p.cfg.Retries, 0) + 1,
		OnRetry: func(try int, err error, _ time.Duration) {
			p.cfg.Logger.Warn("model call failed in transport; retrying", "provider", p.cfg.Provider,
				"try", try, "err", err.Error())
		}}
	err := retry.Do(ctx, pol, func(ctx context.Context) error {
		cctx, cancel := context.WithTimeout(ctx, p.cfg.Timeout)
		r, err := p.call.once(cctx, req)
		cancel()
		if err == nil {
			err = checkResponse(r)
		}
		if err == nil {
			resp = r
			return nil
		}
		e := p.classify(ctx, err)
		if e.Kind != KindTransport {
			return retry.Permanent(e)
		}
		return e
	})
	if err != nil {
		if ctx.Err() != nil { // cancelled, perhaps during the wait: say so
			return Response{}, p.classify(ctx, ctx.Err())
		}
		return Response{}, err
	}
	resp.Usage.CostUSD = Cost(p.cfg.Model, resp.Usage)
	return resp, nil
}

// checkResponse refuses an answer no loop can use: tool calls without a
// name or id (a garbled stream).
func checkResponse(r Response) error {
	for _, c := range r.Calls {
		if c.Name == "" || c.ID == "" {
			return errGarbled
		}
	}
	if r.Stop == StopTools && len(r.Calls) == 0 {
		return errGarbled
	}
	return nil
}

var errGarbled = garbled{}

type garbled struct{}

func (garbled) Error() string { return "the answer was cut off or garbled" }

// ArgsObject decodes a call's arguments as a JSON object ("" is {}).
func ArgsObject(args string) (map[string]any, error) {
	if strings.TrimSpace(args) == "" {
		return map[string]any{}, nil
	}
	var m map[string]any
	if err := json.Unmarshal([]byte(args), &m); err != nil {
		return nil, err
	}
	return m, nil
}

// WireID is the tool-call id a provider is sent for id, the same for the
// call and its result: the id itself when every provider takes it (1-40
// letters, digits, '_' and '-'), else one derived from it. A transcript
// that moves to another provider (a fallback account) keeps its calls
// paired whatever ids the first one made.
func WireID(id string) string {
	ok := len(id) >= 1 && len(id) <= 40
	for i := 0; ok && i < len(id); i++ {
		c := id[i]
		ok = c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-'
	}
	if ok {
		return id
	}
	sum := sha256.Sum256([]byte(id))
	return "call_" + hex.EncodeToString(sum[:16])
}
