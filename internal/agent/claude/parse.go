// Package claude adapts Claude Code (`claude -p --output-format stream-json
// --verbose`) to drover: its command line and the events it prints.
package claude

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"time"

	"drover/internal/agent"
)

// line is the union of the stream-json line shapes drover reads.
type line struct {
	Type      string `json:"type"`
	Subtype   string `json:"subtype"`
	SessionID string `json:"session_id"`
	Message   struct {
		ID      string          `json:"id"` // one per model turn; its content blocks may come in several lines
		Content json.RawMessage `json:"content"`
	} `json:"message"`
	// result
	IsError        bool    `json:"is_error"`
	APIErrorStatus *int    `json:"api_error_status"`
	Result         string  `json:"result"`
	TotalCostUSD   float64 `json:"total_cost_usd"`
	Usage          *struct {
		InputTokens              int64 `json:"input_tokens"`
		OutputTokens             int64 `json:"output_tokens"`
		CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
		CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	} `json:"usage"`
	// rate_limit_event
	RateLimitInfo *struct {
		Status   string  `json:"status"`
		ResetsAt float64 `json:"resetsAt"` // unix seconds
	} `json:"rate_limit_info"`
}

type block struct {
	Type      string          `json:"type"`
	Text      string          `json:"text"`
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Input     json.RawMessage `json:"input"`
	ToolUseID string          `json:"tool_use_id"`
	Content   json.RawMessage `json:"content"` // a string or text blocks
	IsError   bool            `json:"is_error"`
}

// Parse maps one stream-json line to events.
func Parse(raw []byte) []agent.Event {
	var l line
	if err := json.Unmarshal(raw, &l); err != nil {
		return agent.Raw(raw)
	}
	switch l.Type {
	case "system":
		if l.Subtype == "init" && l.SessionID != "" {
			return []agent.Event{{Kind: agent.EventSession, Session: l.SessionID}}
		}
		return nil // api_retry and other notices are in the log already
	case "assistant", "user":
		var blocks []block
		if err := json.Unmarshal(l.Message.Content, &blocks); err != nil {
			// A user line may carry a plain string (the prompt itself).
			return nil
		}
		evs := blockEvents(blocks)
		if l.Type == "assistant" {
			evs = append([]agent.Event{{Kind: agent.EventTurn, Turn: l.Message.ID}}, evs...)
		}
		return evs
	case "result":
		return resultEvents(l)
	case "rate_limit_event":
		return rateLimitEvents(l)
	}
	return agent.Raw(raw)
}

func blockEvents(blocks []block) []agent.Event {
	var evs []agent.Event
	for _, b := range blocks {
		switch b.Type {
		case "text":
			evs = append(evs, agent.Event{Kind: agent.EventText, Text: b.Text})
		case "tool_use":
			evs = append(evs, agent.Event{Kind: agent.EventToolUse, Tool: b.Name, ToolID: b.ID, Input: b.Input})
		case "tool_result":
			evs = append(evs, agent.Event{Kind: agent.EventToolResult, ToolID: b.ToolUseID,
				Text: contentText(b.Content), IsError: b.IsError})
		}
	}
	return evs
}

// contentText flattens a tool result's content, which is a string or a
// list of blocks.
func contentText(c json.RawMessage) string {
	var s string
	if json.Unmarshal(c, &s) == nil {
		return s
	}
	var blocks []block
	if json.Unmarshal(c, &blocks) != nil {
		return string(c)
	}
	parts := make([]string, 0, len(blocks))
	for _, b := range blocks {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

func resultEvents(l line) []agent.Event {
	var evs []agent.Event
	if l.Usage != nil || l.TotalCostUSD != 0 {
		u := agent.Usage{CostUSD: l.TotalCostUSD}
		if l.Usage != nil {
			u.InputTokens = l.Usage.InputTokens
			u.OutputTokens = l.Usage.OutputTokens
			u.CacheReadTokens = l.Usage.CacheReadInputTokens
			u.CacheWriteTokens = l.Usage.CacheCreationInputTokens
		}
		evs = append(evs, agent.Event{Kind: agent.EventUsage, Usage: &u})
	}
	if !l.IsError {
		return append(evs, agent.Event{Kind: agent.EventOutcome, Outcome: &agent.Outcome{OK: true, Message: l.Result}})
	}
	msg := l.Result
	if l.APIErrorStatus != nil {
		msg = fmt.Sprintf("API error %d: %s", *l.APIErrorStatus, l.Result)
	}
	evs = append(evs, agent.Failed(Name, msg)...)
	for _, e := range evs {
		if e.Kind == agent.EventLimit {
			e.Limit.ResetsAt = statedReset(l.Result)
		}
	}
	return evs
}

// statedReset reads the reset time of a subscription's usage limit, which
// Claude Code prints as "Claude AI usage limit reached|<unix seconds>"; zero
// when the text has none.
func statedReset(text string) time.Time {
	_, after, ok := strings.Cut(text, "|")
	if !ok {
		return time.Time{}
	}
	secs, err := strconv.ParseInt(strings.TrimSpace(after), 10, 64)
	if err != nil || secs <= 0 || secs > maxResetUnix {
		return time.Time{}
	}
	return time.Unix(secs, 0).UTC()
}

// maxResetUnix is the last second of year 9999 (found by FuzzParse): a
// later reset time cannot be encoded as JSON, so the runner could neither
// save the limited account nor send a status listing it. A CLI's reset
// time beyond it is taken as none stated.
const maxResetUnix = 253402300799

func rateLimitEvents(l line) []agent.Event {
	if l.RateLimitInfo == nil || l.RateLimitInfo.Status != "rejected" {
		return nil // allowed or allowed_warning: the run goes on
	}
	lim := agent.Limit{Message: "claude: rate limit reached"}
	// Bounded before the conversion: a float over the int64 range
	// converts to an arbitrary time (see maxResetUnix).
	if l.RateLimitInfo.ResetsAt > 0 && l.RateLimitInfo.ResetsAt <= maxResetUnix {
		lim.ResetsAt = time.Unix(int64(l.RateLimitInfo.ResetsAt), 0).UTC()
		lim.Message += ", resets at " + lim.ResetsAt.Format(time.RFC3339)
	}
	return []agent.Event{{Kind: agent.EventLimit, Limit: &lim}}
}
