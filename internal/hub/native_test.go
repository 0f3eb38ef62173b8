package hub

import (
	"testing"

	"drover/internal/protocol"
)

// TestSubmitNative: native is an agent jobs may name, with a prompt; only
// its jobs take --model, a name of bounded plain text.
func TestSubmitNative(t *testing.T) {
	ok := []protocol.SubmitRequest{
		{Agent: "native", Args: []string{"fix it"}},
		{Agent: "native", Args: []string{"fix it"}, Model: "qwen2.5-coder:32b"},
	}
	for _, req := range ok {
		if err := validateSubmit(req); err != nil {
			t.Errorf("%+v: %v", req, err)
		}
	}
	bad := []protocol.SubmitRequest{
		{Agent: "native"},
		{Agent: "claude", Args: []string{"fix it"}, Model: "opus"},
		{Agent: "exec", Args: []string{"true"}, Model: "m"},
		{Agent: "native", Args: []string{"fix it"}, Model: "a\nb"},
		{Agent: "native", Args: []string{"fix it"}, Model: string(make([]byte, protocol.MaxModel+1))},
	}
	for _, req := range bad {
		if err := validateSubmit(req); err == nil {
			t.Errorf("%+v: accepted", req)
		}
	}
	if !usesAccount("native") || usesAccount("exec") {
		t.Error("native runs under an account, exec does not")
	}
}
