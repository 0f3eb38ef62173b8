package claude

import (
	"testing"

	"drover/internal/agent/agenttest"
)

// FuzzParse: see agenttest.FuzzParse (the CLI's output is untrusted).
func FuzzParse(f *testing.F) {
	agenttest.FuzzParse(f, "testdata/*.jsonl", Parse,
		`{"type":"result","is_error":false,"result":"ok","usage":{"input_tokens":-1,"output_tokens":2}}`,
		`{"type":"result","usage":{"input_tokens":9223372036854775807}}`+"\n"+`{"type":"result","usage":{"input_tokens":1}}`,
		`{"type":"result","total_cost_usd":1e300}`,
		`{"type":"rate_limit_event","rate_limit_info":{"status":"rejected","resetsAt":1e300}}`,
		`{"type":"result","is_error":true,"result":"Claude AI usage limit reached|99999999999999"}`,
		`{"type":"system","subtype":"init","session_id":"s\u001b[2J"}`,
	)
}
