// Package codex adapts the Codex CLI (`codex exec --json`) to drover: its
// generated config, command line and the events it prints.
package codex

import (
	"encoding/json"

	"drover/internal/agent"
)

type line struct {
	Type     string `json:"type"`
	ThreadID string `json:"thread_id"`
	Item     *item  `json:"item"`
	Usage    *struct {
		InputTokens       int64 `json:"input_tokens"`
		CachedInputTokens int64 `json:"cached_input_tokens"`
		CacheWriteTokens  int64 `json:"cache_write_input_tokens"`
		OutputTokens      int64 `json:"output_tokens"`
	} `json:"usage"`
	Error *struct {
		Message string `json:"message"`
	} `json:"error"`
}

type item struct {
	ID      string `json:"id"`
	Type    string `json:"type"`
	Text    string `json:"text"`
	Message string `json:"message"`
	// command_execution
	Command          string `json:"command"`
	AggregatedOutput string `json:"aggregated_output"`
	ExitCode         *int   `json:"exit_code"`
	Status           string `json:"status"`
	// file_change
	Changes json.RawMessage `json:"changes"`
	// mcp_tool_call
	Server    string          `json:"server"`
	Tool      string          `json:"tool"`
	Arguments json.RawMessage `json:"arguments"`
}

// Parse maps one `codex exec --json` line to events.
func Parse(raw []byte) []agent.Event {
	var l line
	if err := json.Unmarshal(raw, &l); err != nil {
		return agent.Raw(raw)
	}
	switch l.Type {
	case "thread.started":
		if l.ThreadID != "" {
			return []agent.Event{{Kind: agent.EventSession, Session: l.ThreadID}}
		}
	case "turn.started":
		return nil
	case "item.started", "item.updated", "item.completed":
		if l.Item != nil {
			return itemEvents(l.Type, *l.Item)
		}
	case "turn.completed":
		u := agent.Usage{}
		if l.Usage != nil {
			u = agent.Usage{InputTokens: l.Usage.InputTokens, OutputTokens: l.Usage.OutputTokens,
				CacheReadTokens: l.Usage.CachedInputTokens, CacheWriteTokens: l.Usage.CacheWriteTokens}
		}
		return []agent.Event{{Kind: agent.EventUsage, Usage: &u}, {Kind: agent.EventOutcome, Outcome: &agent.Outcome{OK: true}}}
	case "turn.failed":
		msg := "turn failed"
		if l.Error != nil && l.Error.Message != "" {
			msg = l.Error.Message
		}
		return agent.Failed(Name, msg)
	}
	// Top-level "error" lines precede turn.failed (or are retry notices);
	// they stay in the log as they are.
	return agent.Raw(raw)
}

func itemEvents(phase string, it item) []agent.Event {
	switch it.Type {
	case "agent_message":
		if phase == "item.completed" {
			return []agent.Event{{Kind: agent.EventText, Text: it.Text}}
		}
	case "command_execution", "file_change", "mcp_tool_call", "web_search":
		switch phase {
		case "item.started":
			return []agent.Event{{Kind: agent.EventToolUse, ToolID: it.ID, Tool: toolName(it), Input: toolInput(it)}}
		case "item.completed":
			text := it.AggregatedOutput
			if it.Type == "file_change" {
				text = string(it.Changes)
			}
			failed := it.Status == "failed" || (it.ExitCode != nil && *it.ExitCode != 0)
			return []agent.Event{{Kind: agent.EventToolResult, ToolID: it.ID, Tool: toolName(it), Text: text, IsError: failed}}
		}
	}
	// reasoning, todo lists, updates and warning items ("error" items such
	// as unknown model metadata) carry nothing drover acts on.
	return nil
}

func toolName(it item) string {
	if it.Type == "mcp_tool_call" {
		return it.Server + "." + it.Tool
	}
	return it.Type
}

func toolInput(it item) json.RawMessage {
	switch it.Type {
	case "command_execution":
		in, _ := json.Marshal(struct {
			Command string `json:"command"`
		}{it.Command})
		return in
	case "mcp_tool_call":
		return it.Arguments
	case "file_change":
		return it.Changes
	}
	return nil
}
