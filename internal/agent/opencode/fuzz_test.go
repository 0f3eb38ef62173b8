package opencode

import (
	"testing"

	"drover/internal/agent/agenttest"
)

// FuzzParse: see agenttest.FuzzParse (the CLI's output is untrusted).
func FuzzParse(f *testing.F) {
	agenttest.FuzzParse(f, "testdata/*.jsonl", Parse)
}
