package hub

import (
	"net/http"
	"testing"

	"drover/internal/apitypes"
	"drover/internal/protocol"
)

// TestSubmitNative: native is an agent jobs may name, with a prompt; only
// its jobs take --model, a name of bounded plain text.
func TestSubmitNative(t *testing.T) {
	t.Parallel()
	ok := []apitypes.SubmitRequest{
		{Agent: "native", Args: []string{"fix it"}},
		{Agent: "native", Args: []string{"fix it"}, Model: "qwen2.5-coder:32b"},
		{Agent: "native", Args: []string{"fix it"}, Fallback: "local-gpu"},
	}
	for _, req := range ok {
		if err := validateSubmit(req); err != nil {
			t.Errorf("%+v: %v", req, err)
		}
	}
	bad := []apitypes.SubmitRequest{
		{Agent: "native"},
		{Agent: "claude", Args: []string{"fix it"}, Model: "opus"},
		{Agent: "exec", Args: []string{"true"}, Model: "m"},
		{Agent: "native", Args: []string{"fix it"}, Model: "a\nb"},
		{Agent: "native", Args: []string{"fix it"}, Model: string(make([]byte, protocol.MaxModel+1))},
		{Agent: "claude", Args: []string{"fix it"}, Fallback: "other"},
		{Agent: "native", Args: []string{"fix it"}, Fallback: "a\x1b[2J"},
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

// TestOfferNamesTheFallbackHere: a native job's offer names its fallback
// (given by label) as the account of that runner it is there, ready and
// not the account the job runs under; otherwise none.
func TestOfferNamesTheFallbackHere(t *testing.T) {
	t.Parallel()
	th := startHub(t, Config{})
	accts := []protocol.AccountInfo{
		{ID: "acct_1", Agent: "native", Label: "main", Kind: "api-key", State: protocol.AccountReady},
		{ID: "acct_2", Agent: "native", Label: "backup", Kind: "no-key", State: protocol.AccountReady},
	}
	sr, _ := th.dial(th.registerRunner("r1"), protocol.Hello{Slots: 1, Agents: []string{"exec", "native"}, Accounts: accts})
	for _, tc := range []struct{ pin, fallback, want string }{
		{"main", "backup", "acct_2"},
		{"main", "main", ""},      // the account it runs under
		{"main", "elsewhere", ""}, // not on this runner
	} {
		var v apitypes.JobView
		if code, e := th.call(th.admin, "POST", "/jobs", apitypes.SubmitRequest{Agent: "native", Args: []string{"fix it"},
			Account: tc.pin, Fallback: tc.fallback}, &v); code != http.StatusCreated || v.Fallback != tc.fallback {
			t.Fatalf("submit: %d %v %+v", code, e, v)
		}
		o := sr.offer()
		for o.Job != v.ID { // a re-offer of the last one, cancelled since
			o = sr.offer()
		}
		if o.Account != "acct_1" || o.Spec.Fallback != tc.want {
			t.Fatalf("fallback %q: offer account %q, fallback %q; want %q", tc.fallback, o.Account, o.Spec.Fallback, tc.want)
		}
		wantOK(t, sr.request(protocol.TypeDecline, protocol.Decline{AttemptRef: o.AttemptRef, Reason: "test"}))
		if code, e := th.call(th.admin, "POST", "/jobs/"+v.ID+"/cancel", nil, nil); code != http.StatusOK {
			t.Fatalf("cancel: %d %v", code, e)
		}
	}
}
