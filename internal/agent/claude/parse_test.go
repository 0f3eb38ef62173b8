package claude

import (
	"path/filepath"
	"strings"
	"testing"
	"time"

	"drover/internal/agent"
	"drover/internal/agent/agenttest"
)

func TestParseSamples(t *testing.T) {
	tests := []struct {
		file    string
		kinds   string
		session string
		usage   agent.Usage
		ok      bool
		message string
	}{
		{"claude-stream-json.jsonl", "session turn text turn tool_use tool_result turn text usage outcome",
			"6710a4b5-3c87-486a-b50a-770055a78eaa", agent.Usage{InputTokens: 20, OutputTokens: 10, CostUSD: 0.00035},
			true, "Done: created hello.txt containing hi."},
		{"claude-mcp.jsonl", "session turn tool_use tool_result turn text usage outcome",
			"a98626d1-ab32-48d6-b091-0eb108313394", agent.Usage{InputTokens: 20, OutputTokens: 10, CostUSD: 0.00035},
			true, "Done: created hello.txt containing hi."},
		{"claude-disallowed-tool.jsonl", "session turn tool_use tool_result turn text usage outcome",
			"0ef48b93-548d-4b22-9a4c-19ac053b60e8", agent.Usage{InputTokens: 20, OutputTokens: 10, CostUSD: 0.00035},
			true, "Done: created hello.txt containing hi."},
		{"claude-401-error.jsonl", "session turn text usage outcome",
			"b481b938-87b0-4e77-bf61-7d874750e4d4", agent.Usage{},
			false, "claude: API error 401: Failed to authenticate. API Error: 401 fake authentication_error"},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			evs, sum := agenttest.ScanFile(t, filepath.Join("testdata", tt.file), Parse)
			if got := agenttest.Kinds(evs); got != tt.kinds {
				t.Errorf("kinds = %q, want %q", got, tt.kinds)
			}
			if sum.Session != tt.session {
				t.Errorf("session = %q, want %q", sum.Session, tt.session)
			}
			if sum.Usage != tt.usage {
				t.Errorf("usage = %+v, want %+v", sum.Usage, tt.usage)
			}
			if sum.Outcome == nil || sum.Outcome.OK != tt.ok || sum.Outcome.Message != tt.message {
				t.Errorf("outcome = %+v, want ok=%v %q", sum.Outcome, tt.ok, tt.message)
			}
			// The 401 sample is the provider refusing the key.
			if wantRefused := tt.file == "claude-401-error.jsonl"; sum.Outcome != nil && sum.Outcome.Refused != wantRefused {
				t.Errorf("outcome refused = %v, want %v", sum.Outcome.Refused, wantRefused)
			}
			if sum.Limit != nil {
				t.Errorf("limit = %+v, want none", sum.Limit)
			}
		})
	}
}

// withoutTurns drops turn events, counting their distinct names.
func withoutTurns(evs []agent.Event) ([]agent.Event, int) {
	var out []agent.Event
	turns := map[string]bool{}
	for _, e := range evs {
		if e.Kind == agent.EventTurn {
			turns[e.Turn] = true
			continue
		}
		out = append(out, e)
	}
	return out, len(turns)
}

func TestParseToolEvents(t *testing.T) {
	evs, _ := agenttest.ScanFile(t, filepath.Join("testdata", "claude-mcp.jsonl"), Parse)
	evs, turns := withoutTurns(evs)
	if turns != 2 {
		t.Errorf("%d turns, want 2 (the tool call and the answer)", turns)
	}
	use, res := evs[1], evs[2]
	if use.Tool != "mcp__probe__echo" || string(use.Input) != `{"text":"hello-from-model"}` {
		t.Errorf("tool use = %+v", use)
	}
	if res.ToolID != use.ToolID || res.Text != "echo: hello-from-model" || res.IsError {
		t.Errorf("tool result = %+v", res)
	}
	evs, _ = agenttest.ScanFile(t, filepath.Join("testdata", "claude-disallowed-tool.jsonl"), Parse)
	evs, _ = withoutTurns(evs)
	if !evs[2].IsError || !strings.Contains(evs[2].Text, "No such tool available: Bash") {
		t.Errorf("disallowed tool result = %+v", evs[2])
	}
}

func TestParseLines(t *testing.T) {
	reset := time.Date(2026, 11, 30, 5, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		line  string
		kinds string
		limit *agent.Limit
		msg   string // outcome message, if any
	}{
		{"rejected rate limit", `{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1796014800}}`,
			"limit", &agent.Limit{ResetsAt: reset, Message: "claude: rate limit reached, resets at 2026-11-30T05:00:00Z"}, ""},
		{"rejected without reset", `{"type":"rate_limit_event","rate_limit_info":{"status":"rejected"}}`,
			"limit", &agent.Limit{Message: "claude: rate limit reached"}, ""},
		{"allowed rate limit", `{"type":"rate_limit_event","rate_limit_info":{"status":"allowed","resetsAt":1796014800}}`, "", nil, ""},
		{"429 result", `{"type":"result","is_error":true,"api_error_status":429,"result":"API Error: 429 rate_limit_error","total_cost_usd":0}`,
			"limit outcome", &agent.Limit{Message: "API error 429: API Error: 429 rate_limit_error"}, "claude: API error 429: API Error: 429 rate_limit_error"},
		{"usage limit text", `{"type":"result","is_error":true,"result":"Claude AI usage limit reached|1796014800"}`,
			"limit outcome", &agent.Limit{ResetsAt: reset, Message: "Claude AI usage limit reached|1796014800"}, "claude: Claude AI usage limit reached|1796014800"},
		{"billing", `{"type":"result","is_error":true,"api_error_status":400,"result":"Credit balance is too low"}`,
			"limit outcome", &agent.Limit{Message: "API error 400: Credit balance is too low"}, "claude: API error 400: Credit balance is too low"},
		{"auth error", `{"type":"result","is_error":true,"api_error_status":401,"result":"Invalid API key"}`,
			"outcome", nil, "claude: API error 401: Invalid API key"},
		{"api retry", `{"type":"system","subtype":"api_retry","attempt":1}`, "", nil, ""},
		{"user prompt string", `{"type":"user","message":{"role":"user","content":"hi"}}`, "", nil, ""},
		{"malformed", `{"type":"assistant",`, "raw", nil, ""},
		{"not json", `Error: something broke`, "raw", nil, ""},
		{"unknown type", `{"type":"stream_event","event":{}}`, "raw", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			evs := Parse([]byte(tt.line))
			if got := agenttest.Kinds(evs); got != tt.kinds {
				t.Fatalf("kinds = %q, want %q", got, tt.kinds)
			}
			for _, e := range evs {
				switch e.Kind {
				case agent.EventLimit:
					if *e.Limit != *tt.limit {
						t.Errorf("limit = %+v, want %+v", *e.Limit, *tt.limit)
					}
				case agent.EventOutcome:
					if e.Outcome.OK || e.Outcome.Message != tt.msg {
						t.Errorf("outcome = %+v, want error %q", *e.Outcome, tt.msg)
					}
				case agent.EventRaw:
					if e.Text != tt.line {
						t.Errorf("raw = %q, want the line", e.Text)
					}
				}
			}
		})
	}
}
